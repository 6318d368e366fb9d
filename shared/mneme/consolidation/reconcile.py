"""The reconcile and commit stages: what each grounded proposal becomes, then written in one call.

reconcile decides per proposal: create, reinforce a near-duplicate, or supersede an older value (the same
entity and property, or the fact the reasoner said it updates; of a property held several at once, a son or a
tool, only the value its turn says it replaced). A fact is a claim (entity, property,
value), or a generative reasoner's summary of two or more turns: an extractive summary or a lone turn with
no claim stays an episode. A replayed batch finds its facts already holding its sources: nothing is
decided, nothing written. commit writes the facts, supersessions and contradictions with ids derived from
their content, and indexes them, with the standing claims a later turn of the batch changed without a value
reconcile could read ("Greg left the company" after "my manager is Greg") marked stale (`changed`).
"""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np

from mneme.consolidation.batch import Batch, Decision, Deps, Working
from mneme.consolidation.windows import partition
from mneme.language import changes, reverts
from mneme.language.grounding import confidence
from mneme.models import Episode, session_position
from mneme.records import Contradiction, Fact, Proposal, derived_id, is_claim, many_valued, norm


def reconcile(deps: Deps, batch: Batch, work: Working) -> Batch:
    """Proposals of this batch count as rivals too, so two values in one batch are never both active."""
    facts = work.fact_map()
    active = [f for f in facts.values() if f.status == "active"]
    claims: dict[tuple[str, str], set[str]] = {}
    for fact in active:
        if fact.entity and fact.property:
            claims.setdefault((norm(fact.entity), norm(fact.property)), set()).add(fact.fact_id)
    for window, proposals in sorted(batch.proposals.items()):
        for item in range(len(proposals)):
            decision = _decide(deps, batch, work, facts, active, claims, window, item)
            if decision is None:
                continue
            batch.decisions.append(decision)
            batch.count("reconcile", decision.action)
    return batch


def _decide(
    deps: Deps,
    batch: Batch,
    work: Working,
    facts: dict[str, Fact],
    active: list[Fact],
    claims: dict[tuple[str, str], set[str]],
    window: int,
    item: int,
) -> Decision | None:
    proposal = batch.proposals[window][item]
    sources = batch.cited(window, proposal)
    if not is_claim(proposal) and (len(sources) < 2 or not deps.reasoner.generative):
        batch.count("reconcile", "kept_as_episode")  # the episodes already say it: no new knowledge
        return None
    fact_id = Fact.id_for(batch.tenant, batch.scope_id, proposal, sources)
    decision = Decision(action="create", fact_id=fact_id, window=window, item=item)
    held = facts.get(fact_id)
    if held is not None and set(sources) <= set(held.source_episode_ids):
        batch.count("reconcile", "unchanged")  # a replay: this batch already committed it
        return None
    named = proposal.supersedes if proposal.supersedes in facts and proposal.supersedes != fact_id else None
    if proposal.entity and proposal.property:
        key = (norm(proposal.entity), norm(proposal.property))
        rivals = sorted(claims.get(key, set()) - {fact_id, named})
        if rivals and many_valued(proposal.property):
            rivals = _replaced(work, sources, proposal.property, {r: _value(batch, facts, r) for r in rivals})
        if fact_id in facts or fact_id in claims.get(key, set()):
            decision.action = "reinforce"
        elif named is not None:
            decision.action, decision.replaces, decision.rivals = "supersede", named, rivals
        elif len(rivals) == 1:
            decision.action, decision.replaces = "supersede", rivals[0]
        elif len(rivals) > 1:
            decision.action, decision.rivals = "unresolved", rivals
        if named is not None and (old := facts[named]).entity and old.property:
            claims.get((norm(old.entity), norm(old.property)), set()).discard(named)
        claims[key] = (claims.get(key, set()) - {decision.replaces}) | {fact_id}
    elif fact_id in facts:
        decision.action = "reinforce"
    else:
        duplicate = _near_duplicate(deps, proposal.summary, [f for f in active if not f.entity])
        if duplicate is not None and set(sources) <= set(facts[duplicate].source_episode_ids):
            batch.count("reconcile", "unchanged")
            return None
        if duplicate is not None:
            decision.action, decision.fact_id = "reinforce", duplicate
    return decision


