"""The consolidation stages, listed once. Each takes the batch state and returns it.

The local runner calls them in order; the Step Functions definition is built from `STAGES`, one
task per stage, passing `Batch` as JSON. Every write derives its ids from content, and what a batch
already committed is left untouched when it is replayed after a crash; the checkpoint advances only
for a batch without errors. A cluster the reasoner cannot consolidate is set aside with its reason
(listed in the run, counted, a metric) instead of holding the scope: at once when its answers were
rejected twice, after MAX_HOLDS held runs when the reasoner was unavailable.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel

from mneme.consolidation.reasoning import Reasoner, statement
from mneme.errors import Conflict, MnemeError, ReasonerOutputInvalid, StoreUnavailable, Throttled
from mneme.grounding import confidence, digest, grounding_error, utterance
from mneme.models import Episode
from mneme.observability import metrics
from mneme.ports import Clock, ConsolidationStore, Embedder, EpisodeStore, FactStore
from mneme.records import MAX_KEPT, Contradiction, Fact, Proposal, derived_id, is_claim, listed, norm
from mneme.services.indexing import Indexer
from mneme.settings import ConsolidationSettings

MAX_HOLDS = 3  # runs in a row a scope's checkpoint may be held by an unavailable reasoner
OUTAGE = 3  # clusters in a row the reasoner was unavailable for: the stage stops calling it
ATTEMPTS = 2  # reasoner calls per cluster and run
SOURCE_READ = 500  # source episode ids per read in the maintenance sweep (`maintain_facts`)
# When extract must stop calling the reasoner (time.monotonic()): set per task in AWS from the Lambda's
# remaining time (`ConsolidationService.step`), so every call ends within the task's time; None locally.
DEADLINE: ContextVar[float | None] = ContextVar("consolidation_deadline", default=None)


class ConsolidatingStore(ConsolidationStore, EpisodeStore, FactStore, Protocol):
    """The record store's roles consolidation uses."""


@dataclass
class Deps:
    store: ConsolidatingStore
    clock: Clock
    embedder: Embedder
    reasoner: Reasoner
    indexer: Indexer
    settings: ConsolidationSettings


class Decision(BaseModel):
    action: str  # create | reinforce | supersede | unresolved | unchanged (a replay: nothing to write)
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
    holds: int = 0  # runs in a row that held the checkpoint before this one (`Checkpoint.held`)
    set_aside: list[dict[str, Any]] = []  # clusters given up on: reason, episode ids (bounded: `listed`)

    def count(self, stage: str, name: str, value: int = 1) -> None:
        self.counters.setdefault(stage, {}).setdefault(name, 0)
        self.counters[stage][name] += value

    def fail(self, stage: str, message: str, *, episode_ids: list[str] | None = None, **context: Any) -> None:
        """Record an error (it holds the checkpoint); episodes are listed bounded (`listed`)."""
        self.errors.append(
            {"stage": stage, "message": message, **(listed(episode_ids) if episode_ids else {}), **context}
        )
        self.count(stage, "errors")


def _episodes(deps: Deps, batch: Batch) -> list[Episode]:
    found = deps.store.get_episodes(batch.tenant, batch.episode_ids)
    return [found[i] for i in batch.episode_ids if i in found]


def collect(deps: Deps, batch: Batch) -> Batch:
    checkpoint = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
    batch.base_version, batch.holds = checkpoint.version, checkpoint.held
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


def _claim(text: str) -> tuple[str, ...] | None:
    found = statement(text)
    return tuple(norm(part) for part in found) if found else None


