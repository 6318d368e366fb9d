"""The recall pipeline, listed once: search → fuse → admit → lifecycle → fallback → time → select →
prerequisites → pack.

Each stage is a small function of the `Run`, called once, in order (`STAGES`). A stage takes the
live candidates, passes some on and drops the others with a reason; `Run.note` records what it took
in, what it passed on and what it dropped. The explain trace *is* that record, so every candidate
that entered the pipeline ends either in the results or in `omitted`, exactly once.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from mneme.errors import MnemeError
from mneme.grounding import grounds
from mneme.models import Episode, Memory
from mneme.observability import logger
from mneme.ports import EpisodeStore, embed_query
from mneme.records import Fact, is_claim
from mneme.search_models import Hit, has_metadata
from mneme.services import anchors as anchor_rule
from mneme.services import recall_context, recall_hop, recall_scope
from mneme.services.context_pack import PackItem, build_pack
from mneme.services.indexing import episode_text, memory_text, speaker
from mneme.services.recall_records import (
    Record,
    Result,
    lifecycle,
    load,
    record_text,
    strong_text,
    to_result,
)
from mneme.services.recall_run import Candidate, QueryTime, Run, stored_vectors, with_vectors
from mneme.services.recall_time import time_stage
from mneme.text import meaningful_words, stem, terms

if TYPE_CHECKING:
    from mneme.services.recall import RecallRequest

FRESH_LIMIT = 200
GAP_LIMIT = 5000  # the newest episodes read from records while the index is rebuilt (its lag is past a DAY)
DAY = 86400.0
MIN_VECTOR = 0.25  # balanced strictness admits vector-only episodes and facts at or above this cosine
FETCHED_BOOST = 1.05  # Engram: a memory an agent fetched in full (`ids`) ranks a little higher
FETCHED = ("", "fetched")  # (principal, session) of the per-tenant record of fetched memory ids
RELATED_CARDS = 5  # Engram: up to 5 omitted-but-relevant candidates are shown as cards
RELATED_SHARE = 0.5  # ... those scoring at least this share of the best result
SPEAKER_BOOST = 1.5  # a turn spoken by a person the query names
NAME_WORD = re.compile(r"[^\W_]+(?:['’]s)?")  # a query word, with its possessive
FALLBACK_WIDTH = 4  # the lexical fallback asks for this many times the channels' k
GROUNDING_LINES = 3  # source turns a claim fact shows beside it, at most


Stage = Callable[[Run], None]


# -- search --------------------------------------------------------------------------------------
def search(run: Run) -> None:
    """Vector kNN and BM25 over the anchor words, under the same filters; plus the fresh tail of an
    eventually consistent index and the caller's own pending revisions. No anchors: no search."""
    counts: dict[str, int] = {}
    if not run.anchors:
        run.note("search", 0, [], channels=counts, skipped="no_anchors")
        return
    assert run.request.query is not None
    deps, scoring = run.deps, run.scoring
    text: Future[list[tuple[Hit, float]]] | None = None
    if scoring.alpha > 0 and scoring.beta > 0:  # the text search runs while the query is embedded
        text = _channels().submit(contextvars.copy_context().run, _lexical, run, run.k)
    if scoring.alpha > 0:
        hits: list[Hit] = []
        try:
            run.query_vector = embed_query(deps.embedder, run.request.query)
            hits = deps.index.search_vector(run.flt, run.query_vector, deps.embedder.model_id, run.k)
        except MnemeError as e:
            if scoring.fallback == "never":
                raise
            run.vector_error, run.query_vector = e.code, None
            logger.warning("vector channel failed", extra={"code": e.code})
        for hit in hits:
            candidate = run.candidates.setdefault(hit.doc_id, Candidate(hit.doc_id))
            candidate.vector = max(0.0, hit.score)
            candidate.channels.add("vector")
        counts["vector"] = len(hits)
    if scoring.beta > 0:
        lexical = text.result() if text is not None else _lexical(run, run.k)
        for hit, normalised in lexical:
            candidate = run.candidates.setdefault(hit.doc_id, Candidate(hit.doc_id))
            candidate.lexical, candidate.raw_bm25 = normalised, hit.score
            candidate.channels.add("lexical")
        counts["lexical"] = len(lexical)
    if deps.index.visibility_lag > 0:
        counts["fresh"] = _fresh_tail(run)
    if (run.flt.kinds is None or "memory" in run.flt.kinds) and not run.flt.metadata:  # memories carry none
        counts["revision"] = _own_revisions(run)
    run.note("search", 0, [], channels=counts, error=run.vector_error)


