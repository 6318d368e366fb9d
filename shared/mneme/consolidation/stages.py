"""The consolidation stages, listed once. Each takes the batch state and the batch's working set, and
returns the batch.

The local runner calls them in order with one working set; the Step Functions definition is built from
`STAGES`, one task per stage, passing `Batch` as JSON (ids, never records: `mneme.consolidation.batch`).
Every write derives its ids from content, and what a batch already committed is left untouched when it is
replayed after a crash; the checkpoint advances only for a batch without errors. A window the reasoner
cannot consolidate is set aside with its reason (listed in the run, counted, a metric) instead of holding
the scope: at once when its answers were refused twice, after MAX_HOLDS held runs when the reasoner was
unavailable. The stages themselves: collect and checkpoint here, cluster in `windows`, extract in
`extract`, reconcile and commit in `reconcile`, rollup in `rollup`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from mneme.consolidation.backoff import due, recorded, settle
from mneme.consolidation.batch import Batch, ConsolidatingStore, Decision, Deps, Working
from mneme.consolidation.extract import DEADLINE, MAX_HOLDS, OUTAGE, extract
from mneme.consolidation.reconcile import commit, reconcile
from mneme.consolidation.rollup import rollup
from mneme.consolidation.windows import cluster
from mneme.errors import Conflict, MnemeError
from mneme.language.grounding import confidence
from mneme.records import Fact

__all__ = ["DEADLINE", "MAX_HOLDS", "OUTAGE", "STAGES", "STAGE_NAMES", "Batch", "ConsolidatingStore", "Decision",
           "Deps", "Working", "checkpoint", "cluster", "collect", "commit", "extract", "maintain_facts",
           "reconcile", "rollup"]  # fmt: skip

SOURCE_READ = 500  # source episode ids per read in the maintenance sweep (`maintain_facts`)


def collect(deps: Deps, batch: Batch, work: Working) -> Batch:
    checkpoint = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
    batch.base_version, batch.holds = checkpoint.version, checkpoint.held
    before = batch.started_at - timedelta(seconds=deps.settings.settle_seconds)
    after = (checkpoint.after_created_at, checkpoint.after_episode_id)
    episodes = deps.store.list_episodes_after(batch.tenant, batch.scope_id, after, before, deps.settings.batch_size)
    batch.collected_before = before
    batch.episode_ids = [e.episode_id for e in episodes]
    work.keep(episodes)
    batch.last = (episodes[-1].created_at, episodes[-1].episode_id) if episodes else None
    batch.full = len(episodes) == deps.settings.batch_size
    batch.returning = due(checkpoint, batch.started_at, deps.settings.batch_size)
    batch.count("collect", "episodes_read", len(episodes))
    return batch


def maintain_facts(deps: Deps, tenant: str, facts: list[Fact]) -> list[Fact]:
    """Decay untouched facts, expire the faint ones, flag facts whose sources are gone, that a later episode
    changed (`changed_by`, unflagged when that episode is forgotten) or whose value holds for a time only and
    has outgrown it (an age a year on: `OUTGROWN`); the changed ones.
    Idempotent (decay is computed from `reinforced_at`). The run's sweep calls it once over every fact of
    the tenant (`service.maintain`); the source episodes are read SOURCE_READ ids at a time, not per fact."""
    now = deps.clock.now()
    settings = deps.settings
    active = [fact for fact in facts if fact.status == "active"]
    changers = [fact.changed_by for fact in active if fact.changed_by is not None]
    present = _present(deps, tenant, [i for fact in active for i in fact.source_episode_ids] + changers)
    changed = []
    for fact in active:
        periods = math.floor((now - fact.reinforced_at).total_seconds() / 3600 / settings.decay_hours)
        structured = fact.entity is not None and fact.property is not None
        effective = round(confidence(len(fact.source_episode_ids), structured) * settings.decay**periods, 4)
        update: dict[str, Any] = {}
        if fact.changed_by is not None and fact.changed_by not in present:  # the turn that changed it is forgotten
            update.update(changed_by=None, changed_at=None)
        stale = not present.issuperset(fact.source_episode_ids) or update.get("changed_by", fact.changed_by) is not None
        stale = stale or _outgrown(fact, now)
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


OUTGROWN = {"age": timedelta(days=365)}  # properties a fact holds for a while only: "Dario is 38" a year on is not


def _outgrown(fact: Fact, now: datetime) -> bool:
    """The fact's value holds for a time only, and that time has passed since it was said."""
    lasts = OUTGROWN.get((fact.property or "").lower())
    return lasts is not None and now - fact.valid_from > lasts


def _present(deps: Deps, tenant: str, episode_ids: list[str]) -> set[str]:
    """Which of `episode_ids` still exist, read in chunks of SOURCE_READ ids without their vectors."""
    unique = list(dict.fromkeys(episode_ids))
    present: set[str] = set()
    for start in range(0, len(unique), SOURCE_READ):
        present.update(deps.store.get_episodes(tenant, unique[start : start + SOURCE_READ], vectors=False))
    return present


def checkpoint(deps: Deps, batch: Batch, work: Working) -> Batch:
    """Advance past the batch only when every earlier stage succeeded for it, with the windows it set aside
    waiting to come back (`backoff.settle`). The dirty mark is cleared only up to what collect could read (an
    episode still settling keeps its scope dirty), and not while windows wait."""
    if batch.leased_elsewhere:
        return batch
    if batch.errors:
        batch.count("checkpoint", "held")
        _count_hold(deps, batch)
        return batch
    current = deps.store.get_checkpoint(batch.tenant, batch.scope_id)
    waiting, batch.returned = settle(batch, current, deps.clock.now())
    if batch.last is not None or batch.returning or waiting != current.waiting:
        update: dict[str, Any] = {"version": batch.base_version + 1, "held": 0, "waiting": waiting,
                                  **recorded(current, batch, batch.returned)}  # fmt: skip
        if batch.last is not None:
            update.update(after_created_at=batch.last[0], after_episode_id=batch.last[1],
                          processed=current.processed + len(batch.episode_ids))  # fmt: skip
        try:
            deps.store.save_checkpoint(current.model_copy(update=update), batch.base_version)
        except Conflict as e:
            batch.fail("checkpoint", e.message)
            return batch
        if batch.last is not None:
            batch.count("checkpoint", "advanced", len(batch.episode_ids))
    if not batch.full and batch.collected_before is not None and not waiting:  # marks at or after the cut-off stay
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


Stage = Callable[[Deps, Batch, Working], Batch]
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
