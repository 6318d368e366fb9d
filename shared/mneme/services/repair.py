"""Index repair: what the scheduled `index-repair` function runs in AWS (`mneme serve` sweeps locally).

1. Sweep: index every episode stored but not confirmed in the index (`Indexer.sweep`), which reports
   what is still waiting as the `IndexRepairBacklog` metric (the dashboard charts it).
2. Compact: on OpenSearch Serverless a retried write can leave two copies of a document (server-assigned
   ids); `compact(tenant)` keeps the newest. It runs for the tenants written to lately: those with
   episodes the sweep found and those with scopes marked dirty (new episodes since consolidation).

The scheduled function sweeps on every tick (every minute: episodes a first write missed, e.g. while a
new Serverless index was still being built, are searchable a minute later) and compacts only on the
ticks `compaction_due` picks (every 30 minutes by default): compaction aggregates each tenant's documents.

Memories and facts carry no "unindexed" mark in the record store: a failed index write of either is
logged and restored by `mneme reindex` (a rebuild from records), not by this sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mneme.ports import ConsolidationStore, EpisodeStore, SearchIndex
    from mneme.services.indexing import Indexer

    class RepairStore(EpisodeStore, ConsolidationStore, Protocol):
        """The record store's roles the repair reads: the index's backlog and the dirty marks."""


RECENT_TENANTS = 1000  # dirty marks read to find the tenants written to lately


@runtime_checkable
class Compacting(Protocol):
    def compact(self, tenant: str) -> int:
        """Delete all but the newest copy of every document of the tenant; returns how many went."""
        ...


@dataclass(frozen=True)
class RepairReport:
    indexed: int
    compacted: dict[str, int] = field(default_factory=dict)  # tenant -> copies removed


def compaction_due(scheduled_time: str | None, every_minutes: int) -> bool:
    """Whether a tick scheduled at `scheduled_time` (ISO 8601, EventBridge Scheduler's
    `<aws.scheduler.scheduled-time>`) falls on the compaction interval; a tick without a readable
    time (a manual invoke) compacts."""
    try:
        when = datetime.fromisoformat(str(scheduled_time).replace("Z", "+00:00"))
    except ValueError:
        return True
    return (when.hour * 60 + when.minute) % max(every_minutes, 1) == 0


def repair_index(
    store: RepairStore, indexer: Indexer, index: SearchIndex, limit: int = 500, *, compact: bool = True
) -> RepairReport:
    if not compact:
        return RepairReport(indexer.sweep(limit))
    tenants = {episode.tenant for episode in store.list_unindexed(limit)}
    tenants |= {tenant for tenant, _ in store.list_dirty(None, RECENT_TENANTS)}
    indexed = indexer.sweep(limit)
    if not isinstance(index, Compacting):
        return RepairReport(indexed)
    return RepairReport(indexed, {tenant: index.compact(tenant) for tenant in sorted(tenants)})