@functools.cache
def _channels() -> ThreadPoolExecutor:
    """Threads for a hybrid recall's text search, which runs while the query is embedded (onnxruntime
    and SQLite release the GIL: on a second core the two overlap)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-text")


def _lexical(run: Run, k: int) -> list[tuple[Hit, float]]:
    """BM25 hits, each with its score scaled by the top score. The raw query goes to the index: it
    drops stopwords and generic words (`mneme.text`) and reads date phrases; a query without anchors
    never gets here."""
    hits = run.deps.index.search_text(run.flt, run.request.query or "", k) if run.anchors else []
    top = max((hit.score for hit in hits), default=1.0) or 1.0
    return [(hit, hit.score / top) for hit in hits]


def _fresh_tail(run: Run) -> int:
    """Read-after-write over an eventually consistent index (OpenSearch Serverless has no refresh):
    score the episodes written within the index's `visibility_lag` from their records."""
    deps, flt = run.deps, run.flt
    lag = deps.index.visibility_lag
    since = deps.clock.now() - timedelta(seconds=lag)
    vector = run.query_vector
    added = 0
    for episode in deps.store.list_recent_episodes(flt.tenant, since, FRESH_LIMIT if lag < DAY else GAP_LIMIT):
        if episode.episode_id in run.candidates or episode.archived or not _in_filter(run, episode):
            continue
        cosine = 0.0
        if vector is not None and episode.vector is not None and episode.model_id == deps.embedder.model_id:
            cosine = max(0.0, float(np.dot(vector, np.asarray(episode.vector, dtype=np.float32))))
        overlap = anchor_rule.anchor_hits(run.anchors, episode_text(episode)) / max(len(run.anchors), 1)
        if cosine <= 0 and overlap <= 0:
            continue
        candidate = run.candidates[episode.episode_id] = Candidate(episode.episode_id, cosine, overlap)
        candidate.record = episode  # read just now, strongly consistent: `_load` does not read it again
        candidate.channels.update({"fresh", *(["vector"] if cosine else []), *(["lexical"] if overlap else [])})
        added += 1
    return added


def _in_filter(run: Run, episode: Episode) -> bool:
    flt = run.flt
    return (
        _under(run, episode.scope_id)
        and (flt.kinds is None or "episode" in flt.kinds)
        and (flt.tiers is None or episode.tier in flt.tiers)
        and (flt.since is None or episode.occurred_at >= flt.since)
        and (flt.until is None or episode.occurred_at < flt.until)
        and (flt.session_id is None or episode.session_id == flt.session_id)
        and has_metadata(episode.metadata, flt)
    )


def _under(run: Run, scope_id: str | None) -> bool:
    """Is the scope inside the searched subtree? (Tagged memories, with no scope, live at root.)"""
    if scope_id is None:
        return run.flt.ancestor_id == run.deps.scopes.root(run.flt.tenant).scope_id
    chain = run.deps.scopes.chain_of(run.flt.tenant, scope_id).chain
    return run.flt.ancestor_id in {scope.scope_id for scope in chain}


