"""The consolidation stages, listed once. Each takes the batch state and returns it.

The local runner calls them in order; the Step Functions definition is built from `STAGES`, one
task per stage, passing `Batch` as JSON. Every write derives its ids from content, so a batch
replayed after a crash writes nothing twice; the checkpoint advances only for a clean batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pydantic import BaseModel

from mneme.consolidation.claims import split_speaker
from mneme.consolidation.models import Contradiction, Fact, Proposal, derived_id, is_claim, norm
from mneme.consolidation.reasoning import Reasoner, central, grounding_error, statement
from mneme.errors import Conflict, ReasonerOutputInvalid, StoreUnavailable, Throttled
from mneme.models import Episode
from mneme.ports import Clock, Embedder, RecordStore
from mneme.services.indexing import Indexer
from mneme.settings import ConsolidationSettings


@dataclass
class Deps:
    store: RecordStore
    clock: Clock
    embedder: Embedder
    reasoner: Reasoner
    indexer: Indexer
    settings: ConsolidationSettings


class Decision(BaseModel):
    action: str  # create | reinforce | supersede | unresolved
    fact_id: str
    cluster: int
    proposal: Proposal
    sources: list[str]
    replaces: str | None = None
    rivals: list[str] = []


class Batch(BaseModel):
    tenant: str
    scope_id: str
    run_id: str
    started_at: datetime
    base_version: int = 0  # the checkpoint version collected from; the checkpoint stage expects it
    episode_ids: list[str] = []
    last: tuple[datetime | None, str] | None = None
    clusters: list[list[str]] = []
    proposals: dict[int, Proposal] = {}
    decisions: list[Decision] = []
    counters: dict[str, dict[str, int]] = {}
    errors: list[dict[str, Any]] = []
    full: bool = False  # the batch hit batch_size: more episodes may be waiting
    collected_before: datetime | None = None  # collect read episodes created strictly before this
    leased_elsewhere: bool = False  # another run holds the scope's lease: every stage leaves it alone

    def count(self, stage: str, name: str, value: int = 1) -> None:
        self.counters.setdefault(stage, {}).setdefault(name, 0)
        self.counters[stage][name] += value

    def fail(self, stage: str, message: str, **context: Any) -> None:
        self.errors.append({"stage": stage, "message": message, **context})
        self.count(stage, "errors")


def _episodes(deps: Deps, batch: Batch) -> list[Episode]:
    found = deps.store.get_episodes(batch.tenant, batch.episode_ids)
    return [found[i] for i in batch.episode_ids if i in found]


def collect(deps: Deps, batch: Batch) -> Batch:
    checkpoint = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
    batch.base_version = checkpoint.version
    before = batch.started_at - timedelta(seconds=deps.settings.settle_seconds)
    after = (checkpoint.after_created_at, checkpoint.after_episode_id)
    episodes = deps.store.list_episodes_after(batch.tenant, batch.scope_id, after, before, deps.settings.batch_size)
    batch.collected_before = before
    batch.episode_ids = [e.episode_id for e in episodes]
    batch.last = (episodes[-1].created_at, episodes[-1].episode_id) if episodes else None
    batch.full = len(episodes) == deps.settings.batch_size
    batch.count("collect", "episodes_read", len(episodes))
    return batch


def _vectors(deps: Deps, episodes: list[Episode]) -> np.ndarray:
    if all(e.vector is not None and e.model_id == deps.embedder.model_id for e in episodes):
        return np.asarray([e.vector for e in episodes], dtype=np.float32)
    return deps.embedder.embed([e.content for e in episodes])


def cluster(deps: Deps, batch: Batch) -> Batch:
    """Greedy clustering around seeds in (occurred_at, id) order: deterministic for the same input.

    Episodes that state different values for a property never share a cluster, however similar
    their wording ("X's bank is A" / "X's bank is B"): one cluster, one claim.
    """
    episodes = sorted(_episodes(deps, batch), key=lambda e: (e.occurred_at, e.episode_id))
    if not episodes:
        return batch
    vectors = _vectors(deps, episodes)
    claims = [_claim(utterance(e)) for e in episodes]
    unassigned = list(range(len(episodes)))
    clusters: list[list[str]] = []
    while unassigned:
        seed = unassigned[0]
        similar = vectors[unassigned] @ vectors[seed]
        members = [
            i
            for i, score in zip(unassigned, similar, strict=True)
            if score >= deps.settings.cluster_threshold and claims[i] == claims[seed]
        ]
        clusters.append([episodes[i].episode_id for i in members])
        unassigned = [i for i in unassigned if i not in set(members)]
    batch.clusters = clusters
    batch.count("cluster", "clusters", len(clusters))
    return batch


def utterance(episode: Episode, *, dated: bool = False) -> str:
    """What the reasoner reads of an episode: its text (an STTP node's content, not its raw form),
    prefixed `Name: ` from the `speaker` metadata when the text names no speaker itself, so first-person
    statements have an owner ("I moved to Berlin" said by Maya → Maya / lives in / Berlin); `dated`
    prefixes the day it occurred: "[2026-03-01] Maya: I moved to Berlin"."""
    text = (episode.search_text or episode.content).strip()
    speaker = episode.metadata.get("speaker") if isinstance(episode.metadata, dict) else None
    if isinstance(speaker, str) and speaker.strip() and split_speaker(text)[0] is None:
        text = f"{speaker.strip()}: {text}"
    return f"[{episode.occurred_at:%Y-%m-%d}] {text}" if dated else text


def _claim(text: str) -> tuple[str, ...] | None:
    found = statement(text)
    return tuple(norm(part) for part in found) if found else None


def extract(deps: Deps, batch: Batch) -> Batch:
    """One proposal per cluster; grounding rejects unsupported ones; one retry, told why when the
    answer was rejected. Any other error (`ReasonerRefused`: access denied, unknown model; a bug) is a
    configuration problem: it stops the stage at once instead of failing every cluster twice."""
    found = deps.store.get_episodes(batch.tenant, batch.episode_ids)
    for index, ids in enumerate(batch.clusters):
        dated = deps.reasoner.generative  # an LLM weighs dates ("the latest holds"); patterns need none
        texts = [utterance(found[i], dated=dated) for i in ids if i in found]
        if not texts:
            continue
        feedback: str | None = None
        problem = "no answer"
        for _attempt in (1, 2):
            batch.count("extract", "reasoner_calls")
            try:
                proposal = deps.reasoner.propose(texts, feedback)
            except (StoreUnavailable, Throttled) as e:  # transient: retry without blaming the answer
                problem = f"{e.code}: {e.message}"
                batch.count("extract", "reasoner_failures")
                continue
            except ReasonerOutputInvalid as e:  # a bad answer: retry once, told why
                problem = feedback = f"{e.code}: {e.message}"
                batch.count("extract", "reasoner_failures")
                continue
            feedback = grounding_error(proposal, texts, generative=deps.reasoner.generative)
            if feedback is None:
                batch.proposals[index] = proposal
                break
            problem = feedback
            batch.count("extract", "rejected")
        else:
            batch.fail("extract", f"cluster not consolidated after 2 attempts: {problem}", episode_ids=ids)
    batch.count("extract", "proposals", len(batch.proposals))
    return batch


def reconcile(deps: Deps, batch: Batch) -> Batch:
    """Decide per proposal: create, reinforce a near-duplicate, or supersede an older value.

    A fact is a claim (entity, property, value) or a summary of two or more episodes: a lone episode
    with no claim stays an episode (rollups still cover its period).

    Proposals of this batch count as rivals too, so two values in one batch are never both active.
    """
    facts = {f.fact_id: f for f in deps.store.list_facts(batch.tenant, batch.scope_id)}
    active = [f for f in facts.values() if f.status == "active"]
    claims: dict[tuple[str, str], set[str]] = {}
    for fact in active:
        if fact.entity and fact.property:
            claims.setdefault((norm(fact.entity), norm(fact.property)), set()).add(fact.fact_id)
    for index, proposal in sorted(batch.proposals.items()):
        sources = batch.clusters[index]
        if not is_claim(proposal) and len(sources) < 2:  # the episode already says it: no new knowledge
            batch.count("reconcile", "kept_as_episode")
            continue
        fact_id = Fact.id_for(batch.tenant, batch.scope_id, proposal, sources)
        decision = Decision(action="create", fact_id=fact_id, cluster=index, proposal=proposal, sources=sources)
        if proposal.entity and proposal.property:
            key = (norm(proposal.entity), norm(proposal.property))
            rivals = sorted(claims.get(key, set()) - {fact_id})
            if fact_id in facts or fact_id in claims.get(key, set()):
                decision.action = "reinforce"
            elif len(rivals) == 1:
                decision.action, decision.replaces = "supersede", rivals[0]
            elif len(rivals) > 1:
                decision.action, decision.rivals = "unresolved", rivals
            claims[key] = (claims.get(key, set()) - {decision.replaces}) | {fact_id}
        elif fact_id in facts:
            decision.action = "reinforce"
        else:
            duplicate = _near_duplicate(deps, proposal.summary, [f for f in active if not f.entity])
            if duplicate is not None:
                decision.action, decision.fact_id = "reinforce", duplicate
        batch.decisions.append(decision)
        batch.count("reconcile", decision.action)
    return batch


def _near_duplicate(deps: Deps, summary: str, candidates: list[Fact]) -> str | None:
    usable = [f for f in candidates if f.vector is not None and f.model_id == deps.embedder.model_id]
    if not usable:
        return None
    query = deps.embedder.embed([summary])[0]
    scores = np.asarray([f.vector for f in usable], dtype=np.float32) @ query
    best = int(np.argmax(scores))
    return usable[best].fact_id if scores[best] >= deps.settings.dedupe_threshold else None


def confidence(support: int, structured: bool) -> float:
    """Stash's n/(n+2), raised by (1 - base) * 0.3 when entity and property are known."""
    base = support / (support + 2)
    return round(base + (1 - base) * 0.3 if structured else base, 4)


def commit(deps: Deps, batch: Batch) -> Batch:
    """Write facts, supersessions and contradictions in one atomic call; index the facts."""
    found = deps.store.get_episodes(batch.tenant, [i for d in batch.decisions for i in d.sources])
    ids = {d.fact_id for d in batch.decisions} | {d.replaces for d in batch.decisions if d.replaces}
    ids |= {rival for d in batch.decisions for rival in d.rivals}
    existing = deps.store.get_facts(batch.tenant, sorted(ids))
    now = deps.clock.now()
    writes: dict[str, Fact] = {}
    contradictions: list[Contradiction] = []
    for decision in batch.decisions:
        sources = [found[i] for i in decision.sources if i in found]
        fact = writes.get(decision.fact_id) or existing.get(decision.fact_id)
        fact = _merge(deps, batch, decision, fact, sources, now)
        writes[fact.fact_id] = fact
        if decision.action == "supersede" and decision.replaces is not None:
            old = writes.get(decision.replaces) or existing[decision.replaces]
            newer = fact.valid_from >= old.valid_from
            if newer and old.status == "active":
                writes[old.fact_id] = old.model_copy(
                    update={
                        "status": "superseded",
                        "valid_until": fact.valid_from,
                        "superseded_by": fact.fact_id,
                        "updated_at": now,
                    }
                )
            contradictions.append(_contradiction(batch, old, fact, "superseded" if newer else "unresolved", now))
        for rival in decision.rivals:
            contradictions.append(_contradiction(batch, writes.get(rival) or existing[rival], fact, "unresolved", now))
    facts = list(writes.values())
    vectors = deps.embedder.embed([f.summary for f in facts]) if facts else np.zeros((0, deps.embedder.dimension))
    facts = [
        f.model_copy(update={"vector": v.tolist(), "model_id": deps.embedder.model_id})
        for f, v in zip(facts, vectors, strict=True)
    ]
    deps.store.put_facts(facts, contradictions)
    deps.indexer.index_facts(facts)
    batch.count("commit", "facts_written", len(facts))
    batch.count("commit", "contradictions", len(contradictions))
    return batch


def _merge(
    deps: Deps, batch: Batch, decision: Decision, fact: Fact | None, sources: list[Episode], now: datetime
) -> Fact:
    source_ids = sorted({*(fact.source_episode_ids if fact else []), *(e.episode_id for e in sources)})
    first_seen = min((e.occurred_at for e in sources), default=now)
    structured = bool(decision.proposal.entity and decision.proposal.property)
    if fact is None:
        p = decision.proposal
        return Fact(
            tenant=batch.tenant,
            fact_id=decision.fact_id,
            scope_id=batch.scope_id,
            entity=p.entity,
            property=p.property,
            value=p.value,
            summary=p.summary,
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
        created_at=now,  # type: ignore[arg-type]
    )


def _periods(episode: Episode) -> list[tuple[str, str]]:
    year, week, _ = episode.occurred_at.isocalendar()
    return [("daily", f"{episode.occurred_at:%Y-%m-%d}"), ("weekly", f"{year}-W{week:02d}")]


def rollup(deps: Deps, batch: Batch) -> Batch:
    """Daily and weekly summaries of the batch's episodes, merged with earlier ones of the period.

    A superseded value does not stay in a roll-up as current: the periods of a fact this batch
    superseded are re-rolled, and a roll-up's summary is drawn only from episodes that are not the
    sources of a superseded (or expired) claim. An STTP episode contributes its node's text."""
    facts = deps.store.list_facts(batch.tenant, batch.scope_id)
    outdated = {i for f in facts if f.tier == "raw" and f.status != "active" and f.entity for i in f.source_episode_ids}
    replaced = {d.replaces for d in batch.decisions if d.action == "supersede" and d.replaces}
    wanted = set(batch.episode_ids) | {i for f in facts if f.fact_id in replaced for i in f.source_episode_ids}
    periods: dict[tuple[str, str], set[str]] = {}
    for episode in deps.store.get_episodes(batch.tenant, sorted(wanted)).values():
        for key in _periods(episode):
            periods.setdefault(key, set()).add(episode.episode_id)
    ids = {key: derived_id("ro_", batch.tenant, batch.scope_id, *key) for key in periods}
    existing = deps.store.get_facts(batch.tenant, list(ids.values()))
    now = deps.clock.now()
    rolled = []
    for (tier, label), members in sorted(periods.items()):
        previous = existing.get(ids[tier, label])
        source_ids = sorted({*(previous.source_episode_ids if previous else []), *members})
        found = deps.store.get_episodes(batch.tenant, source_ids)
        present = [i for i in source_ids if i in found]
        if not present:
            continue
        current = [utterance(found[i]) for i in present if i not in outdated]
        gist = central(current) if current else "every claim of the period has been superseded since"
        rolled.append(
            Fact(
                tenant=batch.tenant,
                fact_id=ids[tier, label],
                scope_id=batch.scope_id,
                tier=tier,
                summary=f"{tier} summary {label} ({len(source_ids)} observations): {gist}",
                confidence=confidence(len(source_ids), False),
                source_episode_ids=source_ids,
                valid_from=min(found[i].occurred_at for i in present),
                created_at=previous.created_at if previous else now,
                updated_at=now,
                reinforced_at=now,
            )
        )
    if rolled:
        vectors = deps.embedder.embed([f.summary for f in rolled])
        rolled = [
            f.model_copy(update={"vector": v.tolist(), "model_id": deps.embedder.model_id})
            for f, v in zip(rolled, vectors, strict=True)
        ]
        deps.store.put_facts(rolled)
        deps.indexer.index_facts(rolled)
    batch.count("rollup", "rollups", len(rolled))
    return batch


def maintain(deps: Deps, batch: Batch) -> Batch:
    """Decay untouched facts, expire the faint ones, flag facts whose sources are gone (this scope;
    the run sweeps every other scope of the tenant too: `ConsolidationService.maintain`)."""
    changed = maintain_facts(deps, batch.tenant, deps.store.list_facts(batch.tenant, batch.scope_id))
    batch.count("maintain", "facts_updated", len(changed))
    batch.count("maintain", "expired", sum(1 for f in changed if f.status == "expired"))
    return batch


def maintain_facts(deps: Deps, tenant: str, facts: list[Fact]) -> list[Fact]:
    """Maintenance of `facts` (idempotent: decay is computed from `reinforced_at`); the changed ones."""
    now = deps.clock.now()
    settings = deps.settings
    changed = []
    for fact in facts:
        if fact.status != "active":
            continue
        periods = math.floor((now - fact.reinforced_at).total_seconds() / 3600 / settings.decay_hours)
        structured = fact.entity is not None and fact.property is not None
        effective = round(confidence(len(fact.source_episode_ids), structured) * settings.decay**periods, 4)
        present = deps.store.get_episodes(tenant, fact.source_episode_ids)
        stale = len(present) < len(fact.source_episode_ids)
        update: dict[str, Any] = {}
        if effective != fact.confidence:
            update["confidence"] = effective
        if stale != fact.stale:
            update["stale"] = stale
        if effective < settings.expire_below:
            update.update(status="expired", valid_until=now)
        if update:
            changed.append(fact.model_copy(update={**update, "updated_at": now}))
    if changed:
        deps.store.put_facts(changed)
        deps.indexer.index_facts(changed)
    return changed


def checkpoint(deps: Deps, batch: Batch) -> Batch:
    """Advance past the batch only when every earlier stage succeeded for it. The dirty mark is cleared
    only up to what collect could read: an episode still settling keeps its scope dirty."""
    if batch.leased_elsewhere:
        return batch
    if batch.errors:
        batch.count("checkpoint", "held")
        return batch
    if batch.last is not None:
        current = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
        advanced = current.model_copy(
            update={
                "after_created_at": batch.last[0],
                "after_episode_id": batch.last[1],
                "version": batch.base_version + 1,
                "processed": current.processed + len(batch.episode_ids),
            }
        )
        try:
            deps.store.save_checkpoint(advanced, batch.base_version)
        except Conflict as e:
            batch.fail("checkpoint", e.message)
            return batch
        batch.count("checkpoint", "advanced", len(batch.episode_ids))
    if not batch.full and batch.collected_before is not None:  # marks at or after the cut-off stay
        deps.store.clear_dirty(batch.tenant, batch.scope_id, batch.collected_before - timedelta(microseconds=1))
    return batch


Stage = Callable[[Deps, Batch], Batch]
STAGES: tuple[tuple[str, Stage], ...] = (
    ("collect", collect),
    ("cluster", cluster),
    ("extract", extract),
    ("reconcile", reconcile),
    ("commit", commit),
    ("rollup", rollup),
    ("maintain", maintain),
    ("checkpoint", checkpoint),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)
