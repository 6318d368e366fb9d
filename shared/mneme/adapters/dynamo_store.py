"""The AWS record store: one DynamoDB table, string keys `PK`/`SK`, three KEYS_ONLY indexes.

Every PK starts with `T#<tenant>#` except the API key item, read before the tenant is known.
Key builders (with escaping) live in `mneme.adapters.dynamo_codec`.

| item             | PK                                         | SK                    | holds                      |
|------------------|--------------------------------------------|-----------------------|----------------------------|
| scope            | `T#<t>#SCOPE#<scope_id>`                   | `SCOPE`               | Scope                      |
| name slot        | `T#<t>#SLOTS#<parent_id>`                  | `SEG#<segment>`       | live Scope copy or alias   |
|                  | `T#<t>#ROOTSLOTS` (parent None)            | `SEG#<segment>`       | live Scope copy or alias   |
| alias back-ref   | `T#<t>#ALIASOF#<scope_id>`                 | `SLOT#<parent>#<seg>` | `parent_id`, `segment`     |
|                  |                                            | `ROOT#<seg>` (None)   | (one per alias of scope)   |
| layers           | `T#<t>#LAYERS`                             | `LAYERS`              | `layers`: depth -> name    |
| memory           | `T#<t>#MEMS`                               | `MEM#<id>`            | Memory                     |
| memory key slot  | `T#<t>#MSLOT#SCOPE#<scope_id>`             | `KEY#<key>`           | non-archived Memory copy   |
|                  | `T#<t>#MSLOT#TAG#<layer>#ALL` / `#VAL#<v>` | `KEY#<key>`           | non-archived Memory copy   |
| episode          | `T#<t>#EPISODES`                           | `EP#<id>`             | Episode (+ GSI1-3 keys)    |
| delivered id     | `T#<t>#DELIVERED#<principal>#<session>`    | `ID#<id>`             | `id`                       |
| dirty scope      | `T#<t>#DIRTY`                              | `SCOPE#<scope_id>`    | `dirtied_at` (+ GSI1 keys) |
| checkpoint       | `T#<t>#CONSOL#<scope_id>`                  | `CHECKPOINT`          | Checkpoint                 |
| lease            | `T#<t>#CONSOL#<scope_id>`                  | `LEASE`               | `owner`, `until`           |
| fact             | `T#<t>#FACTS`                              | `FACT#<id>`           | Fact                       |
| scope's fact     | `T#<t>#SCOPEFACTS#<scope_id>`              | `FACT#<id>`           | Fact copy                  |
| contradiction    | `T#<t>#CONTRA#<scope_id>`                  | `C#<id>`              | Contradiction              |
| run              | `T#<t>#RUNS`                               | `RUN#<run_id>`        | Run (`stages` as JSON)     |
| feed entry       | `T#<t>#FEED`                               | `<position>#<id>`     | `kind`, `id`, `position`   |
| revision         | `T#<t>#REVS`                               | `M#<memory>#<author>` | Revision (`changes` JSON)  |
| author revision  | `T#<t>#AUTHREVS#<author>#<status>`         | `M#<memory>`          | Revision copy              |
| queued revision  | `T#<t>#REVQ#<status>`                      | `M#<memory>#<author>` | Revision copy              |
| history entry    | `T#<t>#HIST#<memory>`                      | `SEQ#<seq:012d>`      | HistoryEntry, `seq`        |
| API key          | `APIKEY#<key_hash>` (not tenant-prefixed)  | `APIKEY`              | ApiKey                     |
| tenant's API key | `T#<t>#APIKEYS`                            | `KEY#<key_id>`        | ApiKey copy                |
| structure draft  | `T#<t>#DRAFTS`                             | `DRAFT#<draft_id>`    | Draft JSON `doc`, `status` |
| publish journal  | `T#<t>#JOURNAL`                            | `DRAFT#<draft_id>`    | status, cursor, steps,     |
|                  |                                            |                       | `now`, published draft     |
| publish lock     | `T#<t>#JOURNAL`                            | `ACTIVE`              | `draft_id` being applied   |
| journal's plan   | `T#<t>#JOURNAL#<draft_id>`                 | `PLAN#<hash>#<part>`  | Plan JSON bytes (300 KB)   |

| index (KEYS_ONLY) | partition key                     | sort key                            | set on             |
|-------------------|-----------------------------------|-------------------------------------|--------------------|
| GSI1 (sparse)     | `GSI1PK = UNINDEXED`              | `GSI1SK = <created>#<t>#<id>`       | unindexed episodes |
|                   | `GSI1PK = DIRTY`                  | `GSI1SK = <dirtied_at>#<t>#<scope>` | dirty scopes       |
| GSI2              | `GSI2PK = T#<t>#EPISODES`         | `GSI2SK = <created>#<id>`           | every episode      |
| GSI3              | `GSI3PK = T#<t>#SCOPEEPS#<scope>` | `GSI3SK = <created>#<id>`           | every episode      |

`<created>` is `created_at` as ISO-8601 UTC with microseconds, so it sorts (as does every stored
datetime). GSI1 serves the two cross-tenant patterns (the index sweep, the consolidation schedule);
each of its partitions caps near 1,000 writes/s (shard GSI1PK to go beyond). Index hits are re-read
from the table, so a stale entry (an episode marked indexed a moment ago) is dropped and what is
returned is current. GSI3 lags writes by milliseconds: consolidation reads episodes created before
`started_at - settle_seconds`, which covers it.

Items carry `item_type`: scope, scope_slot (a live scope), scope_alias (`scope_id` it resolves to),
alias_ref, layers, memory, memory_slot, episode, delivered, dirty, checkpoint, lease, fact, fact_copy,
contradiction, run, feed, revision, revision_copy, history, api_key, api_key_copy, draft, journal,
journal_lock, journal_plan. Scope, memory, episode and fact items also carry `feed_position` (see the
change feed), and `structure_draft` once a publish wrote them (see the journal). A name slot holds a
live scope or an alias, never both, so one `attribute_not_exists(PK)` enforces "taken by a scope or an
alias". Every alias has a back-reference in its scope's `ALIASOF` partition, written and deleted in the
alias's transaction (so a merge can repoint, and an erasure find, the aliases resolving to a scope;
aliases written before back-references existed are not found that way). A key slot exists exactly
while its memory is not archived, so its partition is also the listing. Copies are written in the
transaction of their original. Base-table reads are strongly consistent.

| access pattern         | operation and key condition                                                     |
|------------------------|---------------------------------------------------------------------------------|
| get_scope              | GetItem scope                                                                   |
| find_child/find_alias  | GetItem name slot; `item_type` tells live scope from alias                      |
| list_children          | Query PK = `T#<t>#SLOTS#<parent_id>`, filter item_type = scope_slot             |
| create_scope           | Transact: Put scope + Put slot, both `attribute_not_exists(PK)`; feed move      |
| rename_scope           | GetItem scope; Transact: Put scope if `segment = old` and unmoved, Put old      |
|                        | slot as alias if it is this scope's live slot (+ its back-ref), Put new slot    |
|                        | if free or this scope's own alias (consumed: Delete its back-ref); feed move    |
| get/put_layers         | GetItem / Put layers                                                            |
| create_memory          | Transact: Put memory + Put key slot, both `attribute_not_exists(PK)`; feed move |
| update_memory          | GetItem memory; Transact: Put memory if `version = expected` and unmoved,       |
|                        | then refresh its own slot, or Delete its old slot and/or Put the new one if     |
|                        | free; feed move                                                                 |
| get_memory             | GetItem memory                                                                  |
| list_scoped_memories   | Query PK = `T#<t>#MSLOT#SCOPE#<scope_id>`                                       |
| list_tagged_memories   | Query PK = `T#<t>#MSLOT#TAG#<layer>#ALL` (value None) or `...#VAL#<value>`      |
| list_memories          | Query PK = `T#<t>#MEMS`, filter status <> archived                              |
| put_episodes           | BatchGetItem episodes; Transact: Put each new one `attribute_not_exists(PK)`    |
|                        | and its feed entry (fifty episodes per transaction)                             |
| get_episodes           | BatchGetItem `T#<t>#EPISODES` / `EP#<id>`                                       |
| mark_indexed           | UpdateItem each: SET indexed, REMOVE GSI1PK, GSI1SK (not a feed change)         |
| list_recent_episodes   | Query GSI2 `GSI2PK = T#<t>#EPISODES AND GSI2SK >= <since>`, newest first;       |
|                        | BatchGetItem the hits                                                           |
| list_unindexed         | Query GSI1 GSI1PK = `UNINDEXED` (oldest first), BatchGetItem the hits           |
| iter_episodes          | Query PK = `T#<t>#EPISODES`, one yielded batch per page                         |
| get/add_delivered      | Query / BatchWriteItem PK = `T#<t>#DELIVERED#<principal>#<session_id>`          |
| mark_dirty             | BatchWriteItem dirty marks (upsert refreshes `dirtied_at`)                      |
| list_dirty             | tenant: Query PK = `T#<t>#DIRTY`; None: Query GSI1 `GSI1PK = DIRTY`             |
| clear_dirty            | DeleteItem dirty mark if `dirtied_at <= dirtied_before`                         |
| list_episodes_after    | Query GSI3 `GSI3PK = T#<t>#SCOPEEPS#<scope_id> AND GSI3SK BETWEEN               |
|                        | <after> AND <before>` (or `< <before>`), BatchGetItem the hits                  |
| get/save_checkpoint    | GetItem / Put if `version = expected` (or absent when expected is 0)            |
| acquire/release_lease  | Put lease if absent, ours or `until <= now` / Delete if `owner` is ours         |
| put_facts              | BatchGetItem contradictions; per 25 facts: BatchGetItem their `feed_position`,  |
|                        | Transact: Put fact if unmoved + scope copy + feed move each (the last one also  |
|                        | Puts new contradictions, the rest a hundred per transaction); a fact moved      |
|                        | meanwhile (concurrent upsert) fails the condition: read again and retry         |
| get_facts / list_facts | BatchGetItem facts / Query PK = `T#<t>#FACTS` or `T#<t>#SCOPEFACTS#<scope>`     |
| list_contradictions    | Query PK = `T#<t>#CONTRA#<scope_id>`                                            |
| put_run / get_run      | Put / GetItem run                                                               |
| list_changes           | read the clock; Query PK = `T#<t>#FEED AND SK BETWEEN <after pos>#<after id>    |
|                        | AND <settled>$` (or `SK <= <settled>$`), drop the `after` entry itself;         |
|                        | `<settled>` = now - horizon, and `$` sorts just above `#`                       |
| put_revision           | Transact: Put revision + author's and queued copy under its status, Delete      |
|                        | both copies under the other two statuses (upsert with no read; 7 items)         |
| get_revision           | GetItem revision                                                                |
| list_revisions         | memory_id (+ author): Query PK = `T#<t>#REVS`, `begins_with(SK,                 |
|                        | M#<memory>#)` (GetItem revision); author: Query `T#<t>#AUTHREVS#<author>        |
|                        | #<status>`; neither: Query `T#<t>#REVQ#<status>`; one Query per status          |
|                        | asked for (status None: all three); memory's hits filtered by status            |
| add_history            | Query PK = `T#<t>#HIST#<memory>` backwards, Limit 1 (the last seq); Put         |
|                        | `SEQ#<seq + 1>` if `attribute_not_exists(PK)`; taken meanwhile: read again      |
| list_history           | Query PK = `T#<t>#HIST#<memory>` (sequence order = append order)                |
| put_api_key            | Transact: Put API key if free or same tenant+key_id, Put tenant's copy          |
| get_api_key            | GetItem `APIKEY#<key_hash>`                                                     |
| list_api_keys          | Query PK = `T#<t>#APIKEYS`                                                      |
| revoke_api_key         | GetItem tenant's copy; Transact: Put both with `revoked_at`                     |
| list_aliases           | Query PK = `T#<t>#SLOTS#<parent_id>`, filter item_type = scope_alias            |
| put_alias              | Transact: Put alias slot if `attribute_not_exists(PK)` + its back-ref           |
| erase_scopes           | Query `T#<t>#MEMS` (the scopes' memories, archived too), GSI3 per scope (its    |
|                        | episodes, re-read), `SCOPEFACTS#<scope>` (its facts); dry run: counts. Then per |
|                        | scope, deepest first: BatchWriteItem Delete its memories (key slot, revisions   |
|                        | with their copies, history), episodes, facts and copies, their feed entries,    |
|                        | contradictions, checkpoint, lease, dirty mark, aliases resolving to it (via     |
|                        | `ALIASOF`) and slots under it; last, Transact: Delete scope + feed entry + live |
|                        | slot. Not atomic; erasing again finishes it. Delivered ids are not erased.      |
| put/get_draft          | Put / GetItem draft                                                             |
| apply_structure        | the journal (below and in `mneme.adapters.dynamo_structure`): check the plan;   |
|                        | Put plan parts; Transact: Put journal + lock if absent; per step one or more    |
|                        | Transacts (each <= 100 items) then UpdateItem cursor; Transact: Put draft,      |
|                        | journal `done`, Delete lock                                                     |
| resume_journals        | GetItem lock; GetItem journal, Query its plan parts; run the remaining steps    |

Queries follow `LastEvaluatedKey` to the end (`page_size` caps a page, for tests); results are
sorted in Python as the port orders them. Batch calls retry unprocessed keys with backoff. A
transaction holds at most 100 items: create_scope/create_memory 3, update_memory at most 5,
rename_scope 7, put_episodes 2 per episode (50 a transaction), put_facts at most 4 per fact (25 a
transaction), put_revision 7; a publish step's transactions are sized per record kind (e.g. 20 scopes
or memories at 5 items, 33 episodes at 3).

Structure publish journal (`apply_structure`; details in `mneme.adapters.dynamo_structure`). A draft's
plan can exceed a transaction, so it is applied as ordered steps recorded in a journal: the plan is
checked (stale: Conflict, nothing written), stored, and the journal head + the tenant's publish lock
are put in one transaction; each step reads what it changes and writes final state (records it wrote
carry `structure_draft = <draft_id>` and are skipped when a step runs again), then the head's cursor
advances; the last transaction stores the published draft, marks the head done and drops the lock.
A crash leaves the head `applying`: `apply_structure` of that draft, or `resume_journals(tenant)`,
reruns from the cursor with the journal's plan and `now`, reaching the state an uninterrupted publish
reaches. The draft reads `open` until then; readers may see the tree part-way meanwhile. A publish of
another draft first completes the interrupted one, then raises Conflict `stale_preview`.

Change feed ("feed move" above). A scope, memory, episode or fact has one entry in its tenant's feed
partition `T#<t>#FEED`, at `<position>#<id>`, and carries that position in `feed_position`. A write
of the record is one TransactWriteItems: Put the record with the new `feed_position` on condition
that the stored one is still the one read ("unmoved"; absent for a new record), Put the new entry,
Delete the old one. Two writers moving one record cannot leave two entries: the second fails its
condition (put_facts reads again and retries; update_memory and rename_scope raise the Conflict they
raise for any concurrent change). A retried put_episodes adds no entry; mark_indexed is no change.

Ordering. The position is the writer's clock at the write (`now`, injectable), moved 1 µs past the
record's previous position and past the last position this store object handed out; fixed-width UTC
text `%Y-%m-%dT%H:%M:%S.%fZ`, as the SQLite store writes, so `<position>#<id>` sorts as (position,
id). Writers are not serialised, so a transaction can commit after one with a later position has
committed and been read; a reader whose cursor passed the earlier position would never see it. So
list_changes reads its clock first and returns only entries at or before `settled = now -
feed_horizon_seconds` (default 5 s): a cursor never goes past `settled`. Assumption: a write
transaction is visible to readers within the horizon of its position as the reader's clock tells it:
one TransactWriteItems (with the SDK's retries) plus writer/reader clock skew stays under the horizon.
Then any entry still uncommitted when a reader reads its clock has position > settled >= the cursor it
can reach, so it lands ahead of every cursor and is read, once, when it settles (a committed
transaction is wholly visible: the Query's read-committed isolation matters only during the commit).
If the assumption breaks (a stalled commit, a clock off by more) a reader can miss a change: raise the
horizon. The cost is latency: a change reaches the feed `feed_horizon_seconds` after its write. Each
tenant's feed is one partition (about 1,000 writes/s; a move is a Put and a Delete). Records written
before the feed existed have no entry until their next write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from mneme.adapters.dynamo_codec import (
    ALIAS,
    DIRTY,
    LIVE,
    Item,
    Write,
    alias_item,
    alias_ref_item,
    alias_ref_key,
    apikey_key,
    attr,
    checkpoint_key,
    contradiction_key,
    delete,
    delivered_pk,
    dirty_key,
    dirty_mark,
    episode_key,
    esc,
    expression,
    fact_key,
    from_item,
    iso_utc,
    key,
    layers_key,
    lease_key,
    memory_key,
    mslot_key,
    mslot_pk,
    put,
    run_key,
    scope_fact_key,
    scope_key,
    slot_key,
    slots_pk,
    tenant_apikey_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo_extras import FEED_POSITION, position_of, unmoved
from mneme.adapters.dynamo_structure import DynamoStructure
from mneme.consolidation.models import Checkpoint, Contradiction, Fact, Run
from mneme.errors import Conflict, MnemeError, StoreUnavailable
from mneme.models import ApiKey, Episode, Memory, Scope

GSI1, GSI2, GSI3 = "GSI1", "GSI2", "GSI3"


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
        for name in ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK")
    ],
    "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
    "GlobalSecondaryIndexes": [_keys_only_index(GSI1), _keys_only_index(GSI2), _keys_only_index(GSI3)],
}

UNINDEXED = "UNINDEXED"
EPISODE_CODEC: dict[str, Any] = {"json_fields": ("metadata",), "vector_fields": ("vector",)}
FACT_CODEC: dict[str, Any] = {"vector_fields": ("vector",)}
RUN_CODEC: dict[str, Any] = {"json_fields": ("stages",)}
BATCH_ATTEMPTS = 6
EPISODES_PER_TRANSACTION = 50  # episode + feed entry
FACTS_PER_TRANSACTION = 25  # fact + scope copy + feed entry + old feed entry
FACT_ATTEMPTS = 5


def create_table(client: Any, table_name: str) -> None:
    """Create the table on demand (tests, local tooling) and wait until it is active."""
    client.create_table(TableName=table_name, BillingMode="PAY_PER_REQUEST", **TABLE_SCHEMA)
    client.get_waiter("table_exists").wait(TableName=table_name)


# -- errors -----------------------------------------------------------------------------
def _unique(keys: Iterable[Item]) -> list[Item]:
    return list({(k["PK"]["S"], k["SK"]["S"]): k for k in keys}.values())


def _taken(memory: Memory) -> str:
    return f"a memory with key {memory.key!r} already exists there"


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


class DynamoRecordStore(DynamoStructure):
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

    def _batch_get(self, keys: Sequence[Item], projection: str | None = None) -> list[Item]:
        chunks = [keys[start : start + 100] for start in range(0, len(keys), 100)]
        read = {"ConsistentRead": True, **({"ProjectionExpression": projection} if projection else {})}
        requests = [{self.table_name: {"Keys": list(chunk), **read}} for chunk in chunks]
        return [item for request in requests for item in self._drain("batch_get_item", request, "UnprocessedKeys")]

    def _batch_write(self, requests: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(requests), 25):
            self._drain("batch_write_item", {self.table_name: list(requests[start : start + 25])}, "UnprocessedItems")

    # -- scopes ---------------------------------------------------------------------------
    def get_scope(self, tenant: str, scope_id: str) -> Scope | None:
        item = self._get(scope_key(tenant, scope_id))
        return to_model(Scope, item) if item else None

    def _slot(self, tenant: str, parent_id: str | None, segment: str, item_type: str) -> Item | None:
        item = self._get(slot_key(tenant, parent_id, segment))
        return item if item is not None and item.get("item_type") == {"S": item_type} else None

    def find_child(self, tenant: str, parent_id: str | None, segment: str) -> Scope | None:
        item = self._slot(tenant, parent_id, segment, LIVE)
        return to_model(Scope, item) if item else None

    def find_alias(self, tenant: str, parent_id: str, segment: str) -> str | None:
        item = self._slot(tenant, parent_id, segment, ALIAS)
        return str(from_item(item)["scope_id"]) if item else None

    def list_children(self, tenant: str, parent_id: str) -> list[Scope]:
        items = self._query(slots_pk(tenant, parent_id), "#item_type = :live", live=LIVE)
        return sorted((to_model(Scope, item) for item in items), key=lambda scope: scope.segment)

    def create_scope(self, scope: Scope) -> None:
        tenant, parent, position = scope.tenant, scope.parent_id, self._position()
        record = to_item(scope, scope_key(tenant, scope.scope_id), item_type="scope", feed_position=position)
        slot = to_item(scope, slot_key(tenant, parent, scope.segment), item_type=LIVE)
        free = "attribute_not_exists(PK)"
        self._transact(
            [
                put(record, free, "scope_exists", f"scope {scope.scope_id} already exists"),
                put(slot, free, "scope_exists", f"{scope.segment!r} is already taken under this parent"),
                *self._feed_move(tenant, "scope", scope.scope_id, None, position),
            ]
        )

    def rename_scope(self, tenant: str, scope_id: str, new_segment: str, now: datetime) -> Scope:
        stored = self._get(scope_key(tenant, scope_id))
        if stored is None:
            raise Conflict(f"scope {scope_id} no longer exists", code="scope_gone")
        scope = to_model(Scope, stored)
        if new_segment == scope.segment:
            return scope
        renamed = scope.model_copy(update={"segment": new_segment, "updated_at": now})
        previous = position_of(stored)
        position = self._position(previous)
        record = to_item(renamed, scope_key(tenant, scope_id), item_type="scope", feed_position=position)
        same, feed_values = unmoved(previous)
        alias = alias_item(tenant, scope.parent_id, scope.segment, scope_id)
        alias_ref = alias_ref_item(tenant, scope.parent_id, scope.segment, scope_id)
        slot = to_item(renamed, slot_key(tenant, scope.parent_id, new_segment), item_type=LIVE)
        changed = f"scope {scope_id} changed while being renamed; retry"
        taken = f"cannot rename onto {new_segment!r}: the name is taken"
        own_slot = "#item_type = :live AND #scope_id = :id"
        free_or_own_alias = "attribute_not_exists(PK) OR (#item_type = :alias AND #scope_id = :id)"
        self._transact(
            [
                put(record, f"#segment = :old AND {same}", "conflict", changed, old=scope.segment, **feed_values),
                put(alias, own_slot, "conflict", changed, live=LIVE, id=scope_id),
                put(alias_ref, None, "conflict", ""),
                put(slot, free_or_own_alias, "scope_exists", taken, alias=ALIAS, id=scope_id),
                delete(alias_ref_key(tenant, scope_id, scope.parent_id, new_segment), None, "conflict", ""),
                *self._feed_move(tenant, "scope", scope_id, previous, position),
            ]
        )
        return renamed

    def get_layers(self, tenant: str) -> dict[int, str]:
        item = self._get(layers_key(tenant))
        layers = from_item(item)["layers"] if item else {}
        return {int(depth): str(name) for depth, name in layers.items()}

    def put_layers(self, tenant: str, layers: dict[int, str]) -> None:
        item = {**layers_key(tenant), "item_type": attr("layers"), "layers": attr(layers)}
        self._call("put_item", TableName=self.table_name, Item=item)

    # -- memories -------------------------------------------------------------------------
    def create_memory(self, memory: Memory) -> None:
        free, position = "attribute_not_exists(PK)", self._position()
        record = to_item(memory, memory_key(memory.tenant, memory.memory_id), item_type="memory",
                         feed_position=position)  # fmt: skip
        writes = [put(record, free, "memory_exists", f"memory {memory.memory_id} already exists")]
        slot = mslot_key(memory)
        if slot is not None:
            writes.append(put(to_item(memory, slot, item_type="memory_slot"), free, "memory_exists", _taken(memory)))
        self._transact([*writes, *self._feed_move(memory.tenant, "memory", memory.memory_id, None, position)])

    def update_memory(self, memory: Memory, expected_version: int) -> None:
        """The version condition, and that the feed entry is where it was read, guard the whole move."""
        stale = f"memory {memory.memory_id} changed since version {expected_version}"
        item = self._get(memory_key(memory.tenant, memory.memory_id))
        stored = to_model(Memory, item) if item else None
        if stored is None or stored.version != expected_version:
            missing = f"memory {memory.memory_id} does not exist"
            raise Conflict(stale if stored else missing, code="version_conflict")
        previous = position_of(item)
        position = self._position(previous)
        same, feed_values = unmoved(previous)
        record = to_item(memory, memory_key(memory.tenant, memory.memory_id), item_type="memory",
                         feed_position=position)  # fmt: skip
        unchanged = f"#version = :v AND {same}"
        writes = [put(record, unchanged, "version_conflict", stale, v=expected_version, **feed_values)]
        writes += self._feed_move(memory.tenant, "memory", memory.memory_id, previous, position)
        old, new = mslot_key(stored), mslot_key(memory)
        mine, owner = "#memory_id = :id", {"id": memory.memory_id}
        if old is not None and old == new:
            writes.append(put(to_item(memory, old, item_type="memory_slot"), mine, "version_conflict", stale, **owner))
        else:
            if old is not None:
                writes.append(delete(old, mine, "version_conflict", stale, **owner))
            if new is not None:
                slot = to_item(memory, new, item_type="memory_slot")
                writes.append(put(slot, "attribute_not_exists(PK)", "memory_exists", _taken(memory)))
        self._transact(writes)

    def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        item = self._get(memory_key(tenant, memory_id))
        return to_model(Memory, item) if item else None

    def _memories(self, pk: str) -> list[Memory]:
        memories = [to_model(Memory, item) for item in self._query(pk)]
        return sorted(memories, key=lambda memory: (memory.key, memory.memory_id))

    def list_scoped_memories(self, tenant: str, scope_id: str) -> list[Memory]:
        return self._memories(mslot_pk(tenant, "scoped", scope_id, None, None))

    def list_tagged_memories(self, tenant: str, layer: str, value: str | None) -> list[Memory]:
        return self._memories(mslot_pk(tenant, "tagged", None, layer, value))

    def list_memories(self, tenant: str) -> list[Memory]:
        items = self._query(tenant_pk(tenant, "MEMS"), "#status <> :archived", archived="archived")
        return sorted((to_model(Memory, item) for item in items), key=lambda memory: memory.memory_id)

    # -- episodes -------------------------------------------------------------------------
    @staticmethod
    def _episode_item(episode: Episode, position: str) -> Item:
        tenant, episode_id, created = episode.tenant, episode.episode_id, iso_utc(episode.created_at)
        attributes = {
            "feed_position": position,
            "GSI2PK": tenant_pk(tenant, "EPISODES"),
            "GSI2SK": f"{created}#{episode_id}",
            "GSI3PK": tenant_pk(tenant, "SCOPEEPS", episode.scope_id),
            "GSI3SK": f"{created}#{episode_id}",
        }
        if not episode.indexed:
            attributes.update(GSI1PK=UNINDEXED, GSI1SK=f"{created}#{esc(tenant)}#{episode_id}")
        return to_item(episode, episode_key(tenant, episode_id), **EPISODE_CODEC, item_type="episode", **attributes)

    def _episodes(self, keys: Sequence[Item]) -> list[Episode]:
        items = self._batch_get(keys)
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def put_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        """More than 50 episodes are written fifty at a time (two items each: the episode and its feed
        entry), each fifty atomically."""
        if len(episodes) > EPISODES_PER_TRANSACTION:
            per = EPISODES_PER_TRANSACTION
            stored: list[Episode] = []
            written: set[str] = set()
            for start in range(0, len(episodes), per):
                chunk_stored, chunk_written = self.put_episodes(episodes[start : start + per])
                stored += chunk_stored
                written |= chunk_written
            return stored, written
        try:
            return self._put_new_episodes(episodes)
        except Conflict as e:
            if e.code != "episode_race":
                raise
            return self._put_new_episodes(episodes)  # a concurrent writer won; now its records are read

    def _put_new_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        unique: dict[tuple[str, str], Episode] = {}
        for episode in episodes:  # the first of repeated ids is the one written
            unique.setdefault((episode.tenant, episode.episode_id), episode)
        stored = {(e.tenant, e.episode_id): e for e in self._episodes([episode_key(*k) for k in unique])}
        new = [episode for k, episode in unique.items() if k not in stored]
        chosen = {**{(e.tenant, e.episode_id): e for e in new}, **stored}
        for episode in episodes:
            if chosen[(episode.tenant, episode.episode_id)].content_hash != episode.content_hash:
                reused = "this idempotency key was already used for different content"
                raise Conflict(reused, code="idempotency_key_reused", details={"episode_id": episode.episode_id})
        if new:
            free, race = "attribute_not_exists(PK)", "an episode was written concurrently"
            writes: list[Write] = []
            for e in new:
                position = self._position()
                writes.append(put(self._episode_item(e, position), free, "episode_race", race))
                writes += self._feed_move(e.tenant, "episode", e.episode_id, None, position)
            self._transact(writes)  # conditional on every new id: all written by this call, or none
        return [chosen[(episode.tenant, episode.episode_id)] for episode in episodes], {e.episode_id for e in new}

    def get_episodes(self, tenant: str, episode_ids: Sequence[str]) -> dict[str, Episode]:
        found = self._episodes([episode_key(tenant, i) for i in dict.fromkeys(episode_ids)])
        return {episode.episode_id: episode for episode in found}

    def mark_indexed(self, tenant: str, episode_ids: Sequence[str]) -> None:
        for episode_id in dict.fromkeys(episode_ids):
            try:
                self._call(
                    "update_item",
                    TableName=self.table_name,
                    Key=episode_key(tenant, episode_id),
                    UpdateExpression="SET #indexed = :yes REMOVE GSI1PK, GSI1SK",
                    ConditionExpression="attribute_exists(PK)",
                    **expression({"yes": True}, "#indexed"),
                )
            except Conflict:  # no such episode in this tenant: nothing to mark
                continue

    def _index_items(
        self, query: dict[str, Any], limit: int, keep: Callable[[Item], bool] = lambda item: True
    ) -> list[Item]:
        """Up to `limit` items found through a KEYS_ONLY index, in index order, each re-read from the
        table (strongly consistent) and kept if `keep` says it still qualifies."""
        found: list[Item] = []
        for page in self._pages({**query, "Limit": limit}):
            keys = [{"PK": hit["PK"], "SK": hit["SK"]} for hit in page]
            items = {(i["PK"]["S"], i["SK"]["S"]): i for i in self._batch_get(list(_unique(keys)))}
            for k in _unique(keys):
                item = items.get((k["PK"]["S"], k["SK"]["S"]))
                if item is not None and keep(item):
                    found.append(item)
            if len(found) >= limit:
                break
        return found[:limit]

    def list_recent_episodes(self, tenant: str, since: datetime, limit: int) -> list[Episode]:
        if limit < 1:
            return []
        condition = "GSI2PK = :pk AND GSI2SK >= :since"
        values = {"pk": tenant_pk(tenant, "EPISODES"), "since": iso_utc(since)}
        query = {"IndexName": GSI2, "KeyConditionExpression": condition, "ScanIndexForward": False}
        items = self._index_items({**query, **expression(values)}, limit)
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def list_unindexed(self, limit: int) -> list[Episode]:
        if limit < 1:
            return []
        query = {"IndexName": GSI1, "KeyConditionExpression": "GSI1PK = :q", **expression({"q": UNINDEXED})}
        items = self._index_items(query, limit, keep=lambda item: "GSI1PK" in item)  # else marked meanwhile
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def iter_episodes(self, tenant: str, batch: int = 500) -> Iterator[list[Episode]]:
        query = {"KeyConditionExpression": "PK = :pk", "ConsistentRead": True, "Limit": batch}
        for page in self._pages({**query, **expression({"pk": tenant_pk(tenant, "EPISODES")})}):
            if page:
                yield [to_model(Episode, item, **EPISODE_CODEC) for item in page]

    def get_delivered(self, tenant: str, principal: str, session_id: str) -> set[str]:
        return {str(from_item(item)["id"]) for item in self._query(delivered_pk(tenant, principal, session_id))}

    def add_delivered(self, tenant: str, principal: str, session_id: str, ids: Sequence[str]) -> None:
        pk = delivered_pk(tenant, principal, session_id)
        items = [{**key(pk, f"ID#{i}"), "item_type": attr("delivered"), "id": attr(i)} for i in dict.fromkeys(ids)]
        puts = [{"PutRequest": {"Item": item}} for item in items]
        self._batch_write(puts)

    # -- consolidation --------------------------------------------------------------------
    def mark_dirty(self, tenant: str, scope_ids: Sequence[str], now: datetime) -> None:
        marks = [dirty_mark(tenant, scope_id, now) for scope_id in dict.fromkeys(scope_ids)]
        self._batch_write([{"PutRequest": {"Item": mark}} for mark in marks])

    def list_dirty(self, tenant: str | None, limit: int) -> list[tuple[str, str]]:
        if limit < 1:
            return []
        if tenant is None:
            query = {"IndexName": GSI1, "KeyConditionExpression": "GSI1PK = :q", **expression({"q": DIRTY})}
            items = self._index_items(query, limit)
        else:
            items = self._query(tenant_pk(tenant, "DIRTY"))
        marks = sorted((from_item(item) for item in items), key=lambda mark: str(mark["dirtied_at"]))
        return [(str(mark["tenant"]), str(mark["scope_id"])) for mark in marks[:limit]]

    def clear_dirty(self, tenant: str, scope_id: str, dirtied_before: datetime) -> None:
        unchanged, before = "#dirtied_at <= :before", iso_utc(dirtied_before)
        try:
            self._write_one(delete(dirty_key(tenant, scope_id), unchanged, "conflict", "", before=before))
        except Conflict:  # refreshed during the run (or already clear): the mark stays
            return

    def list_episodes_after(
        self, tenant: str, scope_id: str, after: tuple[datetime | None, str], before: datetime, limit: int
    ) -> list[Episode]:
        if limit < 1:
            return []
        created, episode_id = after
        values = {"pk": tenant_pk(tenant, "SCOPEEPS", scope_id), "upper": iso_utc(before)}
        condition, lower = "GSI3PK = :pk AND GSI3SK < :upper", ""
        if created is not None:  # (created_at, episode_id) order is the order of "<created>#<episode_id>"
            lower = f"{iso_utc(created)}#{episode_id}"
            if lower >= values["upper"]:
                return []
            condition, values["lower"] = "GSI3PK = :pk AND GSI3SK BETWEEN :lower AND :upper", lower
        query = {"IndexName": GSI3, "KeyConditionExpression": condition, **expression(values)}
        items = self._index_items(query, limit, keep=lambda item: item["GSI3SK"]["S"] != lower)
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def get_checkpoint(self, tenant: str, scope_id: str) -> Checkpoint:
        item = self._get(checkpoint_key(tenant, scope_id))
        return to_model(Checkpoint, item) if item else Checkpoint(tenant=tenant, scope_id=scope_id)

    def save_checkpoint(self, checkpoint: Checkpoint, expected_version: int) -> None:
        item = to_item(checkpoint, checkpoint_key(checkpoint.tenant, checkpoint.scope_id), item_type="checkpoint")
        unchanged = "attribute_not_exists(PK) OR #version = :v" if expected_version == 0 else "#version = :v"
        moved = "the checkpoint moved: another run advanced this scope"
        self._write_one(put(item, unchanged, "checkpoint_moved", moved, v=expected_version))

    def acquire_lease(self, tenant: str, scope_id: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        lease = {**lease_key(tenant, scope_id), "item_type": attr("lease"), "owner": attr(owner),
                 "until": attr(iso_utc(now + ttl))}  # fmt: skip
        free = "attribute_not_exists(PK) OR #owner = :owner OR #until <= :now"
        try:
            self._write_one(put(lease, free, "conflict", "leased", owner=owner, now=iso_utc(now)))
        except Conflict:  # another owner holds a live lease
            return False
        return True

    def release_lease(self, tenant: str, scope_id: str, owner: str) -> None:
        try:
            self._write_one(delete(lease_key(tenant, scope_id), "#owner = :owner", "conflict", "", owner=owner))
        except Conflict:  # not ours (any more): leave it
            return

    def put_facts(self, facts: Sequence[Fact], contradictions: Sequence[Contradiction] = ()) -> None:
        """Atomic up to 25 facts (four items each: fact, scope copy, feed entry, old feed entry) with their
        new contradictions; larger sets go in chunks, each atomic."""
        unique = list({(fact.tenant, fact.fact_id): fact for fact in facts}.values())  # the last of an id wins
        added = {(c.tenant, c.scope_id, c.contradiction_id): c for c in reversed(contradictions)}  # first wins
        stored = {(i["PK"]["S"], i["SK"]["S"]) for i in self._batch_get([contradiction_key(*k) for k in added])}
        new: list[Write] = []
        for ident, contradiction in added.items():  # a stored contradiction is never rewritten
            contra_key = contradiction_key(*ident)
            if (contra_key["PK"]["S"], contra_key["SK"]["S"]) not in stored:
                new.append(put(to_item(contradiction, contra_key, item_type="contradiction"), None, "conflict", ""))
        per, riding = FACTS_PER_TRANSACTION, 0
        chunks = [unique[start : start + per] for start in range(0, len(unique), per)]
        for index, chunk in enumerate(chunks):  # the last chunk takes the contradictions that fit
            riding = 100 - 4 * len(chunk) if index == len(chunks) - 1 else 0
            self._put_fact_chunk(chunk, new[:riding])
        for start in range(riding, len(new), 100):
            self._transact(new[start : start + 100])

    def _put_fact_chunk(self, facts: Sequence[Fact], extra: Sequence[Write]) -> None:
        """One transaction: each fact (and its scope copy) moved to the feed's head, plus `extra`. A fact
        whose feed entry moved after it was read (a concurrent upsert) makes it read and try again."""
        for attempt in range(FACT_ATTEMPTS):
            keys = [fact_key(fact.tenant, fact.fact_id) for fact in facts]
            items = self._batch_get(keys, projection=f"PK, SK, {FEED_POSITION}")
            positions = {(i["PK"]["S"], i["SK"]["S"]): position_of(i) for i in items}
            writes: list[Write] = []
            for fact, record_key in zip(facts, keys, strict=True):
                previous = positions.get((record_key["PK"]["S"], record_key["SK"]["S"]))
                position = self._position(previous)
                same, feed_values = unmoved(previous)
                record = to_item(fact, record_key, **FACT_CODEC, item_type="fact", feed_position=position)
                copy = to_item(fact, scope_fact_key(fact.tenant, fact.scope_id, fact.fact_id), **FACT_CODEC,
                               item_type="fact_copy")  # fmt: skip
                writes += [put(record, same, "fact_race", "a fact was written concurrently", **feed_values),
                           put(copy, None, "conflict", ""),
                           *self._feed_move(fact.tenant, "fact", fact.fact_id, previous, position)]  # fmt: skip
            try:
                if writes or extra:
                    self._transact([*writes, *extra])
                return
            except Conflict as e:
                if e.code != "fact_race" or attempt == FACT_ATTEMPTS - 1:
                    raise

    def get_facts(self, tenant: str, fact_ids: Sequence[str]) -> dict[str, Fact]:
        items = self._batch_get([fact_key(tenant, fact_id) for fact_id in dict.fromkeys(fact_ids)])
        return {fact.fact_id: fact for fact in (to_model(Fact, item, **FACT_CODEC) for item in items)}

    def list_facts(self, tenant: str, scope_id: str | None = None) -> list[Fact]:
        pk = tenant_pk(tenant, "FACTS") if scope_id is None else tenant_pk(tenant, "SCOPEFACTS", scope_id)
        facts = [to_model(Fact, item, **FACT_CODEC) for item in self._query(pk)]
        return sorted(facts, key=lambda fact: fact.fact_id)

    def list_contradictions(self, tenant: str, scope_id: str) -> list[Contradiction]:
        found = [to_model(Contradiction, item) for item in self._query(tenant_pk(tenant, "CONTRA", scope_id))]
        return sorted(found, key=lambda contradiction: contradiction.contradiction_id)

    def put_run(self, run: Run) -> None:
        item = to_item(run, run_key(run.tenant, run.run_id), **RUN_CODEC, item_type="run")
        self._call("put_item", TableName=self.table_name, Item=item)

    def get_run(self, tenant: str, run_id: str) -> Run | None:
        item = self._get(run_key(tenant, run_id))
        return to_model(Run, item, **RUN_CODEC) if item else None

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