def _own_revisions(run: Run) -> int:
    """The caller's pending edits of published memories are searchable by the caller (the index
    holds the published text): score their text by anchor overlap, like the fresh tail; when the
    published text is already a candidate, the revision's words still count for it."""
    deps, flt = run.deps, run.flt
    added = 0
    for revision in deps.store.list_revisions(flt.tenant, author=run.caller.principal):
        if "body" not in revision.changes:
            continue
        memory = deps.store.get_memory(flt.tenant, revision.memory_id)
        if memory is None or memory.status != "published" or not _under(run, memory.scope_id):
            continue
        text = memory_text(memory.model_copy(update={"body": revision.changes["body"]}))
        overlap = anchor_rule.anchor_hits(run.anchors, text) / len(run.anchors)
        found = run.candidates.get(memory.memory_id)
        if overlap > 0 and (found is None or found.lexical < overlap):
            candidate = run.candidates.setdefault(memory.memory_id, Candidate(memory.memory_id))
            candidate.lexical = overlap
            candidate.channels.update({"lexical", "revision"})
            added += found is None
    return added


# -- fuse ----------------------------------------------------------------------------------------
def fuse(run: Run) -> None:
    """Load the records (tenant and visibility checked) and combine the channels with alpha/beta."""
    took = len(run.candidates)
    dropped = _load(run, list(run.candidates.values()))
    scoring = run.scoring
    live = [c for c in run.candidates.values() if c.id not in dict(dropped)]
    names = _named_speakers(run, live)
    if names:
        _without_names(run, live, names)
    if run.query_vector is not None:
        _fill_vector_scores(run, live)
    weight = (scoring.alpha if any("vector" in c.channels for c in live) else 0) + scoring.beta
    for candidate in live:
        fused = (scoring.alpha * candidate.vector + scoring.beta * candidate.lexical) / (weight or 1)
        candidate.score = fused
        candidate.scores = {
            "vector": round(candidate.vector, 6),
            "lexical": round(candidate.lexical, 6),
            "bm25": round(candidate.raw_bm25, 6),
        }
        _resonate(run, candidate)
        _speaker(run, candidate)
    recall_context.below_context_owners(run, live)
    run.note("fuse", took, dropped, **({"speakers_named": sorted(names)} if names else {}))


def _named_speakers(run: Run, candidates: list[Candidate]) -> set[str]:
    """The query's words that name a speaker of the candidates (stemmed, as anchors are)."""
    return _speakers(candidates) & run.anchors


def _speakers(candidates: Iterable[Candidate]) -> set[str]:
    """The words of the candidates' speakers (stemmed)."""
    found: set[str] = set()
    for candidate in candidates:
        who = speaker(candidate.record) if isinstance(candidate.record, Episode) else None
        if who:
            found |= terms(who)
    return found


def _without_names(run: Run, candidates: list[Candidate], names: set[str]) -> None:
    """A speaker the query names is a field, matched by the speaker rule (and by the speaker that leads
    each turn's BM25 text). Left in the query, the name dominates both channels and draws the turns that
    merely address that person ('Tom! Hi!'): so the candidates' cosines and BM25 scores are taken again
    with the query's speaker names left out (one more embedding and one more text search)."""
    assert run.request.query is not None
    rest = " ".join(
        w
        for w in NAME_WORD.findall(run.request.query)
        if stem(w.lower().replace("’", "'").removesuffix("'s")) not in names
    )
    if not meaningful_words(rest):
        return
    if run.scoring.beta > 0:
        hits = run.deps.index.search_text(run.flt, rest, run.k)
        top = max((hit.score for hit in hits), default=1.0) or 1.0
        found = {hit.doc_id: hit for hit in hits}
        for candidate in candidates:
            if "lexical" in candidate.channels:
                hit = found.get(candidate.id)
                candidate.lexical, candidate.raw_bm25 = (hit.score / top, hit.score) if hit else (0.0, 0.0)
    if run.query_vector is None:
        return
    run.query_vector = embed_query(run.deps.embedder, rest)
    stored = stored_vectors(run, candidates)
    for candidate in candidates:
        cosine = _cosine(run, stored.get(candidate.id))
        if cosine is not None:
            candidate.vector = cosine


