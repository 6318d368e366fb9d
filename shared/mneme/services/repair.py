"""Index repair: what the scheduled `index-repair` function runs in AWS (`mneme serve` sweeps locally).

1. Sweep: index every episode stored but not confirmed in the index (`Indexer.sweep`), which reports
   what is still waiting as the `IndexRepairBacklog` metric (the dashboard charts it). Episodes stored
   without a vector (remember while the embedder was down) are embedded here before they are indexed.
2. Compact: on OpenSearch Serverless a retried write can leave two copies of a document (server-assigned
   ids); compaction keeps the newest. Duplicates only arise from writes, so a tick compacts the documents
   written since the previous compaction tick (`compact_recent(since)`, the index adds its visibility lag
   as margin): its cost follows the writes, not the size of the tenants. `compact(tenant)` stays the
   full pass, for what no window sees (see `mneme.adapters.opensearch.serverless`).

The scheduled function sweeps on every tick (every minute: episodes a first write missed, e.g. while a
new Serverless index was still being built, are searchable a minute later) and compacts only on the
ticks `compaction_window` picks (every 30 minutes by default).

The sweep's reads are bounded: `list_unindexed(limit)` queries the unindexed markers (in DynamoDB one
Query of at most `limit` keys per marker shard, then those items; in SQLite `WHERE indexed=0 LIMIT`), and
the backlog metric reads at most 1,000 more; with no backlog that is one empty Query per shard. Compaction
reads no record (it used to read the dirty marks to pick tenants): the window names tenants and documents.

Memories and facts carry no "unindexed" mark in the record store: a failed index write of either is
logged and restored by `mneme reindex` (a rebuild from records), not by this sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mneme.services.indexing import Indexer


@runtime_checkable
class Compacting(Protocol):
    def compact_recent(self, since: datetime) -> dict[str, int]:
        """Delete all but the newest copy of every document with a copy written since `since` (less the
        index's visibility lag); returns the copies removed per tenant."""
        ...


@dataclass(frozen=True)
class RepairReport:
    indexed: int
    compacted: dict[str, int] = field(default_factory=dict)  # tenant -> copies removed


def compaction_window(scheduled_time: str | None, every_minutes: int, now: datetime) -> datetime | None:
    """Where the compaction window of a tick scheduled at `scheduled_time` (ISO 8601, EventBridge
    Scheduler's `<aws.scheduler.scheduled-time>`) starts: the previous compaction tick, `every_minutes`
    before it; None when the tick does not fall on the interval. A tick without a readable time (a
    manual invoke) compacts the last `every_minutes` before `now`."""
    every = max(every_minutes, 1)
    try:
        when = datetime.fromisoformat(str(scheduled_time).replace("Z", "+00:00"))
    except ValueError:
        return now - timedelta(minutes=every)
    if (when.hour * 60 + when.minute) % every:
        return None
    return when - timedelta(minutes=every)


def repair_index(indexer: Indexer, index: object, limit: int = 500, *, compact_since: datetime | None) -> RepairReport:
    """Sweep; then, when `compact_since` is given and the index has copies to compact, compact its window."""
    indexed = indexer.sweep(limit)
    if compact_since is None or not isinstance(index, Compacting):
        return RepairReport(indexed)
    return RepairReport(indexed, index.compact_recent(compact_since))
