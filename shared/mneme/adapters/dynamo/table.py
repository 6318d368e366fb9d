"""The table's plumbing that every DynamoDB part of `DynamoRecordStore` inherits: the schema, calls
with their error translation, paged queries, batches with unprocessed-keys retry, transactions, and the
change feed's writing half (a record's feed move). Keys and access patterns: `mneme.adapters.dynamo.store`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from mneme.adapters.dynamo.codec import (
    ALIAS,
    LIVE,
    Item,
    Write,
    attr,
    delete,
    expression,
    feed_key,
    from_item,
    next_position,
    put,
    tenant_pk,
)
from mneme.errors import Conflict, MnemeError, StoreUnavailable

GSI1, GSI2, GSI3, GSI4 = "GSI1", "GSI2", "GSI3", "GSI4"


def _keys_only_index(name: str) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": f"{name}PK", "KeyType": "HASH"},
            {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }


TABLE_SCHEMA: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": "S"}
        for name in ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK")
    ],
    "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
    "GlobalSecondaryIndexes": [_keys_only_index(name) for name in (GSI1, GSI2, GSI3, GSI4)],
}

BATCH_ATTEMPTS = 6


def create_table(client: Any, table_name: str) -> None:
    """Create the table on demand (tests, local tooling) and wait until it is active."""
    client.create_table(TableName=table_name, BillingMode="PAY_PER_REQUEST", **TABLE_SCHEMA)
    client.get_waiter("table_exists").wait(TableName=table_name)


FEED_POSITION = "feed_position"  # on every record in the feed: where its one feed entry is
EXPIRES_AT = "expires_at"  # the table's TTL attribute (epoch seconds): DynamoDB deletes the item after it


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


def key_of(item: Item) -> tuple[str, str]:
    """An item's (PK, SK)."""
    return item["PK"]["S"], item["SK"]["S"]


def distinct_keys(items: Iterable[Item]) -> list[Item]:
    """The keys of `items`, each once, in first-seen order."""
    return list({key_of(k): {"PK": k["PK"], "SK": k["SK"]} for k in items}.values())


def text_of(item: Item, name: str) -> str | None:
    """A string attribute, None when absent or not a string."""
    value = item.get(name)
    return str(value["S"]) if value and "S" in value else None


# -- errors -----------------------------------------------------------------------------
def _holder(item: Mapping[str, Any] | None) -> str:
    if not item:
        return ""
    found = from_item(item)
    return {
        LIVE: f" (held by scope {found.get('scope_id')})",
        ALIAS: f" (held by an alias of scope {found.get('scope_id')})",
        "memory_slot": f" (held by memory {found.get('memory_id')})",
        "memory": f" (stored version {found.get('version')})",
    }.get(str(found.get("item_type")), "")


