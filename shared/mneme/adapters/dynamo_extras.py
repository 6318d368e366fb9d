"""`DynamoRecordStore`'s review records and change feed (a mixin; keys and access patterns are in the
module docstring of `mneme.adapters.dynamo_store`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, get_args

from mneme.adapters.dynamo_codec import (
    Item,
    Write,
    attr,
    author_revision_key,
    author_revisions_pk,
    delete,
    expression,
    feed_key,
    feed_pk,
    history_key,
    history_pk,
    next_position,
    position_text,
    put,
    revision_key,
    revision_queue_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.errors import Conflict
from mneme.models import HistoryEntry, Revision

REVISION_STATUSES: tuple[str, ...] = get_args(Revision.model_fields["status"].annotation)
REVIEW_CODEC: dict[str, Any] = {"json_fields": ("changes",)}
FEED_POSITION = "feed_position"  # on every record in the feed: where its one feed entry is
HISTORY_ATTEMPTS = 8


def position_of(item: Item | None) -> str | None:
    """The feed position a stored record carries (None: absent, or written before the feed existed)."""
    value = (item or {}).get(FEED_POSITION)
    return str(value["S"]) if value and "S" in value else None


def unmoved(previous: str | None) -> tuple[str, dict[str, Any]]:
    """Condition (and its values) that the record's feed entry is still where it was read: a concurrent
    writer that moved it makes the transaction fail rather than leave a second entry behind."""
    if previous is None:
        return f"attribute_not_exists(#{FEED_POSITION})", {}
    return f"#{FEED_POSITION} = :{FEED_POSITION}", {FEED_POSITION: previous}


class DynamoExtras:
    """Review (revisions, history) and the change feed over the table's plumbing in `DynamoRecordStore`."""

    _now: Callable[[], datetime]
    _feed_horizon: timedelta
    _last_position: str | None
    _position_lock: threading.Lock

    if TYPE_CHECKING:
        table_name: str

        def _call(self, operation: str, writes: Sequence[Write] = (), **params: Any) -> dict[str, Any]: ...

        def _get(self, key: Item) -> Item | None: ...

        def _pages(self, params: dict[str, Any]) -> Iterator[list[Item]]: ...

        def _query(
            self, pk: str, where: str | None = None, *, prefix: str | None = None, **values: Any
        ) -> list[Item]: ...

        def _transact(self, writes: Sequence[Write]) -> None: ...

        def _write_one(self, write: Write) -> None: ...

    # -- change feed: writing ---------------------------------------------------------------
    def _position(self, *previous: str | None) -> str:
        """A new feed position: this writer's clock now, moved past the record's previous position and
        past the last position this store handed out (so a clock step backwards cannot reorder one
        writer's changes)."""
        with self._position_lock:
            position = next_position(self._now(), self._last_position, *previous)
            self._last_position = position
            return position

    @staticmethod
    def _feed_move(tenant: str, kind: str, record_id: str, previous: str | None, position: str) -> list[Write]:
        """Put the record's entry at `position` and delete its entry at `previous`: the writes that go in
        the record's own transaction (whose record Put must carry `unmoved(previous)`)."""
        entry = {**feed_key(tenant, position, record_id),
                 **{name: attr(value) for name, value in
                    (("item_type", "feed"), ("kind", kind), ("id", record_id), ("position", position))}}  # fmt: skip
        writes = [put(entry, None, "conflict", "")]
        if previous is not None and previous != position:
            writes.append(delete(feed_key(tenant, previous, record_id), None, "conflict", ""))
        return writes

    # -- change feed: reading ---------------------------------------------------------------
    def list_changes(self, tenant: str, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str, str]]:
        """Settled entries strictly after `after`, in (position, id) order: those at or before
        `now - feed_horizon`. The clock is read before the query, so every transaction still to commit
        holds a position above the bound (see the module docstring of `dynamo_store`)."""
        if limit < 1:
            return []
        settled = position_text(self._now() - self._feed_horizon)
        values = {"pk": feed_pk(tenant), "upper": f"{settled}$"}  # "$" sorts just above "<settled>#<any id>"
        condition, lower = "PK = :pk AND SK <= :upper", None
        if after is not None:
            lower = f"{after[0]}#{after[1]}"  # "<position>#<id>" sorts as (position, id): positions are fixed width
            if lower >= values["upper"]:
                return []
            condition, values["lower"] = "PK = :pk AND SK BETWEEN :lower AND :upper", lower
        query = {"KeyConditionExpression": condition, "ConsistentRead": True, "Limit": limit + 1}
        found: list[tuple[str, str, str]] = []
        for page in self._pages({**query, **expression(values)}):
            found += [(i["position"]["S"], i["kind"]["S"], i["id"]["S"]) for i in page if i["SK"]["S"] != lower]
            if len(found) >= limit:
                break
        return found[:limit]

    # -- review -----------------------------------------------------------------------------
    def put_revision(self, revision: Revision) -> None:
        """The record, plus a copy in its author's and in the tenant's partition for its status; the
        copies under the other statuses are deleted in the same transaction (no read needed)."""
        tenant, memory_id, author = revision.tenant, revision.memory_id, revision.author
        record = to_item(revision, revision_key(tenant, memory_id, author), **REVIEW_CODEC, item_type="revision")
        writes = [put(record, None, "conflict", "")]
        for status in REVISION_STATUSES:
            copies = (author_revision_key(tenant, author, status, memory_id),
                      revision_queue_key(tenant, status, memory_id, author))  # fmt: skip
            for copy_key in copies:
                if status == revision.status:
                    copy = to_item(revision, copy_key, **REVIEW_CODEC, item_type="revision_copy")
                    writes.append(put(copy, None, "conflict", ""))
                else:
                    writes.append(delete(copy_key, None, "conflict", ""))
        self._transact(writes)

    def get_revision(self, tenant: str, memory_id: str, author: str) -> Revision | None:
        item = self._get(revision_key(tenant, memory_id, author))
        return to_model(Revision, item, **REVIEW_CODEC) if item else None

    def list_revisions(
        self, tenant: str, *, memory_id: str | None = None, author: str | None = None, status: str | None = "open"
    ) -> list[Revision]:
        """Revisions of a tenant, optionally of one memory / author / status, ordered by memory then author."""
        statuses = REVISION_STATUSES if status is None else tuple(s for s in REVISION_STATUSES if s == status)
        if memory_id is not None:
            if author is not None:
                found = self.get_revision(tenant, memory_id, author)
                revisions = [found] if found is not None else []
            else:
                prefix = revision_key(tenant, memory_id, "")["SK"]["S"]
                items = self._query(tenant_pk(tenant, "REVS"), prefix=prefix)
                revisions = [to_model(Revision, item, **REVIEW_CODEC) for item in items]
            revisions = [revision for revision in revisions if revision.status in statuses]
        else:
            pks = [author_revisions_pk(tenant, author, s) if author is not None else tenant_pk(tenant, "REVQ", s)
                   for s in statuses]  # fmt: skip
            revisions = [to_model(Revision, item, **REVIEW_CODEC) for pk in pks for item in self._query(pk)]
        return sorted(revisions, key=lambda revision: (revision.memory_id, revision.author))

    def add_history(self, entry: HistoryEntry) -> None:
        """Append at the memory's next sequence number; a concurrent append taking it makes us read again."""
        pk = history_pk(entry.tenant, entry.memory_id)
        for _ in range(HISTORY_ATTEMPTS):
            last = self._pages({"KeyConditionExpression": "PK = :pk", "ConsistentRead": True, "Limit": 1,
                                "ScanIndexForward": False, **expression({"pk": pk})})  # fmt: skip
            newest = next(last, [])
            seq = int(newest[0]["seq"]["N"]) + 1 if newest else 1
            item = to_item(entry, history_key(entry.tenant, entry.memory_id, seq), **REVIEW_CODEC,
                           item_type="history", seq=seq)  # fmt: skip
            try:
                self._write_one(put(item, "attribute_not_exists(PK)", "history_race", "history appended meanwhile"))
            except Conflict as e:
                if e.code != "history_race":
                    raise
                continue
            return
        raise Conflict(f"the history of memory {entry.memory_id} kept changing; retry", code="conflict")

    def list_history(self, tenant: str, memory_id: str) -> list[HistoryEntry]:
        items = sorted(self._query(history_pk(tenant, memory_id)), key=lambda item: item["SK"]["S"])
        return [to_model(HistoryEntry, item, **REVIEW_CODEC) for item in items]
