"""`DynamoRecordStore`'s agent-written records: listing episodes, forgetting an episode or a fact, correcting a fact
(keys and access patterns are in the module docstring of `mneme.adapters.dynamo.store`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import datetime, timedelta

from mneme.adapters.dynamo.codec import (
    Item,
    Write,
    attr,
    delete,
    episode_key,
    expression,
    fact_key,
    history_pk,
    iso_utc,
    key,
    position_text,
    put,
    scope_fact_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.episodes import EPISODE_CODEC, FACT_CODEC
from mneme.adapters.dynamo.table import EXPIRES_AT, GSI3, DynamoTable, key_of, position_of, unmoved
from mneme.errors import Conflict, NotFound
from mneme.models import Episode, Forgotten
from mneme.records import Fact

ATTEMPTS = 3  # a record changed between its read and its conditional write: read again


def forgotten_key(tenant: str, record_id: str) -> Item:
    return key(tenant_pk(tenant, "FORGOTTEN"), f"ID#{record_id}")


def recently_forgotten_key(tenant: str, position: str, record_id: str) -> Item:
    return key(tenant_pk(tenant, "GONE"), f"{position}#{record_id}")


RECENT_FOR = timedelta(days=1)  # how long a forgetting's recent mark is kept (TTL): far past any index lag


def recently_forgotten(tenant: str, record_id: str, at: datetime, now: datetime) -> Item:
    """The mark `list_forgotten_since` finds: the record's id at the time it went, kept a day (TTL)."""
    marks = {"item_type": "gone", "id": record_id, EXPIRES_AT: int((now + RECENT_FOR).timestamp())}
    return {**recently_forgotten_key(tenant, position_text(at), record_id), **{n: attr(v) for n, v in marks.items()}}


def scope_forgotten_key(tenant: str, scope_id: str, record_id: str) -> Item:
    return key(tenant_pk(tenant, "SCOPEFORGOT", scope_id), f"ID#{record_id}")