def extract(deps: Deps, batch: Batch) -> Batch:
    """One proposal per cluster; grounding rejects unsupported ones; ATTEMPTS calls per cluster, a retry
    told why the answer was rejected. A cluster whose answers were rejected (ungrounded, malformed) is set
    aside with its reason; one the reasoner was unavailable for holds the checkpoint (an error) until
    MAX_HOLDS runs in a row have held it, then it is set aside too. After OUTAGE unavailable clusters in a
    row the stage stops calling. Any other error (`ReasonerRefused`: access denied, unknown model; a bug)
    is a configuration problem: it stops the stage at once."""
    found = deps.store.get_episodes(batch.tenant, batch.episode_ids)
    give_up = batch.holds + 1 >= MAX_HOLDS  # this run is the last that may hold the checkpoint
    outage = 0
    deadline = DEADLINE.get()
    for index, ids in enumerate(batch.clusters):
        if deadline is not None and time.monotonic() >= deadline:
            _defer(batch, found, index)
            break
        dated = deps.reasoner.generative  # an LLM weighs dates ("the latest holds"); patterns need none
        present = [i for i in ids if i in found]
        texts = [utterance(found[i], dated=dated) for i in present]
        if not texts:
            continue
        if outage >= OUTAGE:
            _unavailable(batch, ids, "the reasoner was unavailable for the clusters before", give_up)
            continue
        proposal, problem, transient = _propose(deps, batch, texts)
        if proposal is not None:
            batch.proposals[index] = proposal
            if proposal.sources:  # the fact's sources: the episodes it cites (grounding checked them)
                batch.clusters[index] = [present[n - 1] for n in sorted(set(proposal.sources))]
            outage = 0
        elif transient:
            outage += 1
            _unavailable(batch, ids, problem, give_up)
        else:
            outage = 0
            _set_aside(batch, ids, f"not consolidated after {ATTEMPTS} attempts: {problem}")
    batch.count("extract", "proposals", len(batch.proposals))
    return batch


def _defer(batch: Batch, found: dict[str, Episode], index: int) -> None:
    """Out of time at cluster `index`: the batch ends just before the first episode (in collection order)
    of a cluster not yet tried; those episodes wait for the next batch (`full`: the loop goes on). A
    cluster already tried that reaches past the cut is committed now and found `unchanged` next time."""
    waiting = {i for ids in batch.clusters[index:] for i in ids}
    cut = min(batch.episode_ids.index(i) for i in waiting)
    batch.count("extract", "deferred", len(batch.clusters) - index)
    if cut == 0 or batch.episode_ids[cut - 1] not in found:
        batch.fail("extract", "out of time before a cluster could be tried")
        return
    batch.episode_ids = batch.episode_ids[:cut]
    last = found[batch.episode_ids[-1]]
    batch.last, batch.full = (last.created_at, last.episode_id), True
    batch.clusters = batch.clusters[:index]


def _propose(deps: Deps, batch: Batch, texts: list[str]) -> tuple[Proposal | None, str, bool]:
    """(a grounded proposal or None, why not, whether the last failure was the reasoner being unavailable)."""
    feedback: str | None = None
    problem, transient = "no answer", False
    for _attempt in range(ATTEMPTS):
        batch.count("extract", "reasoner_calls")
        try:
            proposal = deps.reasoner.propose(texts, feedback)
        except (StoreUnavailable, Throttled) as e:  # transient: retry without blaming the answer
            problem, transient = f"{e.code}: {e.message}", True
            batch.count("extract", "reasoner_failures")
            continue
        except ReasonerOutputInvalid as e:  # a bad answer: retry, told why
            problem = feedback = f"{e.code}: {e.message}"
            transient = False
            batch.count("extract", "reasoner_failures")
            continue
        feedback = grounding_error(proposal, texts, generative=deps.reasoner.generative)
        if feedback is None:
            return proposal, "", False
        problem, transient = feedback, False
        batch.count("extract", "rejected")
    return None, problem, transient


def _unavailable(batch: Batch, ids: list[str], problem: str, give_up: bool) -> None:
    if give_up:
        _set_aside(batch, ids, f"the reasoner was unavailable in {MAX_HOLDS} runs in a row: {problem}")
    else:
        batch.fail("extract", f"cluster not consolidated, the reasoner was unavailable: {problem}", episode_ids=ids)


