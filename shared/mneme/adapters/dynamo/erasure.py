"""`DynamoRecordStore`'s right-to-erasure delete (keys and access patterns are in the module docstring
of `mneme.adapters.dynamo.store`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mneme.adapters.dynamo.codec import (
    ALIAS,
    LIVE,
    Item,
    alias_ref_key,
    alias_ref_pk,
    author_revision_key,
    checkpoint_key,
    delete,
    dirty_key,
    fact_key,
    feed_key,
    history_pk,
    lease_key,
    mslot_key,
    revision_key,
    revision_queue_key,
    scope_key,
    slot_key,
    slots_pk,
    tenant_pk,
    to_model,
)
from mneme.adapters.dynamo.extras import REVISION_STATUSES
from mneme.adapters.dynamo.records import forgotten_key, recently_forgotten
from mneme.adapters.dynamo.table import FEED_POSITION, DynamoTable, position_of, text_of, unmoved
from mneme.models import Memory, Scope

CHANGED = "a record changed during the erasure; erase again"


@dataclass
class _Attached:
    """What hangs off each erased scope, by scope id."""

    memories: dict[str, list[Item]]
    episodes: dict[str, list[Item]]
    facts: dict[str, list[Item]]
    copies: dict[str, list[Item]]  # the scope's copies of its facts (SCOPEFACTS)


class DynamoErasure(DynamoTable):
    """Erasing scopes and everything attached to them, for good."""

    def erase_scopes(self, tenant: str, scope_ids: Sequence[str], *, dry_run: bool) -> tuple[dict[str, int], list[str]]:
        """Count, or delete for good, the scopes and what is attached to them. Several batched writes, not
        atomic: scopes go deepest first (reverse of the given pre-order), each one's records before its
        scope item, feed entry and live slot (one transaction, last), so a crash leaves every remaining
        item reachable from the subtree's path and erasing again finishes the job. Delivered-id marks are
        not erased: they sit in per-session partitions no key leads to from a record (a Scan would), and
        hold only the opaque id of a record that no longer exists."""
        ids = list(dict.fromkeys(scope_ids))
        found = self._attached(tenant, ids)
        counts = {
            "scopes": len(ids),
            "memories": sum(map(len, found.memories.values())),
            "episodes": sum(map(len, found.episodes.values())),
            "facts": sum(map(len, found.facts.values())),
        }
        if dry_run:
            return counts, []
        gone = list(ids)
        for name, group in (("memory_id", found.memories), ("episode_id", found.episodes), ("fact_id", found.facts)):
            gone += [str(i[name]["S"]) for scope_id in ids for i in group[scope_id]]
        for scope_id in reversed(ids):
            self._erase_scope(tenant, scope_id, found)
        return counts, gone

    def _attached(self, tenant: str, ids: list[str]) -> _Attached:
        """The memories, episodes and facts of each scope (keys, ids and feed positions), and its fact copies."""
        erased = set(ids)
        found = _Attached({scope_id: [] for scope_id in ids}, {}, {}, {})
        for item in self._query(tenant_pk(tenant, "MEMS")):
            if text_of(item, "scope_id") in erased:
                found.memories[str(text_of(item, "scope_id"))].append(item)
        projection = f"PK, SK, scope_id, episode_id, fact_id, {FEED_POSITION}"
        for scope_id in ids:
            episodes = self._batch_get(self._scope_episode_keys(tenant, scope_id), projection)
            found.episodes[scope_id] = [item for item in episodes if text_of(item, "scope_id") == scope_id]
            found.copies[scope_id] = self._query(tenant_pk(tenant, "SCOPEFACTS", scope_id))
            fact_keys = [fact_key(tenant, str(copy["fact_id"]["S"])) for copy in found.copies[scope_id]]
            found.facts[scope_id] = [
                item for item in self._items(fact_keys, projection).values() if text_of(item, "scope_id") == scope_id
            ]
        return found

    def _erase_scope(self, tenant: str, scope_id: str, found: _Attached) -> None:
        """One scope's records, what hangs off them, its tombstones, then (last) its scope item."""
        groups = (("memory", found.memories), ("episode", found.episodes), ("fact", found.facts))
        records = [(kind, str(i[f"{kind}_id"]["S"]), i) for kind, group in groups for i in group[scope_id]]
        keys = [*(item for _, _, item in records), *found.copies[scope_id]]
        keys += [feed_key(tenant, pos, i) for _, i, item in records if (pos := position_of(item)) is not None]
        for item in found.memories[scope_id]:
            keys += self._memory_attachments(tenant, to_model(Memory, item))
        keys += self._query(tenant_pk(tenant, "CONTRA", scope_id))
        for fact in found.facts[scope_id]:  # a fact's corrections
            keys += self._query(history_pk(tenant, str(fact["fact_id"]["S"])))
        for copy in self._query(tenant_pk(tenant, "SCOPEFORGOT", scope_id)):  # who forgot what, and why
            keys += [copy, forgotten_key(tenant, str(copy["record_id"]["S"]))]
        keys += [checkpoint_key(tenant, scope_id), lease_key(tenant, scope_id), dirty_key(tenant, scope_id)]
        keys += self._alias_keys(tenant, scope_id)
        self._put_tombstones(
            tenant, [(kind, i) for kind, i, _ in records], [position_of(item) for _, _, item in records]
        )
        self._delete_all(keys)
        self._erase_scope_item(tenant, scope_id)

    def _put_tombstones(self, tenant: str, records: Sequence[tuple[str, str]], previous: Sequence[str | None]) -> None:
        """Feed entries `deleted:<kind>` (the id, nothing else) past every erased record's old entry, and the
        erased episodes' and facts' recent-forgetting marks (`list_forgotten_since`); written before the
        records go, so a crash leaves the records findable and erasing again re-announces them."""
        if records:
            position, now = self._position(*previous), self._now()
            puts = [
                self._feed_move(tenant, f"deleted:{kind}", record_id, None, position)[0] for kind, record_id in records
            ]
            items = [write.request["Put"]["Item"] for write in puts]
            items += [recently_forgotten(tenant, i, now, now) for kind, i in records if kind in ("episode", "fact")]
            self._batch_write([{"PutRequest": {"Item": item}} for item in items])

    def _memory_attachments(self, tenant: str, memory: Memory) -> list[Item]:
        """A memory's key slot, revisions (with their author and queue copies) and history."""
        keys = [slot] if (slot := mslot_key(memory)) is not None else []
        prefix = revision_key(tenant, memory.memory_id, "")["SK"]["S"]
        for revision in self._query(tenant_pk(tenant, "REVS"), prefix=prefix):
            author = str(revision["author"]["S"])
            keys.append(revision_key(tenant, memory.memory_id, author))
            for status in REVISION_STATUSES:
                keys += [
                    author_revision_key(tenant, author, status, memory.memory_id),
                    revision_queue_key(tenant, status, memory.memory_id, author),
                ]
        return keys + self._query(history_pk(tenant, memory.memory_id))

    def _alias_keys(self, tenant: str, scope_id: str) -> list[Item]:
        """Aliases resolving to the scope (with their back-references), and every slot under it."""
        keys: list[Item] = []
        for ref in self._query(alias_ref_pk(tenant, scope_id)):
            slot = slot_key(tenant, text_of(ref, "parent_id"), str(ref["segment"]["S"]))
            held = self._get(slot)
            keys.append(ref)
            if held is not None and text_of(held, "item_type") == ALIAS and text_of(held, "scope_id") == scope_id:
                keys.append(slot)
        for slot in self._query(slots_pk(tenant, scope_id)):
            keys.append(slot)
            if text_of(slot, "item_type") == ALIAS:
                keys.append(alias_ref_key(tenant, str(slot["scope_id"]["S"]), scope_id, str(slot["segment"]["S"])))
        return keys

    def _erase_scope_item(self, tenant: str, scope_id: str) -> None:
        """Transact: Delete the scope, its feed entry and its live slot (last, so it stays findable until
        everything else of it is gone)."""
        item = self._get(scope_key(tenant, scope_id))
        if item is None:
            return
        scope = to_model(Scope, item)
        previous = position_of(item)
        same, values = unmoved(previous)
        writes = [delete(scope_key(tenant, scope_id), same, "conflict", CHANGED, **values)]
        if previous is not None:
            writes.append(delete(feed_key(tenant, previous, scope_id), None, "conflict", ""))
        writes += self._feed_move(tenant, "deleted:scope", scope_id, None, self._position(previous))  # tombstone
        slot = self._get(slot_key(tenant, scope.parent_id, scope.segment))
        if slot is not None and text_of(slot, "item_type") == LIVE and text_of(slot, "scope_id") == scope_id:
            writes.append(
                delete(
                    slot_key(tenant, scope.parent_id, scope.segment),
                    "#scope_id = :id",
                    "conflict",
                    CHANGED,
                    id=scope_id,
                )
            )
        self._transact(writes)