def _speaker(run: Run, candidate: Candidate) -> None:
    """A question that names a person favours that person's turns: an episode whose speaker
    (`metadata.speaker`) is among the query's anchors scores SPEAKER_BOOST times higher."""
    record = candidate.record
    who = speaker(record) if isinstance(record, Episode) else None
    if who and terms(who) & run.anchors:
        candidate.scores["speaker"] = SPEAKER_BOOST
        candidate.score *= SPEAKER_BOOST


def _load(run: Run, candidates: list[Candidate]) -> list[tuple[str, str]]:
    """The candidates' records, episodes without their vectors (`stored_vectors` reads those it needs);
    the fresh tail's episodes come with theirs."""
    wanted = [c.id for c in candidates if c.record is None]
    records = load(run.deps.store, run.caller, wanted, vectors=False) if wanted else {}
    dropped = []
    for candidate in candidates:
        candidate.record = candidate.record or records.get(candidate.id)
        if candidate.record is None:
            dropped.append((candidate.id, "not_found"))
    return dropped


def _fill_vector_scores(run: Run, candidates: list[Candidate]) -> None:
    """A hit found only by BM25 gets its real cosine from the stored vector, not 0 (exact matches
    that the vector top-k missed must not be ranked below weaker hits both channels found)."""
    wanted = [c for c in candidates if "vector" not in c.channels]
    stored = stored_vectors(run, wanted)
    for candidate in wanted:
        cosine = _cosine(run, stored.get(candidate.id))
        if cosine is not None:
            candidate.vector = cosine


def _cosine(run: Run, stored: NDArray[np.float32] | None) -> float | None:
    """The query's cosine to a stored vector (floored at 0), or None without one."""
    assert run.query_vector is not None
    if stored is None:
        return None
    return max(0.0, float(np.dot(run.query_vector, stored)))


def _resonate(run: Run, candidate: Candidate) -> None:
    """Locus' resonance signal (against the node's model AVEC), added to the score with its weight."""
    avec, weight = run.request.avec, run.scoring.resonance
    if avec is None or weight <= 0 or not isinstance(candidate.record, Episode):
        return
    resonance = avec.resonance(((candidate.record.structured or {}).get("avec") or {}).get("model"))
    if resonance is not None:
        candidate.scores["resonance"] = round(resonance, 6)
        candidate.score += weight * resonance


# -- admit ---------------------------------------------------------------------------------------
def admit(run: Run) -> None:
    """The strictness rule (`admitted`): precision = Engram's anchor rule with its strong-field
    exception, balanced = a term hit or (episodes and facts) cosine ≥ MIN_VECTOR, recall = all.
    Balanced also admits a candidate linked to one of the best hits, by its vector or by a name it
    shares with them (`recall_hop`: trace `linked`, `named`, `names`)."""
    took = len(run.candidates)
    strictness = run.scoring.strictness
    verdict = {c.id: admitted(strictness, c, run.anchors) for c in run.candidates.values()}
    rejected = [c for c in run.candidates.values() if not verdict[c.id]]
    passed = [c for c in run.candidates.values() if verdict[c.id]]
    sources, near = recall_hop.reach(run, passed, rejected, MIN_VECTOR)
    with_vectors(run, sources + near)
    links = recall_hop.link(run, sources, near)
    named: dict[str, str] = {}
    names: list[str] = []
    if recall_hop.followable(run):
        unlinked = [c for c in rejected if c.id not in links]
        named, names = recall_hop.name_links(run, passed, unlinked, _speakers(run.candidates.values()))
    dropped = [(c.id, f"not_admitted:{strictness}") for c in rejected if c.id not in links and c.id not in named]
    trace = {"linked": links, "named": named, "names": names}
    run.note("admit", took, dropped, **{key: value for key, value in trace.items() if value})