def _set_aside(batch: Batch, ids: list[str], reason: str) -> None:
    """Give up on a cluster: its episodes stay episodes (recall finds them), the batch goes on."""
    batch.set_aside.append({"scope_id": batch.scope_id, "stage": "extract", "reason": reason[:300], **listed(ids)})
    batch.count("extract", "set_aside")
    metrics.add_metric(name="ConsolidationClustersSetAside", unit=MetricUnit.Count, value=1)


def reconcile(deps: Deps, batch: Batch) -> Batch:
    """Decide per proposal: create, reinforce a near-duplicate, or supersede an older value.

    A fact is a claim (entity, property, value), or a generative reasoner's summary of two or more
    episodes: an extractive summary (a copy of a turn) or a lone episode with no claim stays an episode.
    A replayed batch finds its facts already holding its sources: `unchanged`, nothing is written.

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
        if not is_claim(proposal) and (len(sources) < 2 or not deps.reasoner.generative):
            batch.count("reconcile", "kept_as_episode")  # the episodes already say it: no new knowledge
            continue
        fact_id = Fact.id_for(batch.tenant, batch.scope_id, proposal, sources)
        decision = Decision(action="create", fact_id=fact_id, cluster=index, proposal=proposal, sources=sources)
        held = facts.get(fact_id)
        if held is not None and set(sources) <= set(held.source_episode_ids):
            batch.count("reconcile", "unchanged")  # a replay: this batch already committed it
            continue
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
            if duplicate is not None and set(sources) <= set(facts[duplicate].source_episode_ids):
                batch.count("reconcile", "unchanged")
                continue
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
        created_at=now,
    )


def _periods(episode: Episode) -> list[tuple[str, str]]:
    year, week, _ = episode.occurred_at.isocalendar()
    return [("daily", f"{episode.occurred_at:%Y-%m-%d}"), ("weekly", f"{year}-W{week:02d}")]


def rollup(deps: Deps, batch: Batch) -> Batch:
    """Daily and weekly digests of the batch's episodes, merged with earlier ones of the period: the
    active claims stated in the period and its topics (`digest`). Roll-ups are for time: recall returns
    them when a query names a period or asks for their tier, and they never stand in for the episodes.

    A superseded value does not stay in a roll-up as current: the periods of a fact this batch
    superseded are re-rolled, from the active claims and the turns that are not the sources of a
    superseded (or expired) claim. A period whose episodes were all rolled already (a replay) is left
    as it is. An STTP episode contributes its node's text."""
    facts = deps.store.list_facts(batch.tenant, batch.scope_id)
    outdated = {i for f in facts if f.tier == "raw" and f.status != "active" and f.entity for i in f.source_episode_ids}
    replaced = {d.replaces for d in batch.decisions if d.action == "supersede" and d.replaces}
    rerolled = {i for f in facts if f.fact_id in replaced for i in f.source_episode_ids}
    wanted = set(batch.episode_ids) | rerolled
    periods: dict[tuple[str, str], set[str]] = {}
    for episode in deps.store.get_episodes(batch.tenant, sorted(wanted)).values():
        for key in _periods(episode):
            periods.setdefault(key, set()).add(episode.episode_id)
    ids = {key: derived_id("ro_", batch.tenant, batch.scope_id, *key) for key in periods}
    existing = deps.store.get_facts(batch.tenant, list(ids.values()))
    claims = sorted((f for f in facts if f.tier == "raw" and f.status == "active" and is_claim(f)),
                    key=lambda f: (f.valid_from, f.fact_id))  # fmt: skip
    now = deps.clock.now()
    rolled = []
    for (tier, label), members in sorted(periods.items()):
        previous = existing.get(ids[tier, label])
        if previous is not None and members <= set(previous.source_episode_ids) and not members & rerolled:
            continue  # rolled already: a replay writes nothing
        source_ids = sorted({*(previous.source_episode_ids if previous else []), *members})
        found = deps.store.get_episodes(batch.tenant, source_ids, vectors=False)
        present = [i for i in source_ids if i in found]
        if not present:
            continue
        stated = [f.summary for f in claims if set(f.source_episode_ids) & set(present)]
        current = [i for i in present if i not in outdated]
        text = digest(stated, [utterance(found[i]) for i in current])
        if not text and current:
            continue  # nothing but small talk ("Lol.", "Night!"): no digest to write
        rolled.append(
            Fact(
                tenant=batch.tenant,
                fact_id=ids[tier, label],
                scope_id=batch.scope_id,
                tier=tier,
                summary=text or "every claim of the period has been superseded since",
                confidence=confidence(len(source_ids), False),
                source_episode_ids=source_ids,
                valid_from=min(found[i].occurred_at for i in present),
                created_at=previous.created_at if previous else now,
                updated_at=now,
                reinforced_at=previous.reinforced_at if previous else now,
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


def maintain_facts(deps: Deps, tenant: str, facts: list[Fact]) -> list[Fact]:
    """Decay untouched facts, expire the faint ones, flag facts whose sources are gone; the changed ones.
    Idempotent (decay is computed from `reinforced_at`). The run's sweep calls it once over every fact of
    the tenant (`service.maintain`); the source episodes are read SOURCE_READ ids at a time, not per fact."""
    now = deps.clock.now()
    settings = deps.settings
    active = [fact for fact in facts if fact.status == "active"]
    present = _present(deps, tenant, [i for fact in active for i in fact.source_episode_ids])
    changed = []
    for fact in active:
        periods = math.floor((now - fact.reinforced_at).total_seconds() / 3600 / settings.decay_hours)
        structured = fact.entity is not None and fact.property is not None
        effective = round(confidence(len(fact.source_episode_ids), structured) * settings.decay**periods, 4)
        stale = not present.issuperset(fact.source_episode_ids)
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


def _present(deps: Deps, tenant: str, episode_ids: list[str]) -> set[str]:
    """Which of `episode_ids` still exist, read in chunks of SOURCE_READ ids without their vectors."""
    unique = list(dict.fromkeys(episode_ids))
    present: set[str] = set()
    for start in range(0, len(unique), SOURCE_READ):
        present.update(deps.store.get_episodes(tenant, unique[start : start + SOURCE_READ], vectors=False))
    return present


def checkpoint(deps: Deps, batch: Batch) -> Batch:
    """Advance past the batch only when every earlier stage succeeded for it. The dirty mark is cleared
    only up to what collect could read: an episode still settling keeps its scope dirty."""
    if batch.leased_elsewhere:
        return batch
    if batch.errors:
        batch.count("checkpoint", "held")
        _count_hold(deps, batch)
        return batch
    if batch.last is not None:
        current = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
        advanced = current.model_copy(
            update={
                "after_created_at": batch.last[0],
                "after_episode_id": batch.last[1],
                "version": batch.base_version + 1,
                "processed": current.processed + len(batch.episode_ids),
                "held": 0,
                "set_aside": [*current.set_aside, *({**e, "run_id": batch.run_id} for e in batch.set_aside)][
                    -MAX_KEPT:
                ],
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


def _count_hold(deps: Deps, batch: Batch) -> None:
    """One more run held the checkpoint at its place (`Checkpoint.held`; see `extract`). Best effort: a
    store that fails here failed the batch already, and the next run counts again."""
    if batch.last is None:
        return
    try:
        current = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
        if current.version == batch.base_version:
            held = current.model_copy(update={"held": current.held + 1, "version": batch.base_version + 1})
            deps.store.save_checkpoint(held, batch.base_version)
    except MnemeError:
        return


Stage = Callable[[Deps, Batch], Batch]
STAGES: tuple[tuple[str, Stage], ...] = (
    ("collect", collect),
    ("cluster", cluster),
    ("extract", extract),
    ("reconcile", reconcile),
    ("commit", commit),
    ("rollup", rollup),
    ("checkpoint", checkpoint),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)
