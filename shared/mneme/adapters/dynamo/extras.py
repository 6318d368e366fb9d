"""`DynamoRecordStore`'s review records, change feed reading and API keys (keys and access patterns are
in the module docstring of `mneme.adapters.dynamo.store`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from mneme.adapters.dynamo.codec import (
    apikey_key,
    author_revision_key,
    author_revisions_pk,
    delete,
    expression,
    feed_pk,
    history_key,
    history_pk,
    position_text,
    put,
    revision_key,
    revision_queue_key,
    tenant_apikey_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.table import DynamoTable
from mneme.errors import Conflict
from mneme.models import ApiKey, HistoryEntry, Revision

REVISION_STATUSES: tuple[str, ...] = get_args(Revision.model_fields["status"].annotation)
REVIEW_CODEC: dict[str, Any] = {"json_fields": ("changes",)}
HISTORY_ATTEMPTS = 8


class DynamoExtras(DynamoTable):
    """Review (revisions, history), the change feed's reading half, and API keys."""

    # -- change feed: reading ---------------------------------------------------------------
    def list_changes(self, tenant: str, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str, str]]:
        """Settled entries strictly after `after`, in (position, id) order: those at or before
        `now - feed_horizon`. The clock is read before the query, so every transaction still to commit
        holds a position above the bound (see the module docstring of `store`)."""
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
            copies = (
                author_revision_key(tenant, author, status, memory_id),
                revision_queue_key(tenant, status, memory_id, author),
            )
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
            pks = [
                author_revisions_pk(tenant, author, s) if author is not None else tenant_pk(tenant, "REVQ", s)
                for s in statuses
            ]
            revisions = [to_model(Revision, item, **REVIEW_CODEC) for pk in pks for item in self._query(pk)]
        return sorted(revisions, key=lambda revision: (revision.memory_id, revision.author))

    def add_history(self, entry: HistoryEntry) -> None:
        """Append at the memory's next sequence number; a concurrent append taking it makes us read again."""
        pk = history_pk(entry.tenant, entry.memory_id)
        for _ in range(HISTORY_ATTEMPTS):
            last = self._pages(
                {
                    "KeyConditionExpression": "PK = :pk",
                    "ConsistentRead": True,
                    "Limit": 1,
                    "ScanIndexForward": False,
                    **expression({"pk": pk}),
                }
            )
            newest = next(last, [])
            seq = int(newest[0]["seq"]["N"]) + 1 if newest else 1
            item = to_item(
                entry, history_key(entry.tenant, entry.memory_id, seq), **REVIEW_CODEC, item_type="history", seq=seq
            )
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

    # -- API keys -------------------------------------------------------------------------
    def _put_api_key(self, api_key: ApiKey, copy_condition: str | None) -> None:
        record = to_item(api_key, apikey_key(api_key.key_hash), item_type="api_key")
        copy = to_item(api_key, tenant_apikey_key(api_key.tenant, api_key.key_id), item_type="api_key_copy")
        same_key = "attribute_not_exists(PK) OR (#tenant = :tenant AND #key_id = :key_id)"
        owner = {"tenant": api_key.tenant, "key_id": api_key.key_id}
        self._transact(
            [
                put(record, same_key, "conflict", "the key hash belongs to another key", **owner),
                put(copy, copy_condition, "conflict", f"API key {api_key.key_id} changed concurrently"),
            ]
        )

    def put_api_key(self, key: ApiKey) -> None:
        self._put_api_key(key, None)

    def get_api_key(self, key_hash: str) -> ApiKey | None:
        item = self._get(apikey_key(key_hash))
        return to_model(ApiKey, item) if item else None

    def list_api_keys(self, tenant: str) -> list[ApiKey]:
        api_keys = [to_model(ApiKey, item) for item in self._query(tenant_pk(tenant, "APIKEYS"))]
        return sorted(api_keys, key=lambda api_key: api_key.key_id)

    def revoke_api_key(self, tenant: str, key_id: str, now: datetime) -> bool:
        item = self._get(tenant_apikey_key(tenant, key_id))
        if item is None:
            return False
        api_key = to_model(ApiKey, item)
        if api_key.revoked_at is None:  # revoking twice keeps the first time
            self._put_api_key(api_key.model_copy(update={"revoked_at": now}), "attribute_exists(PK)")
        return True
