"""The recall pipeline's last stages: select → prerequisites → pack. Which candidates take a place (roll-ups
only when asked, a claim fact folding its grounding turns, one place per observation, the best `limit`),
the `depends_on` prerequisites that join them, and the context pack (`stages` lists every stage).
"""

from __future__ import annotations

from mneme.language.grounding import grounds
from mneme.models import Episode, Memory
from mneme.records import Fact, is_claim
from mneme.services.context_pack import PackItem, build_pack
from mneme.services.indexing import speaker
from mneme.services.recall.records import Record, Result, fact_sources, lifecycle, to_result
from mneme.services.recall.request import RecallRequest
from mneme.services.recall.run import Candidate, QueryTime, Run

RELATED_CARDS = 5  # Engram: up to 5 omitted-but-relevant candidates are shown as cards
RELATED_SHARE = 0.5  # ... those scoring at least this share of the best result
FOLD_SHARE = 0.5  # a claim fact folds a source turn when its cosine with the query is at least this share of the turn's
GROUNDING_LINES = 3  # source turns a claim fact shows beside it, at most


# -- select --------------------------------------------------------------------------------------
def select(run: Run) -> None:
    """Roll-ups only when asked for (`rollups_asked`); a claim fact folds the source turns that state it
    (its grounding turns: the fact shows them beside it and outranks them, unless it has since changed), a
    summary folds nothing; a fact beside the point of the question (`_beside_the_point`) folds nothing, nor
    one whose cosine with the query is below FOLD_SHARE of its turn's (the turn says more: "My brother Jonas
    cooks in Ghent, and I teach in Utrecht" → "Ilse's brother is Jonas."); then
    one place per observation (`one_place`) and the best `limit` are selected; the rest are omitted with
    reason `limit` (and may show as cards)."""
    took = len(run.candidates)
    dropped: list[tuple[str, str]] = []
    if not rollups_asked(run.request, run.when):  # the index leaves them out; the fresh tail reads none
        dropped += [(c.id, "rollup_not_asked") for c in run.candidates.values() if _rollup(c)]
    else:
        dropped += [(c.id, "rollup_finer_than_period") for c in run.candidates.values() if _too_fine(run, c)]
    gone = dict(dropped)
    folded: dict[str, list[str]] = {}
    folding = (c for c in run.candidates.values() if _claim(c) and c.id not in gone and not _beside_the_point(c))
    for fact in sorted(folding, key=_order):
        assert isinstance(fact.record, Fact)
        for source_id in fact.record.source_episode_ids:
            source = run.candidates.get(source_id)
            if source is None or source_id in gone or not _grounds(fact.record, source.record):
                continue
            if fact.vector < FOLD_SHARE * source.vector:  # the turn answers what the fact drawn from it does not
                continue
            if not fact.changed:  # a claim since changed keeps the place time gave it, below the change
                fact.score = max(fact.score, source.score)  # ties go to facts (KIND_ORDER)
            dropped.append((source_id, f"source_of:{fact.id}"))
            gone[source_id] = dropped[-1][1]
            folded.setdefault(fact.id, []).append(source_id)
    ordered = sorted((c for c in run.candidates.values() if c.id not in gone), key=_order)
    ordered, repeats = one_place(run, ordered, folded)
    dropped += repeats
    run.ranked = ordered[: run.request.limit]
    run.related = ordered[run.request.limit :]
    dropped += [(c.id, "limit") for c in run.related]
    run.note("select", took, dropped, limit=run.request.limit)


def rollups_asked(request: RecallRequest, when: QueryTime) -> bool:
    """Roll-ups are for time: asked for when `tiers` names one of theirs or the query names a period."""
    return bool(request.tiers and set(request.tiers) - {"raw"}) or when.since is not None


# A roll-up digests its period: it answers for a period named in the query up to ROLLUP_SPAN of its own
# periods long (a day's digest for "last week", not for "in 2023"), unless `tiers` asks for its tier.
TIER_DAYS = {"daily": 1, "weekly": 7, "monthly": 31, "quarterly": 92, "yearly": 366}
ROLLUP_SPAN = 8


def rollup_tiers(request: RecallRequest, when: QueryTime) -> frozenset[str] | None:
    """The roll-up tiers a search takes for a query naming a period (without `tiers`): those coarse enough for
    it, so a roll-up that `_too_fine` would drop never takes a candidate's place in the search's top k (None:
    any)."""
    since, until = when.since, when.until
    if request.tiers or since is None or until is None:
        return None
    return frozenset(t for t, days in TIER_DAYS.items() if days * ROLLUP_SPAN >= (until - since).days)


