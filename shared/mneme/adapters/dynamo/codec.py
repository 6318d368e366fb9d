"""Pydantic models to DynamoDB items and back, the table's key builders, and write-request builders.

Attribute rules: datetimes are ISO-8601 UTC strings with microseconds (fixed width, so they sort; a
naive datetime is taken as UTC). Floats go through `Decimal(repr(x))`, which round-trips every
finite float exactly; numbers come back as `int` when integral, else `float`, and the model's field
types settle the rest (a `float` field given `1` holds `1.0`). `None` is NULL. Free-form fields
(`json_fields`, e.g. episode metadata) are stored as one JSON string so they come back unchanged
(`1.0` stays `1.0`, no 38-digit number limit); float vectors (`vector_fields`) as binary, quantised to
a byte a dimension (`pack_vector`: a 1024-dimension episode is ~1.4 KB, 2 write units; it was ~4.4 KB as
float32 and ~8.5 KB as float64, 5 and 9). The index holds the embedder's own vectors; the records'
serve the fresh tail, consolidation and a rebuild, none of which a 3e-4 change of cosine moves. Vectors
written before as float32 or bare float64 still read.

Keys: see the table in `mneme.adapters.dynamo.store`. The tenant, layer, principal and author are
escaped (`%` -> `%25`, `#` -> `%23`) because text follows them, as is a memory id where text follows
it; ids, segments and keys otherwise only ever end a key. Change-feed positions are fixed-width UTC
text (`%Y-%m-%dT%H:%M:%S.%fZ`, as the embedded store writes them), so they sort as time.

Writes: `put` / `delete` build one TransactWriteItems entry with its condition (`#x` names attribute
x, `:x` the value passed as x) and the Conflict a failed condition means.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from pydantic import BaseModel

if TYPE_CHECKING:
    from mneme.models import Memory


AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]
M = TypeVar("M", bound=BaseModel)

_serializer: Any = TypeSerializer()
_deserializer: Any = TypeDeserializer()


LIVE, ALIAS, DIRTY = "scope_slot", "scope_alias", "DIRTY"  # name slot item types; GSI1 partition of dirty marks
POSITION_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_MICRO = timedelta(microseconds=1)


def iso_utc(moment: datetime) -> str:
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat(timespec="microseconds")


def position_text(moment: datetime) -> str:
    """A change-feed position: fixed-width UTC text that sorts as time."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.strftime(POSITION_FORMAT)


def next_position(moment: datetime, *after: str | None) -> str:
    """`moment` as a position, moved to a microsecond past each of `after` that is not already behind it."""
    position = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    for previous in after:
        if previous is not None:
            position = max(position, datetime.strptime(previous, POSITION_FORMAT).replace(tzinfo=UTC) + _MICRO)
    return position_text(position)