def _replaced(work: Working, sources: list[str], prop: str, rivals: dict[str, str]) -> list[str]:
    """Of the values an entity holds several of at once ("speaks", "son", "uses": `many_valued`; `rivals`: fact id ->
    value), the one a source says the new value replaced: the one it names beside a change ("switched from Jira to
    Linear"), or the only one when it says an end ("we dropped it for Linear") or, for a tool, any change ("I use
    Things for my tasks these days"). A source of no change, of one more, or of a change word that ends nothing, adds
    one ("we also use Figma", "I speak Spanish a bit now"): no rival."""
    told = [
        one for one in map(changes.said, work.episodes(sources).values()) if one.reading.cue and not one.reading.adds
    ]
    text = " ".join(one.text.lower() for one in told)
    named = [r for r, value in rivals.items() if value and re.search(rf"\b{re.escape(norm(value))}\b", text)]
    if len(named) == 1:
        return named
    only = len(rivals) == 1 and bool(told)  # none named: a single rival, named, was returned above
    return list(rivals) if only and (norm(prop) == "uses" or any(one.reading.ends for one in told)) else []


def _value(batch: Batch, facts: dict[str, Fact], fact_id: str) -> str:
    """The value of a standing claim, or of one this batch proposes."""
    if fact_id in facts:
        return facts[fact_id].value or ""
    return next((batch.proposal(d).value or "" for d in batch.decisions if d.fact_id == fact_id), "")


def _near_duplicate(deps: Deps, summary: str, candidates: list[Fact]) -> str | None:
    usable = [f for f in candidates if f.vector is not None and f.model_id == deps.embedder.model_id]
    if not usable:
        return None
    query = deps.embedder.embed([summary])[0]
    scores = np.asarray([f.vector for f in usable], dtype=np.float32) @ query
    best = int(np.argmax(scores))
    return usable[best].fact_id if scores[best] >= deps.settings.dedupe_threshold else None


def commit(deps: Deps, batch: Batch, work: Working) -> Batch:
    """Write facts, supersessions and contradictions in one atomic call; index the facts."""
    found = work.episodes([i for d in batch.decisions for i in batch.cited(d.window, batch.proposal(d))])
    existing = work.fact_map()
    now = deps.clock.now()
    writes: dict[str, Fact] = {}
    contradictions: list[Contradiction] = []
    for decision in batch.decisions:
        proposal = batch.proposal(decision)
        sources = [found[i] for i in batch.cited(decision.window, proposal) if i in found]
        fact = writes.get(decision.fact_id) or existing.get(decision.fact_id)
        fact = _merge(batch, decision, proposal, fact, sources, now)
        writes[fact.fact_id] = fact
        if decision.action == "supersede" and decision.replaces is not None:
            old = writes.get(decision.replaces) or existing[decision.replaces]
            newer = fact.valid_from >= old.valid_from
            if newer and old.status == "active":
                writes[old.fact_id] = old.model_copy(
                    update={"status": "superseded", "valid_until": fact.valid_from, "superseded_by": fact.fact_id,
                            "updated_at": now}
                )  # fmt: skip
            contradictions.append(_contradiction(batch, old, fact, "superseded" if newer else "unresolved", now))
        for rival in decision.rivals:
            contradictions.append(_contradiction(batch, writes.get(rival) or existing[rival], fact, "unresolved", now))
    facts = list(writes.values())
    if facts:
        vectors = deps.embedder.embed([f.summary for f in facts])
        facts = [
            f.model_copy(update={"vector": v.tolist(), "model_id": deps.embedder.model_id})
            for f, v in zip(facts, vectors, strict=True)
        ]
    marked = changed(deps, batch, work, {**existing, **{f.fact_id: f for f in facts}}, now)
    facts = list({**{f.fact_id: f for f in facts}, **marked}.values())
    work.put_facts(facts, contradictions)
    batch.count("commit", "facts_written", len(facts))
    batch.count("commit", "changed", len(marked))
    batch.count("commit", "contradictions", len(contradictions))
    return batch