def _translate(error: ClientError | BotoCoreError, writes: Sequence[Write] = ()) -> MnemeError:
    """The one place DynamoDB failures become domain errors."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        reasons: list[Any] = list(error.response.get("CancellationReasons") or [])
        if code == "ConditionalCheckFailedException":
            reasons = [{"Code": "ConditionalCheckFailed", "Item": error.response.get("Item")}]
        for write, reason in zip(writes, reasons, strict=False):
            if reason.get("Code") == "ConditionalCheckFailed":
                return Conflict(write.message + _holder(reason.get("Item")), code=write.code)
        if code == "ConditionalCheckFailedException":
            return Conflict("a concurrent change won; retry")
        return StoreUnavailable(f"DynamoDB request failed ({code or 'unknown error'}); retry later")
    return StoreUnavailable(f"DynamoDB could not be reached ({type(error).__name__}); retry later")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DynamoTable:
    """One DynamoDB table: strongly consistent reads, conditional writes translated to domain errors."""

    def __init__(
        self,
        table_name: str,
        *,
        client: Any = None,
        region_name: str | None = None,
        page_size: int | None = None,
        feed_horizon_seconds: float = 5.0,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        """`feed_horizon_seconds` bounds how long a write transaction may take (see the change feed);
        `now` is the clock feed positions and the horizon are read from."""
        self.table_name = table_name
        self._client = client
        self._region_name = region_name
        self._page_size = page_size
        self._feed_horizon = timedelta(seconds=feed_horizon_seconds)
        self._now = now
        self._last_position: str | None = None
        self._position_lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("dynamodb", region_name=self._region_name)
        return self._client

    # -- calls ----------------------------------------------------------------------------
    def _call(self, operation: str, writes: Sequence[Write] = (), **params: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = getattr(self.client, operation)(**params)
        except (ClientError, BotoCoreError) as e:
            raise _translate(e, writes) from e
        return response

    def _get(self, key: Item) -> Item | None:
        response = self._call("get_item", TableName=self.table_name, Key=key, ConsistentRead=True)
        item: Item | None = response.get("Item")
        return item

    def _pages(self, params: dict[str, Any]) -> Iterator[list[Item]]:
        params = {"TableName": self.table_name, **params}
        if self._page_size is not None:
            params["Limit"] = min(self._page_size, params.get("Limit", self._page_size))
        while True:
            page = self._call("query", **params)
            yield page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _query(self, pk: str, where: str | None = None, *, prefix: str | None = None, **values: Any) -> list[Item]:
        """Every item of a partition (whose SK starts with `prefix`) that passes the filter `where`."""
        params: dict[str, Any] = {"KeyConditionExpression": "PK = :pk", "ConsistentRead": True}
        if prefix is not None:
            params["KeyConditionExpression"] += " AND begins_with(SK, :prefix)"
            values["prefix"] = prefix
        if where is not None:
            params["FilterExpression"] = where
        params.update(expression({"pk": pk, **values}, where or ""))
        return [item for page in self._pages(params) for item in page]

    def _transact(self, writes: Sequence[Write]) -> None:
        items = [{op: {**body, "TableName": self.table_name}} for w in writes for op, body in w.request.items()]
        self._call("transact_write_items", writes, TransactItems=items)

    def _write_one(self, write: Write) -> None:
        """A single conditional Put or Delete, without the cost of a transaction."""
        ((op, body),) = write.request.items()
        operation = "put_item" if op == "Put" else "delete_item"
        self._call(operation, [write], TableName=self.table_name, **body)

    def _drain(self, operation: str, pending: dict[str, Any], leftover: str) -> list[Item]:
        """One batch call, then its unprocessed remainder again with backoff until none is left."""
        found: list[Item] = []
        for attempt in range(BATCH_ATTEMPTS):
            response = self._call(operation, RequestItems=pending)
            found.extend(response.get("Responses", {}).get(self.table_name, []))
            pending = response.get(leftover) or {}
            if not pending:
                return found
            time.sleep(0.05 * 2**attempt)
        raise StoreUnavailable("DynamoDB kept leaving batch requests unprocessed; retry later")

    def _batch_get(self, keys: Sequence[Item], projection: str | None = None, *, consistent: bool = True) -> list[Item]:
        chunks = [keys[start : start + 100] for start in range(0, len(keys), 100)]
        read = {"ConsistentRead": consistent, **({"ProjectionExpression": projection} if projection else {})}
        requests = [{self.table_name: {"Keys": list(chunk), **read}} for chunk in chunks]
        return [item for request in requests for item in self._drain("batch_get_item", request, "UnprocessedKeys")]

    def _batch_write(self, requests: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(requests), 25):
            self._drain("batch_write_item", {self.table_name: list(requests[start : start + 25])}, "UnprocessedItems")

    # -- reads and deletes by key ------------------------------------------------------------
    def _items(self, keys: Sequence[Item], projection: str | None = None) -> dict[tuple[str, str], Item]:
        """Strongly consistent reads of the items that exist, by (PK, SK)."""
        return {key_of(item): item for item in self._batch_get(distinct_keys(keys), projection)} if keys else {}

    def _delete_all(self, keys: Sequence[Item]) -> None:
        self._batch_write([{"DeleteRequest": {"Key": k}} for k in distinct_keys(keys)])

    def _index_items(
        self,
        query: dict[str, Any],
        limit: int,
        keep: Callable[[Item], bool] = lambda item: True,
        *,
        consistent: bool = True,
    ) -> list[Item]:
        """Up to `limit` items found through a KEYS_ONLY index, in index order, each re-read from the
        table (strongly consistent unless `consistent` is False) and kept if `keep` says it still qualifies."""
        found: list[Item] = []
        for page in self._pages({**query, "Limit": limit}):
            keys = distinct_keys(page)
            items = {key_of(i): i for i in self._batch_get(keys, consistent=consistent)}
            for k in keys:
                item = items.get(key_of(k))
                if item is not None and keep(item):
                    found.append(item)
            if len(found) >= limit:
                break
        return found[:limit]

    def _scope_episode_keys(self, tenant: str, scope_id: str) -> list[Item]:
        """Keys of a scope's episodes from GSI3 (which lags writes by milliseconds; re-read what it names)."""
        query = {
            "IndexName": GSI3,
            "KeyConditionExpression": "GSI3PK = :pk",
            **expression({"pk": tenant_pk(tenant, "SCOPEEPS", scope_id)}),
        }
        return distinct_keys([hit for page in self._pages(query) for hit in page])

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
        fields = {"item_type": "feed", "kind": kind, "id": record_id, "position": position}
        entry = {**feed_key(tenant, position, record_id), **{name: attr(value) for name, value in fields.items()}}
        writes = [put(entry, None, "conflict", "")]
        if previous is not None and previous != position:
            writes.append(delete(feed_key(tenant, previous, record_id), None, "conflict", ""))
        return writes