def admitted(strictness: str, candidate: Candidate, query_anchors: set[str]) -> bool:
    assert candidate.record is not None
    if strictness == "recall":
        return True
    if strictness == "precision":
        return anchor_rule.admits(query_anchors, record_text(candidate.record), strong_text(candidate.record))
    if "lexical" in candidate.channels:
        return True
    # Engram: vector hits without a term overlap never admit a memory
    return not isinstance(candidate.record, Memory) and candidate.vector >= MIN_VECTOR


# -- lifecycle -----------------------------------------------------------------------------------
def lifecycle_stage(run: Run) -> None:
    """Lifecycle factors (expired and superseded items dropped), the fetched-memory boost, then the scope
    rule: local guidance ×SCOPE_FACTOR, and no copy of guidance less local than another (`recall_scope`)."""
    took = len(run.candidates)
    dropped = _age(run, list(run.candidates.values()))
    gone = dict(dropped)
    dropped += recall_scope.local_over_global(run, [c for c in run.candidates.values() if c.id not in gone])
    run.note("lifecycle", took, dropped)


def _age(run: Run, candidates: list[Candidate]) -> list[tuple[str, str]]:
    now = run.deps.clock.now()
    fetched = _fetched(run, candidates)
    dropped = []
    for candidate in candidates:
        assert candidate.record is not None
        factor, reason = lifecycle(candidate.record, now, run.request.as_of)
        if factor == 0:
            dropped.append((candidate.id, reason or "lifecycle"))
            continue
        candidate.scores["lifecycle"] = factor
        candidate.score *= factor
        if candidate.id in fetched:
            candidate.scores["fetched"] = FETCHED_BOOST
            candidate.score *= FETCHED_BOOST
    return dropped


def _fetched(run: Run, candidates: list[Candidate]) -> set[str]:
    if not any(isinstance(c.record, Memory) for c in candidates):
        return set()
    return run.deps.store.get_delivered(run.flt.tenant, *FETCHED)


# -- fallback ------------------------------------------------------------------------------------
def fallback(run: Run) -> None:
    """Locus' fallback: when the policy allows (always, or on_empty with nothing left, or the vector
    channel failed), a wider lexical search. Its candidates go through the same fuse, admit and
    lifecycle rules: a fallback widens the channel, never the admission rule."""
    scoring = run.scoring
    run.fallback = {
        "policy": scoring.fallback,
        "triggered": bool(run.vector_error),
        "reason": "vector_unavailable" if run.vector_error else None,
    }
    wanted = (
        run.vector_error is not None
        or scoring.fallback == "always"
        or (scoring.fallback == "on_empty" and not run.candidates)
    )
    if not wanted or not run.anchors:
        run.note("fallback", len(run.candidates), [], found=0, reconsidered=[], passed=[])
        return
    took = len(run.candidates)
    fresh: list[Candidate] = []
    reconsidered: list[str] = []  # not admitted from the main channels; the lexical channel may admit them
    for hit, normalised in _lexical(run, run.k * FALLBACK_WIDTH):
        if hit.doc_id in run.candidates:
            continue
        reason = run.omitted.get(hit.doc_id)
        if reason is not None and not reason.startswith("not_admitted"):
            continue
        if reason is not None:
            del run.omitted[hit.doc_id]
            reconsidered.append(hit.doc_id)
        candidate = Candidate(hit.doc_id, lexical=normalised, raw_bm25=hit.score, channels={"lexical"})
        candidate.origin = "fallback"
        fresh.append(candidate)
    dropped = _load(run, fresh)
    live = [c for c in fresh if c.record is not None]
    for candidate in live:
        candidate.score = candidate.lexical
        candidate.scores = {"vector": 0.0, "lexical": round(candidate.lexical, 6), "bm25": round(candidate.raw_bm25, 6)}
        _speaker(run, candidate)
    strictness = scoring.strictness
    dropped += [(c.id, f"not_admitted:{strictness}") for c in live if not admitted(strictness, c, run.anchors)]
    gone = dict(dropped)
    dropped += _age(run, [c for c in live if c.id not in gone])
    gone = dict(dropped)
    for candidate in fresh:
        if candidate.id not in gone:
            run.candidates[candidate.id] = candidate
    if not run.fallback["triggered"]:  # it ran: say so, and why, whether or not it found anything new
        run.fallback.update(triggered=True, reason=scoring.fallback)
    passed = [c.id for c in fresh if c.id not in gone]
    run.note(
        "fallback",
        took + len(fresh),
        dropped,
        found=len(fresh) - len(reconsidered),
        reconsidered=reconsidered,
        passed=passed,
    )