def _merge(
    batch: Batch, decision: Decision, proposal: Proposal, fact: Fact | None, sources: list[Episode], now: datetime
) -> Fact:
    source_ids = sorted({*(fact.source_episode_ids if fact else []), *(e.episode_id for e in sources)})
    first_seen = min((e.occurred_at for e in sources), default=now)
    structured = bool(proposal.entity and proposal.property)
    if fact is None:
        return Fact(
            tenant=batch.tenant,
            fact_id=decision.fact_id,
            scope_id=batch.scope_id,
            entity=proposal.entity,
            property=proposal.property,
            value=proposal.value,
            summary=proposal.summary,
            source_episode_ids=source_ids,
            confidence=confidence(len(source_ids), structured),
            valid_from=first_seen,
            created_at=now,
            updated_at=now,
            reinforced_at=now,
        )
    return fact.model_copy(
        update={
            "source_episode_ids": source_ids,
            "confidence": confidence(len(source_ids), fact.entity is not None),
            "valid_from": min(fact.valid_from, first_seen),
            "updated_at": now,
            "reinforced_at": now,
        }
    )


def _contradiction(batch: Batch, old: Fact, new: Fact, resolution: str, now: datetime) -> Contradiction:
    return Contradiction(
        tenant=batch.tenant,
        contradiction_id=derived_id("co_", old.fact_id, new.fact_id),
        scope_id=batch.scope_id,
        entity=old.entity or "",
        property=old.property or "",
        old_fact_id=old.fact_id,
        new_fact_id=new.fact_id,
        old_value=old.value or "",
        new_value=new.value or "",
        resolution=resolution,
        created_at=now,
    )


def changed(deps: Deps, batch: Batch, work: Working, facts: dict[str, Fact], now: datetime) -> dict[str, Fact]:
    """The standing claims a later turn of this batch changes (`mneme.language.changes.update_reason`: one owner, one
    subject, a change) that no proposal superseded, because the turn gives no new value a claim could hold
    ("Greg left the company", "we moved out last week"), each marked `changed_by` its latest such turn and
    stale from then; recall ranks that turn above the claim and says so. A turn of another partition never
    changes a claim (`partition_keys`). Words first, then the cosine of the stored vectors, as recall does;
    with no question to say what is asked, the turn must say it changes something ("moved", "left", "new"):
    "Deploys move to Tuesdays after the billing cutover" names no change of the migration's deadline. A change a later
    turn of the batch calls off ("Rang up to cancel … so we're staying put") marks nothing."""
    said = sorted(work.episodes(batch.episode_ids).values(), key=lambda e: (session_position(e), e.episode_id))
    turns = [e for e in said if (reading := changes.read(changes.statement(e))).cue or reading.ends]
    standing = [
        f
        for f in facts.values()
        if f.status == "active" and f.tier == "raw" and f.entity and f.changed_by is None and f.vector is not None
    ]
    pairs = [
        (fact, turn)
        for fact in standing
        for turn in turns
        if turn.occurred_at > fact.valid_from
        and turn.episode_id not in fact.source_episode_ids
        and changes.update_reason(fact, turn, 1.0)
    ]
    if not pairs:
        return {}
    keys = deps.settings.partition_keys
    sources = work.episodes([i for fact, _ in pairs for i in fact.source_episode_ids])
    vectors = deps.store.get_episodes(batch.tenant, sorted({t.episode_id for _, t in pairs}))
    marked: dict[str, Fact] = {}
    for fact, turn in pairs:  # in the order of the turns: the latest change is the one kept
        held = [sources[i] for i in fact.source_episode_ids if i in sources]
        vector = vectors[turn.episode_id].vector if turn.episode_id in vectors else None
        if vector is None or fact.model_id != deps.embedder.model_id or not held:
            continue
        if any(partition(e, keys) != partition(turn, keys) for e in held):
            continue
        similarity = float(np.dot(np.asarray(fact.vector, dtype=np.float32), np.asarray(vector, dtype=np.float32)))
        if changes.update_reason(fact, turn, similarity) and not _undone(turn, fact, said, keys):
            update = {"changed_by": turn.episode_id, "changed_at": turn.occurred_at, "stale": True, "updated_at": now}
            marked[fact.fact_id] = fact.model_copy(update=update)
    return marked


def _undone(change: Episode, fact: Fact, said: list[Episode], keys: list[str]) -> bool:
    """A turn after `change` (`said` is the batch in order), of its partition, calls it off (`reverts.undoes`):
    `fact` stands."""
    after = said[said.index(change) + 1 :]
    return any(
        reverts.undoes(change, later, fact) for later in after if partition(later, keys) == partition(change, keys)
    )