def _too_fine(run: Run, candidate: Candidate) -> bool:
    record, since, until = candidate.record, run.when.since, run.when.until
    if not isinstance(record, Fact) or record.tier == "raw" or since is None or until is None:
        return False
    asked = record.tier in (run.request.tiers or [])
    return not asked and TIER_DAYS.get(record.tier, 1) * ROLLUP_SPAN < (until - since).days


def _rollup(candidate: Candidate) -> bool:
    return isinstance(candidate.record, Fact) and candidate.record.tier != "raw"


def _claim(candidate: Candidate) -> bool:
    return isinstance(candidate.record, Fact) and candidate.record.tier == "raw" and is_claim(candidate.record)


def said(episode: Episode) -> str:
    """A turn's text led by its speaker, as consolidation read it ('Maya: I moved to Berlin')."""
    who = speaker(episode)
    text = episode.search_text or episode.content
    return f"{who}: {text}" if who else text


def _beside_the_point(fact: Candidate) -> bool:
    """A claim fact the question is not asked about (another person's, `other_person`) or that only says
    what the question says (`echo`) does not take its source turns' place: a turn may say more than the
    fact drawn from it ("My niece Amara is at Riverside Primary" → "User's niece is Amara.")."""
    return "other_person" in fact.scores or "echo" in fact.scores


def _grounds(fact: Fact, record: Record | None) -> bool:
    return isinstance(record, Episode) and grounds(fact.entity, fact.value, said(record))


def one_place(
    run: Run, ordered: list[Candidate], folded: dict[str, list[str]]
) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """One observation takes one place: a claim fact shows up to GROUNDING_LINES of its grounding turns
    (those it folded first) that no better result shows; a roll-up whose period overlaps a better one's
    is left out (`repeats:<id>`)."""
    facts = {c.id: c for c in ordered[: run.request.limit + RELATED_CARDS] if _claim(c)}
    wanted = sorted({i for c in facts.values() if isinstance(c.record, Fact) for i in c.record.source_episode_ids})
    sources = run.deps.store.get_episodes(run.flt.tenant, wanted, vectors=False) if wanted else {}
    run.sources.update(sources)
    shown: set[str] = set()
    rolled: dict[str, str] = {}  # episode id -> the roll-up that covers it
    kept: list[Candidate] = []
    dropped: list[tuple[str, str]] = []
    for candidate in ordered:
        record = candidate.record
        if isinstance(record, Fact) and record.tier != "raw":
            overlap = next((rolled[i] for i in record.source_episode_ids if i in rolled), None)
            if overlap is not None:
                dropped.append((candidate.id, f"repeats:{overlap}"))
                continue
            rolled.update(dict.fromkeys(record.source_episode_ids, candidate.id))
        elif isinstance(record, Fact) and candidate.id in facts:
            mine = folded.get(candidate.id, [])
            others = [i for i in record.source_episode_ids if i not in mine and _grounds(record, sources.get(i))]
            candidate.grounding = [i for i in [*mine, *others] if i not in shown][:GROUNDING_LINES]
            shown.update(candidate.grounding)
        elif isinstance(record, Episode):
            if candidate.id in shown:
                dropped.append((candidate.id, "shown_beside_fact"))
                continue
            shown.add(candidate.id)
        kept.append(candidate)
    return kept, dropped


def _order(candidate: Candidate) -> tuple[float, int, str]:
    rank = 0 if isinstance(candidate.record, Fact) else 1 if isinstance(candidate.record, Memory) else 2
    return (-round(candidate.score, 6), rank, candidate.id)  # ties: facts, then memories, then episodes