# -- select --------------------------------------------------------------------------------------
def select(run: Run) -> None:
    """Roll-ups only when asked for (`rollups_asked`); a claim fact folds the source turns that state it
    (its grounding turns: the fact shows them beside it and outranks them), a summary folds nothing; then
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
    for fact in sorted((c for c in run.candidates.values() if _claim(c) and c.id not in gone), key=_order):
        assert isinstance(fact.record, Fact)
        for source_id in fact.record.source_episode_ids:
            source = run.candidates.get(source_id)
            if source is None or source_id in gone or not _grounds(fact.record, source.record):
                continue
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
    deps.scopes.prefetch(tenant, [r.scope_id for r in shown if r.scope_id])  # their paths, a tree level at a time
    run.results = [
        to_result(deps.store, c.record, c.score, c.scores, lambda s: _path(run, s), c.grounding).model_copy(
            update={"requires": requires.get(c.id, [])}
        )
        for c in out
        if c.record is not None
    ]
    run.note("prerequisites", took, [], added=added, revived=revived)


def _path(run: Run, scope_id: str) -> str:
    return run.deps.scopes.chain_of(run.flt.tenant, scope_id).path


# -- pack ----------------------------------------------------------------------------------------
def pack(run: Run) -> None:
    """The context pack: tiered disclosure (bodies, cards, up to 5 related cards, a fetch line),
    the session delta, cut to the token budget; delivered bodies are recorded for the session."""
    request, deps = run.request, run.deps
    if request.delta and request.session_id:
        delivered = deps.store.get_delivered(run.flt.tenant, run.caller.principal, request.session_id)
        run.already = [r.id for r in run.results if r.id in delivered]
    items = [pack_item(r) for r in run.results if r.id not in run.already]
    related = [
        pack_item(to_result(deps.store, c.record, c.score, c.scores, lambda s: _path(run, s), c.grounding))
        for c in relevant_related(run)
        if c.record is not None
    ]
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
    )


STAGES: tuple[tuple[str, Stage], ...] = (
    ("search", search),
    ("fuse", fuse),
    ("admit", admit),
    ("lifecycle", lifecycle_stage),
    ("fallback", fallback),
    ("time", time_stage),
    ("select", select),
    ("prerequisites", prerequisites),
    ("pack", pack),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)


def run_stages(run: Run) -> Run:
    for _, stage in STAGES:
        stage(run)
    return run


def explain(run: Run) -> dict[str, Any]:
    """The trace: the stages' own records, the filters and anchors, every omission once."""
    assert run.pack is not None
    return {
        "filters": run.flt.model_dump(mode="json", exclude={"tenant", "principal"}),
        "anchors": sorted(run.anchors),
        "stages": run.stages,
        "fallback": run.fallback,
        "omitted": [{"id": doc_id, "reason": reason} for doc_id, reason in run.omitted.items()],
        "context": {
            "expanded": run.pack.expanded,
            "cards": run.pack.cards,
            "related": run.pack.related,
            "dropped": run.pack.dropped,
            "already_loaded": run.already,
            "tokens": run.pack.tokens,
        },
    }


def record_fetched(store: EpisodeStore, tenant: str, ids: list[str]) -> None:
    """Remember which memories were fetched in full, per tenant (one row per memory id: bounded by
    the tenant's curated memories; the boost is a fixed factor, not a count)."""
    if ids:
        store.add_delivered(tenant, *FETCHED, ids)