class DynamoRecords(DynamoTable):
    """Agent-written records addressed one at a time."""

    def list_episodes(
        self, tenant: str, scope_ids: Sequence[str], before: tuple[datetime, str] | None, limit: int
    ) -> list[Episode]:
        """Each scope's newest `limit` below `before` through GSI3 (newest first), merged; the winners re-read."""
        if limit < 1:
            return []
        found: list[tuple[str, Item]] = []
        for scope_id in dict.fromkeys(scope_ids):
            values = {"pk": tenant_pk(tenant, "SCOPEEPS", scope_id)}
            condition = "GSI3PK = :pk"
            if before is not None:
                condition += " AND GSI3SK < :before"
                values["before"] = f"{iso_utc(before[0])}#{before[1]}"
            query = {"IndexName": GSI3, "KeyConditionExpression": condition, "ScanIndexForward": False}
            page = next(self._pages({**query, "Limit": limit, **expression(values)}), [])
            found += [(str(item["GSI3SK"]["S"]), item) for item in page]
        newest = heapq.nlargest(limit, found, key=lambda pair: pair[0])
        items = {key_of(i): i for i in self._batch_get([{"PK": i["PK"], "SK": i["SK"]} for _, i in newest])}
        episodes = [to_model(Episode, items[key_of(i)], **EPISODE_CODEC) for _, i in newest if key_of(i) in items]
        return [e.model_copy(update={"vector": None}) for e in episodes]

    def forget_episode(self, tenant: str, episode_id: str, record: Forgotten) -> Episode | None:
        for attempt in range(ATTEMPTS):
            item = self._get(episode_key(tenant, episode_id))
            if item is None:
                return None
            try:
                self._transact(self._forget_writes(episode_key(tenant, episode_id), item, record, "episode"))
            except Conflict as e:
                if e.code != "record_race" or attempt == ATTEMPTS - 1:
                    raise
                continue
            return to_model(Episode, item, **EPISODE_CODEC)
        return None  # unreachable: the last attempt returns or raises

    def forget_fact(self, tenant: str, fact_id: str, record: Forgotten) -> Fact | None:
        for attempt in range(ATTEMPTS):
            item = self._get(fact_key(tenant, fact_id))
            if item is None:
                return None
            fact = to_model(Fact, item, **FACT_CODEC)
            writes = self._forget_writes(fact_key(tenant, fact_id), item, record, "fact")
            writes.append(delete(scope_fact_key(tenant, fact.scope_id, fact_id), None, "conflict", ""))
            try:
                self._transact(writes)
            except Conflict as e:
                if e.code != "record_race" or attempt == ATTEMPTS - 1:
                    raise
                continue
            self._delete_all(self._query(history_pk(tenant, fact_id)))  # its corrections held former values
            return fact
        return None

    def _forget_writes(self, record_key: Item, item: Item, record: Forgotten, kind: str) -> list[Write]:
        """Delete the record if its feed entry has not moved since it was read, move that entry to the head as
        a tombstone, keep who forgot it (by id, and under its scope for erasure) and mark it recently
        forgotten (`list_forgotten_since`, a day's TTL)."""
        previous = position_of(item)
        same, values = unmoved(previous)
        tenant, record_id = record.tenant, record.record_id
        position = self._position(previous)
        forgotten = to_item(record, forgotten_key(tenant, record_id), item_type="forgotten")
        copy = to_item(record, scope_forgotten_key(tenant, record.scope_id, record_id), item_type="forgotten_copy")
        recent = recently_forgotten(tenant, record_id, record.forgotten_at, self._now())
        return [
            delete(record_key, same, "record_race", "the record changed meanwhile", **values),
            *self._feed_move(tenant, f"deleted:{kind}", record_id, previous, position),
            put(forgotten, None, "conflict", ""),
            put(copy, None, "conflict", ""),
            put(recent, None, "conflict", ""),
        ]

    def list_forgotten_since(self, tenant: str, since: datetime) -> set[str]:
        """One strongly consistent Query of the tenant's recent marks from `since` on (a partition of small
        items that a day's TTL keeps short)."""
        query = {
            "KeyConditionExpression": "PK = :pk AND SK >= :since",
            "ConsistentRead": True,
            **expression({"pk": tenant_pk(tenant, "GONE"), "since": position_text(since)}),
        }
        return {str(item["id"]["S"]) for page in self._pages(query) for item in page}

    def get_forgotten(self, tenant: str, record_id: str) -> Forgotten | None:
        item = self._get(forgotten_key(tenant, record_id))
        return to_model(Forgotten, item) if item is not None else None

    def update_fact(self, fact: Fact, expected_version: int) -> None:
        for attempt in range(ATTEMPTS):
            item = self._get(fact_key(fact.tenant, fact.fact_id))
            if item is None:
                raise NotFound(f"fact {fact.fact_id} does not exist", code="fact_not_found")
            stored = to_model(Fact, item, **FACT_CODEC)
            if stored.version != expected_version:
                raise Conflict(
                    f"fact {fact.fact_id} is at version {stored.version}, not {expected_version}",
                    code="stale_version",
                    details={"version": stored.version},
                )
            previous = position_of(item)
            same, values = unmoved(previous)
            if "version" in item:
                same, values = f"{same} AND #version = :version", {**values, "version": expected_version}
            else:  # stored before facts had versions: version 1
                same = f"{same} AND attribute_not_exists(#version)"
            position = self._position(previous)
            record = to_item(fact, fact_key(fact.tenant, fact.fact_id), **FACT_CODEC, item_type="fact",
                             feed_position=position)  # fmt: skip
            copy = to_item(
                fact, scope_fact_key(fact.tenant, fact.scope_id, fact.fact_id), **FACT_CODEC, item_type="fact_copy"
            )
            try:
                self._transact(
                    [
                        put(record, same, "record_race", "the fact changed meanwhile", **values),
                        put(copy, None, "conflict", ""),
                        *self._feed_move(fact.tenant, "fact", fact.fact_id, previous, position),
                    ]
                )
                return
            except Conflict as e:
                if e.code != "record_race" or attempt == ATTEMPTS - 1:
                    raise