# -- prerequisites -------------------------------------------------------------------------------
def prerequisites(run: Run) -> None:
    """`depends_on` prerequisites of a selected memory join the results just before it (Engram),
    even without their own keyword overlap; they come on top of `limit`."""
    took = len(run.ranked)
    deps, tenant = run.deps, run.flt.tenant
    now = deps.clock.now()
    out: list[Candidate] = []
    present = {c.id for c in run.ranked}
    added: list[str] = []
    revived: list[str] = []
    requires: dict[str, list[str]] = {}
    for candidate in run.ranked:
        memory = candidate.record
        if isinstance(memory, Memory) and memory.depends_on and memory.scope_id:
            siblings = [  # those the caller may know of: never another author's draft
                m
                for m in deps.store.list_scoped_memories(tenant, memory.scope_id)
                if m.key in memory.depends_on
                and (m.status == "published" or (m.status == "pending" and m.author == run.caller.principal))
            ]
            for prereq in siblings:
                if prereq.memory_id in present or prereq.status != "published" or lifecycle(prereq, now)[0] == 0:
                    continue
                extra = Candidate(prereq.memory_id, record=prereq, score=candidate.score, origin="prerequisite")
                extra.scores = {"prerequisite": 1.0}
                out.append(extra)
                present.add(prereq.memory_id)
                if run.omitted.pop(prereq.memory_id, None) is None:
                    added.append(prereq.memory_id)
                else:  # a candidate dropped earlier (cut by the limit, not admitted) comes back as a prerequisite
                    revived.append(prereq.memory_id)
                run.related = [c for c in run.related if c.id != prereq.memory_id]
            requires[candidate.id] = [m.memory_id for m in siblings]
        out.append(candidate)
    run.ranked = out
    shown = [c.record for c in [*out, *relevant_related(run)] if c.record is not None]
    deps.scopes.prefetch(tenant, [r.scope_id for r in shown if r.scope_id and r.scope_id not in run.chains])
    unread = [r for r in shown if isinstance(r, Fact) and not run.sources.keys() >= set(r.source_episode_ids)]
    run.sources.update(fact_sources(deps.store, tenant, unread))  # every shown fact's sources, one read
    run.results = [_result(run, c).model_copy(update={"requires": requires.get(c.id, [])}) for c in out]
    run.note("prerequisites", took, [], added=added, revived=revived)


# -- pack ----------------------------------------------------------------------------------------
def pack(run: Run) -> None:
    """The context pack: tiered disclosure (bodies, cards, up to 5 related cards, a fetch line),
    the session delta, cut to the token budget; delivered bodies are recorded for the session."""
    request, deps = run.request, run.deps
    if request.delta and request.session_id:
        delivered = deps.store.get_delivered(run.flt.tenant, run.caller.principal, request.session_id)
        run.already = [r.id for r in run.results if r.id in delivered]
    items = [pack_item(r) for r in run.results if r.id not in run.already]
    related = [pack_item(_result(run, c)) for c in relevant_related(run)]
    query = " ".join((request.query or "").split())
    total = len(run.results) + len(run.related)

    def title(shown: int) -> str:  # what the pack shows, after a budget cut (already-loaded ones included)
        loaded = shown + len(run.already)
        return f"# recall: {query} (scope {run.scope_path}, loaded {loaded} / {total} total related)"

    run.pack = build_pack(
        title, items, request.disclosure.expand_top, request.disclosure.budget_tokens, run.already, related
    )
    if request.session_id and run.pack.expanded:
        deps.store.add_delivered(run.flt.tenant, run.caller.principal, request.session_id, run.pack.expanded)
    run.note("pack", len(run.ranked), [], expanded=len(run.pack.expanded), cards=len(run.pack.cards))


def _result(run: Run, candidate: Candidate) -> Result:
    assert candidate.record is not None
    result = to_result(
        candidate.record, candidate.score, candidate.scores, run.path_of, run.sources, candidate.grounding
    )
    return result.model_copy(update={"since_changed": candidate.changed}) if candidate.changed else result


def relevant_related(run: Run) -> list[Candidate]:
    """Engram's omitted-but-relevant cards: up to RELATED_CARDS of the candidates the limit cut, those
    scoring at least RELATED_SHARE of the best result (a weak tail is not worth the agent's reading)."""
    best = max((c.score for c in run.ranked), default=0.0)
    return [c for c in run.related[:RELATED_CARDS] if c.score >= best * RELATED_SHARE]


def pack_item(result: Result) -> PackItem:
    """A result as the pack shows it; a fact with the source turns that state it beside it (its grounding
    lines: 'said by Maya on 2024-03-02: I moved to Berlin'), so the agent reads the evidence."""
    label = result.key or f"{result.occurred_at:%Y-%m-%d}"
    summary = (result.metadata.get("summary") if result.kind == "memory" else None) or result.content
    lines = [
        f"said{' by ' + who if (who := (s.get('metadata') or {}).get('speaker')) and isinstance(who, str) else ''}"
        f" on {str(s.get('occurred_at', ''))[:10]}: {s['text']}"
        for s in result.sources or []
        if s.get("text")
    ]
    body = "\n".join([result.content, *lines])
    if lines:
        summary = f"{summary} ({lines[0]})"
    return PackItem(
        id=result.id,
        kind=result.kind,
        scope=result.scope,
        label=label,
        body=body,
        summary=summary,
        requires=result.requires,
        pending=result.status == "pending",
        stale=bool((result.fact or {}).get("stale")),
        earlier=f"since changed: see {changed['by']}, {changed['at']}" if (changed := result.since_changed) else None,
    )
