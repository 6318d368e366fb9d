"""`DynamoRecordStore`'s memories and their key slots (keys and access patterns are in the module
docstring of `mneme.adapters.dynamo.store`)."""

from __future__ import annotations

from collections.abc import Sequence

from mneme.adapters.dynamo.codec import (
    Item,
    check,
    delete,
    memory_key,
    memory_slot,
    mslot_key,
    mslot_pk,
    published_slot_key,
    put,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.table import DynamoTable, key_of, position_of, text_of, unmoved
from mneme.errors import Conflict
from mneme.models import Memory


def _taken(memory: Memory) -> str:
    return f"a memory with key {memory.key!r} already exists there"


class DynamoMemories(DynamoTable):
    """Memories: a record, plus a key slot while it is not archived."""

    def create_memory(self, memory: Memory) -> None:
        free, position = "attribute_not_exists(PK)", self._position()
        record = to_item(
            memory, memory_key(memory.tenant, memory.memory_id), item_type="memory", feed_position=position
        )
        writes = [put(record, free, "memory_exists", f"memory {memory.memory_id} already exists")]
        slot = mslot_key(memory)
        if slot is not None:
            writes.append(put(to_item(memory, slot, item_type="memory_slot"), free, "memory_exists", _taken(memory)))
        published = published_slot_key(memory)
        if memory.status == "pending" and published is not None:  # a draft of a published key: the key is taken
            writes.append(check(published, free, "memory_exists", _taken(memory)))
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
        record = to_item(
            memory, memory_key(memory.tenant, memory.memory_id), item_type="memory", feed_position=position
        )
        unchanged = f"#version = :v AND {same}"
        writes = [put(record, unchanged, "version_conflict", stale, v=expected_version, **feed_values)]
        writes += self._feed_move(memory.tenant, "memory", memory.memory_id, previous, position)
        old, new = self._held_slot(stored), mslot_key(memory)
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

    def _held_slot(self, memory: Memory) -> Item | None:
        """The slot `memory` holds: a draft written before drafts had a slot per author holds the key's
        published slot (one read, on a draft's update only)."""
        slot, published = mslot_key(memory), published_slot_key(memory)
        if memory.status == "pending" and published is not None:
            held = self._get(published)
            if held is not None and text_of(held, "memory_id") == memory.memory_id:
                return published
        return slot

    def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        item = self._get(memory_key(tenant, memory_id))
        return to_model(Memory, item) if item else None

    def get_memories(self, tenant: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        items = self._items([memory_key(tenant, i) for i in memory_ids]).values()
        return {memory.memory_id: memory for memory in (to_model(Memory, item) for item in items)}

    def _memories(self, pk: str) -> list[Memory]:
        memories = [to_model(Memory, item) for item in self._query(pk)]
        return sorted(memories, key=lambda memory: (memory.key, memory.memory_id))

    def list_scoped_memories(self, tenant: str, scope_id: str) -> list[Memory]:
        return self._memories(mslot_pk(tenant, "scoped", scope_id, None, None))

    def find_scoped_memories(self, tenant: str, scope_id: str, key: str, author: str) -> list[Memory]:
        """One BatchGetItem of the key's two slots: `author`'s draft's and the published one (which a draft
        written before drafts had their own slot may hold: it counts as a draft, its author's alone)."""
        pk = mslot_pk(tenant, "scoped", scope_id, None, None)
        draft, published = memory_slot(pk, key, author), memory_slot(pk, key, None)
        found = self._items([draft, published])
        held = [to_model(Memory, item) for k in (draft, published) if (item := found.get(key_of(k))) is not None]
        mine = [m for m in held if m.status == "pending" and m.author == author]
        return mine[:1] + [m for m in held if m.status == "published"]

    def list_tagged_memories(self, tenant: str, layer: str, value: str | None) -> list[Memory]:
        return self._memories(mslot_pk(tenant, "tagged", None, layer, value))

    def list_memories(self, tenant: str, *, archived: bool = False) -> list[Memory]:
        if archived:
            items = self._query(tenant_pk(tenant, "MEMS"))
        else:
            items = self._query(tenant_pk(tenant, "MEMS"), "#status <> :archived", archived="archived")
        return sorted((to_model(Memory, item) for item in items), key=lambda memory: memory.memory_id)