def _plain(value: Any) -> Any:
    """Python value -> what TypeSerializer accepts (no float, datetime, enum, tuple or set)."""
    if isinstance(value, Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | str | int | Decimal | bytes):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"DynamoDB cannot store the number {value!r}")
        return Decimal(repr(value))
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, BaseModel):
        return {name: _plain(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_plain(item) for item in items]
    raise TypeError(f"cannot encode {type(value).__name__} for DynamoDB")


def _python(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _python(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_python(item) for item in value]
    return value


def attr(value: Any) -> AttributeValue:
    """One attribute value, e.g. for ExpressionAttributeValues."""
    serialized: AttributeValue = _serializer.serialize(_plain(value))
    return serialized


FLOAT32 = b"\x04"  # the format byte of a float32 vector (written before INT8)
INT8 = b"\x08"  # the format byte of a vector quantised to int8: then its float32 scale, then a byte a dimension


def pack_vector(vector: Sequence[float]) -> bytes:
    """INT8 + scale + int8s for every vector whose dimension is a multiple of 8 (every embedder's: 256,
    384, 512, 1024), else FLOAT32 + float32s. Quantised with one scale a vector (its largest magnitude /
    127), a unit vector's cosine with any query moves by about 3e-4 at 1024 dimensions (bench
    tests/unit/test_dynamo_vectors.py): no ranking a user sees changes, and a 1024-dimension episode's item
    is ~1.4 KB instead of ~4.4 KB, 2 write units instead of 5 and one read unit at 4 KB."""
    n = len(vector)
    if n < 8 or n % 8 or not all(map(math.isfinite, vector)):
        return FLOAT32 + struct.pack(f"<{n}f", *vector)
    scale = max(map(abs, vector)) / 127 or 1.0
    quantised = (max(-127, min(127, round(value / scale))) for value in vector)
    return INT8 + struct.pack(f"<f{n}b", scale, *quantised)


def unpack_vector(packed: bytes) -> list[float]:
    """A stored vector: INT8 + scale + int8s (a length of 5 + 8n), FLOAT32 + float32s (1 + 4n), or, written
    before either, bare float64s (8n)."""
    if len(packed) % 8 == 5 and packed[:1] == INT8:
        scale, *quantised = struct.unpack(f"<f{len(packed) - 5}b", packed[1:])
        return [value * scale for value in quantised]
    if len(packed) % 4 == 1 and packed[:1] == FLOAT32:
        return list(struct.unpack(f"<{len(packed) // 4}f", packed[1:]))
    return list(struct.unpack(f"<{len(packed) // 8}d", packed))


def to_item(
    model: BaseModel,
    key: Item,
    *,
    json_fields: Collection[str] = (),
    vector_fields: Collection[str] = (),
    **extra: Any,
) -> Item:
    """A model's fields plus `extra` plain attributes (e.g. `item_type`) under an encoded `key`."""
    clash = (set(key) | set(extra)) & set(type(model).model_fields)
    if clash:
        raise ValueError(f"{type(model).__name__} fields {sorted(clash)} clash with item attributes")
    item = dict(key)
    as_json = model.model_dump(mode="json", include=set(json_fields)) if json_fields else {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if value is not None and name in json_fields:
            item[name] = {"S": json.dumps(as_json[name], allow_nan=False)}
        elif value is not None and name in vector_fields:
            item[name] = {"B": pack_vector(value)}
        else:
            item[name] = attr(value)
    item.update({name: attr(value) for name, value in extra.items()})
    return item


def from_item(item: Mapping[str, AttributeValue]) -> dict[str, Any]:
    return {name: _python(_deserializer.deserialize(value)) for name, value in item.items()}


def to_model(
    model_type: type[M],
    item: Mapping[str, AttributeValue],
    *,
    json_fields: Collection[str] = (),
    vector_fields: Collection[str] = (),
) -> M:
    """Validate an item as `model_type`; attributes the model does not declare are ignored."""
    fields: dict[str, Any] = {}
    for name, value in item.items():
        if name not in model_type.model_fields:
            continue
        if name in json_fields and "S" in value:
            fields[name] = json.loads(value["S"])
        elif name in vector_fields and "B" in value:
            fields[name] = unpack_vector(bytes(value["B"]))
        else:
            fields[name] = _python(_deserializer.deserialize(value))
    return model_type.model_validate(fields)


# -- write requests -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Write:
    """One TransactWriteItems entry and the Conflict it means when its condition fails."""

    request: dict[str, Any]
    code: str
    message: str


def put(item: Item, condition: str | None, code: str, message: str, **values: Any) -> Write:
    return Write({"Put": {"Item": item, **_condition(condition, values)}}, code, message)


def check(key: Item, condition: str, code: str, message: str, **values: Any) -> Write:
    """A condition on an item the transaction does not write."""
    return Write({"ConditionCheck": {"Key": key, **_condition(condition, values)}}, code, message)


def delete(key: Item, condition: str | None, code: str, message: str, **values: Any) -> Write:
    return Write({"Delete": {"Key": key, **_condition(condition, values)}}, code, message)


def expression(values: Mapping[str, Any], *expressions: str) -> dict[str, Any]:
    """Names and values for `#x` / `:x` placeholders: `#x` is attribute x, `:x` is values[x]."""
    words = " ".join(expressions).replace("(", " ").replace(")", " ").replace(",", " ").split()
    names = {word: word[1:] for word in words if word.startswith("#")}
    params: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
    if values:
        params["ExpressionAttributeValues"] = {f":{name}": attr(value) for name, value in values.items()}
    return params


def _condition(condition: str | None, values: Mapping[str, Any]) -> dict[str, Any]:
    if condition is None:
        return {}
    checked = {"ConditionExpression": condition, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    return {**checked, **expression(values, condition)}


# -- keys ---------------------------------------------------------------------------------------
def esc(part: str) -> str:
    return part.replace("%", "%25").replace("#", "%23")


def key(pk: str, sk: str) -> Item:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def tenant_pk(tenant: str, *rest: str) -> str:
    return "#".join(("T", esc(tenant), *rest))


MARKER_SHARDS = 16  # GSI1 partitions per cross-tenant mark (unindexed episodes, dirty scopes)


def marker_partition(base: str, tenant: str) -> str:
    """The GSI1 partition of a tenant's marks: `<base>#<00..15>` by a hash of the tenant, so that no one
    partition takes every tenant's writes. Readers query every shard (and the bare `<base>` of marks
    written before the sharding): `marker_partitions`."""
    shard = int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:4], "big") % MARKER_SHARDS
    return f"{base}#{shard:02d}"


def marker_partitions(base: str) -> list[str]:
    return [base, *(f"{base}#{shard:02d}" for shard in range(MARKER_SHARDS))]


def scope_key(tenant: str, scope_id: str) -> Item:
    return key(tenant_pk(tenant, "SCOPE", scope_id), "SCOPE")


def slots_pk(tenant: str, parent_id: str | None) -> str:
    return tenant_pk(tenant, "ROOTSLOTS") if parent_id is None else tenant_pk(tenant, "SLOTS", parent_id)


def slot_key(tenant: str, parent_id: str | None, segment: str) -> Item:
    return key(slots_pk(tenant, parent_id), f"SEG#{segment}")


def alias_item(tenant: str, parent_id: str | None, segment: str, scope_id: str) -> Item:
    """The name slot (parent, segment) as an alias resolving to `scope_id`."""
    fields = {"tenant": tenant, "parent_id": parent_id, "segment": segment, "scope_id": scope_id}
    return {**slot_key(tenant, parent_id, segment), **{n: attr(v) for n, v in fields.items()}, "item_type": attr(ALIAS)}


def alias_ref_pk(tenant: str, scope_id: str) -> str:
    return tenant_pk(tenant, "ALIASOF", scope_id)


def alias_ref_key(tenant: str, scope_id: str, parent_id: str | None, segment: str) -> Item:
    """The back-reference of an alias (parent, segment) -> scope: where a scope's aliases are listed."""
    where = "ROOT" if parent_id is None else f"SLOT#{esc(parent_id)}"
    return key(alias_ref_pk(tenant, scope_id), f"{where}#{segment}")


def alias_ref_item(tenant: str, parent_id: str | None, segment: str, scope_id: str) -> Item:
    fields = {"tenant": tenant, "parent_id": parent_id, "segment": segment, "scope_id": scope_id}
    ref_key = alias_ref_key(tenant, scope_id, parent_id, segment)
    return {**ref_key, **{n: attr(v) for n, v in fields.items()}, "item_type": attr("alias_ref")}


def layers_key(tenant: str) -> Item:
    return key(tenant_pk(tenant, "LAYERS"), "LAYERS")


def memory_key(tenant: str, memory_id: str) -> Item:
    return key(tenant_pk(tenant, "MEMS"), f"MEM#{memory_id}")


def mslot_pk(tenant: str, kind: str, scope_id: str | None, layer: str | None, value: str | None) -> str:
    if kind == "scoped":
        return tenant_pk(tenant, "MSLOT", "SCOPE", str(scope_id))
    target = ("ALL",) if value is None else ("VAL", value)
    return tenant_pk(tenant, "MSLOT", "TAG", esc(str(layer)), *target)


def mslot_key(memory: Memory) -> Item | None:
    """Where the memory's uniqueness key lives; None once archived (the key is free). A pending draft
    holds a slot of its author's beside the published one (`Memory.uniqueness_key`)."""
    if memory.status == "archived":
        return None
    pk = mslot_pk(memory.tenant, memory.kind, memory.scope_id, memory.layer, memory.value)
    return memory_slot(pk, memory.key, memory.author if memory.status == "pending" else None)


def memory_slot(pk: str, memory_key: str, draft_author: str | None) -> Item:
    """The key slot of `memory_key` in the slot partition `pk`: the published one, or `draft_author`'s draft's."""
    pending = f"#PENDING#{esc(draft_author)}" if draft_author is not None else ""
    return key(pk, f"KEY#{memory_key}{pending}")


def published_slot_key(memory: Memory) -> Item | None:
    """The slot the published memory of `memory`'s key and target holds."""
    return mslot_key(memory.model_copy(update={"status": "published"}))


def episode_key(tenant: str, episode_id: str) -> Item:
    return key(tenant_pk(tenant, "EPISODES"), f"EP#{episode_id}")


def delivered_pk(tenant: str, principal: str, session_id: str) -> str:
    return tenant_pk(tenant, "DELIVERED", esc(principal), session_id)


def apikey_key(key_hash: str) -> Item:
    return key(f"APIKEY#{key_hash}", "APIKEY")


def tenant_apikey_key(tenant: str, key_id: str) -> Item:
    return key(tenant_pk(tenant, "APIKEYS"), f"KEY#{key_id}")


def dirty_key(tenant: str, scope_id: str) -> Item:
    return key(tenant_pk(tenant, "DIRTY"), f"SCOPE#{scope_id}")


def dirty_mark(tenant: str, scope_id: str, dirtied: datetime) -> Item:
    """A dirty mark, also in GSI1 (`DIRTY#<shard>`, `<dirty since>#<t>#<scope>`) for the cross-tenant schedule."""
    at = iso_utc(dirtied)
    fields = {"item_type": "dirty", "tenant": tenant, "scope_id": scope_id, "dirtied_at": at}
    gsi = {"GSI1PK": attr(marker_partition(DIRTY, tenant)), "GSI1SK": attr(f"{at}#{esc(tenant)}#{scope_id}")}
    return {**dirty_key(tenant, scope_id), **gsi, **{n: attr(v) for n, v in fields.items()}}


def dirty_update(tenant: str, scope_id: str, dirtied: datetime) -> dict[str, Any]:
    """UpdateItem parameters that make `dirty_mark(tenant, scope_id, dirtied)` or, when the scope is marked
    already, only move its `dirtied_at` (which `clear_dirty` compares): the GSI1 key keeps the time the
    scope first became dirty, so the schedule takes the longest dirty first, and a busy scope's every
    remember is one write unit, not three (a new index key is a delete and a put of the entry)."""
    attributes = {n: v for n, v in dirty_mark(tenant, scope_id, dirtied).items() if n not in ("PK", "SK")}
    kept = ("GSI1PK", "GSI1SK")
    sets = (f"#{n} = if_not_exists(#{n}, :{n})" if n in kept else f"#{n} = :{n}" for n in attributes)
    change = "SET " + ", ".join(sets)
    values = {f":{n}": v for n, v in attributes.items()}  # already attribute values
    return {"Key": dirty_key(tenant, scope_id), "UpdateExpression": change, **expression({}, change),
            "ExpressionAttributeValues": values}  # fmt: skip


def checkpoint_key(tenant: str, scope_id: str) -> Item:
    return key(tenant_pk(tenant, "CONSOL", scope_id), "CHECKPOINT")


def lease_key(tenant: str, scope_id: str) -> Item:
    return key(tenant_pk(tenant, "CONSOL", scope_id), "LEASE")


def fact_key(tenant: str, fact_id: str) -> Item:
    return key(tenant_pk(tenant, "FACTS"), f"FACT#{fact_id}")


def scope_fact_key(tenant: str, scope_id: str, fact_id: str) -> Item:
    return key(tenant_pk(tenant, "SCOPEFACTS", scope_id), f"FACT#{fact_id}")


def contradiction_key(tenant: str, scope_id: str, contradiction_id: str) -> Item:
    return key(tenant_pk(tenant, "CONTRA", scope_id), f"C#{contradiction_id}")


def run_key(tenant: str, run_id: str) -> Item:
    return key(tenant_pk(tenant, "RUNS"), f"RUN#{run_id}")


def feed_pk(tenant: str) -> str:
    return tenant_pk(tenant, "FEED")


def feed_key(tenant: str, position: str, record_id: str) -> Item:
    return key(feed_pk(tenant), f"{position}#{record_id}")


def revision_key(tenant: str, memory_id: str, author: str) -> Item:
    return key(tenant_pk(tenant, "REVS"), f"M#{esc(memory_id)}#{author}")


def author_revisions_pk(tenant: str, author: str, status: str) -> str:
    return tenant_pk(tenant, "AUTHREVS", esc(author), status)


def author_revision_key(tenant: str, author: str, status: str, memory_id: str) -> Item:
    return key(author_revisions_pk(tenant, author, status), f"M#{memory_id}")


def revision_queue_key(tenant: str, status: str, memory_id: str, author: str) -> Item:
    return key(tenant_pk(tenant, "REVQ", status), f"M#{esc(memory_id)}#{author}")


def history_pk(tenant: str, memory_id: str) -> str:
    return tenant_pk(tenant, "HIST", memory_id)


def history_key(tenant: str, memory_id: str, seq: int) -> Item:
    return key(history_pk(tenant, memory_id), f"SEQ#{seq:012d}")


def draft_key(tenant: str, draft_id: str) -> Item:
    return key(tenant_pk(tenant, "DRAFTS"), f"DRAFT#{draft_id}")


def journal_key(tenant: str, draft_id: str) -> Item:
    return key(tenant_pk(tenant, "JOURNAL"), f"DRAFT#{draft_id}")


def journal_lock_key(tenant: str) -> Item:
    return key(tenant_pk(tenant, "JOURNAL"), "ACTIVE")


def journal_plan_pk(tenant: str, draft_id: str) -> str:
    return tenant_pk(tenant, "JOURNAL", draft_id)


def journal_plan_key(tenant: str, draft_id: str, digest: str, part: int) -> Item:
    return key(journal_plan_pk(tenant, draft_id), f"PLAN#{digest}#{part:04d}")
