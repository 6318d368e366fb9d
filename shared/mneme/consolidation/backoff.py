"""Windows set aside come back: offered to the reasoner again after a backoff that grows with each attempt
(BACKOFF, x4 each time: 1, 4, 16 hours), at most MAX_RETURNS times, then given up for good. A scope with
windows waiting stays marked dirty, so a run takes it up again when they are due. What came back, and how
it went, is listed in the run (`Run.returned`), counted (`extract.returned`, `recovered`, `given_up`) and
sent as the `ConsolidationClustersReturned` metric.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from mneme.consolidation.batch import Batch
from mneme.observability import count
from mneme.records import MAX_KEPT, Checkpoint, Waiting, listed

BACKOFF = timedelta(hours=1)  # before a window set aside the first time is offered again; x4 each time after
MAX_RETURNS = 3  # times a window is offered again before it is given up for good
MAX_WAITING_IDS = 2000  # episode ids a scope's checkpoint keeps waiting (the oldest windows beyond are given up)


def due(checkpoint: Checkpoint, now: datetime, limit: int) -> list[Waiting]:
    """The waiting windows due by `now`, oldest due first, at most `limit` episode ids in all (a batch carries
    their ids)."""
    taken: list[Waiting] = []
    used = 0
    for waiting in sorted(checkpoint.waiting, key=lambda w: w.due):
        if waiting.due > now or used + len(waiting.episode_ids) > limit:
            break
        taken.append(waiting)
        used += len(waiting.episode_ids)
    return taken


def settle(batch: Batch, checkpoint: Checkpoint, now: datetime) -> tuple[list[Waiting], list[dict[str, Any]]]:
    """The scope's waiting windows after this batch, and what became of each window it offered again: one
    set aside now waits (BACKOFF x 4^(attempts - 1)) unless it came back MAX_RETURNS times already; one that
    came back and was read is done; one not tried (the batch ran out of time) waits as it was."""
    returning = {batch.returning_from + n: w for n, w in enumerate(batch.returning)}
    tried = {_key(w) for i, w in returning.items() if i < len(batch.clusters)}
    kept = [w for w in checkpoint.waiting if _key(w) not in tried]
    outcomes: list[dict[str, Any]] = []
    for index, reason in sorted(batch.aside.items()):
        before = returning.get(index)
        attempts = (before.attempts if before else 0) + 1
        ids = batch.clusters[index]
        if before is not None and attempts > MAX_RETURNS:
            outcomes.append(_outcome(batch, ids, attempts, "given up"))
            continue
        wait = BACKOFF * 4 ** (attempts - 1)
        kept.append(Waiting(episode_ids=ids, reason=reason, attempts=attempts, due=now + wait))
        if before is not None:
            outcomes.append(_outcome(batch, ids, attempts, "set aside again"))
    for index, before in returning.items():
        if index < len(batch.clusters) and index not in batch.aside:
            outcomes.append(_outcome(batch, batch.clusters[index], before.attempts, "consolidated"))
    return _bounded(batch, kept), outcomes


def _key(waiting: Waiting) -> tuple[datetime, str]:
    return waiting.due, waiting.episode_ids[0] if waiting.episode_ids else ""


def _outcome(batch: Batch, ids: list[str], attempts: int, outcome: str) -> dict[str, Any]:
    batch.count("extract", {"consolidated": "recovered", "given up": "given_up"}.get(outcome, "returned_aside"))
    return {"scope_id": batch.scope_id, "outcome": outcome, "attempts": attempts, **listed(ids)}


def _bounded(batch: Batch, waiting: list[Waiting]) -> list[Waiting]:
    """At most MAX_WAITING_IDS episode ids wait, the latest set aside first kept (the others are given up)."""
    kept: list[Waiting] = []
    used = 0
    for w in sorted(waiting, key=lambda w: w.due, reverse=True):
        if used + len(w.episode_ids) > MAX_WAITING_IDS:
            batch.count("extract", "given_up")
            continue
        kept.append(w)
        used += len(w.episode_ids)
    return sorted(kept, key=lambda w: w.due)


def offered(batch: Batch) -> None:
    """Count the windows this batch offers again (`returned`, and the metric)."""
    if batch.returning:
        batch.count("extract", "returned", len(batch.returning))
        count("ConsolidationClustersReturned", len(batch.returning))


def recorded(checkpoint: Checkpoint, batch: Batch, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint's lists of the latest windows set aside and offered again, with this batch's."""
    tagged = [{**e, "run_id": batch.run_id} for e in outcomes]
    return {
        "set_aside": [*checkpoint.set_aside, *({**e, "run_id": batch.run_id} for e in batch.set_aside)][-MAX_KEPT:],
        "returned": [*checkpoint.returned, *tagged][-MAX_KEPT:],
    }
