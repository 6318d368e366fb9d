"""The steps of a structure publish (`DynamoStructure.apply_structure`): each an idempotent function of
the plan that reads what it changes and writes final state (see `mneme.adapters.dynamo.structure`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mneme.adapters.dynamo.codec import (
    ALIAS,
    LIVE,
    Item,
    Write,
    alias_item,
    alias_ref_item,
    alias_ref_key,
    alias_ref_pk,
    attr,
    checkpoint_key,
    delete,
    dirty_key,
    dirty_mark,
    fact_key,
    feed_key,
    lease_key,
    memory_key,
    mslot_key,
    put,
    scope_fact_key,
    scope_key,
    slot_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.episodes import with_session_keys
from mneme.adapters.dynamo.scopes import DynamoScopes
from mneme.adapters.dynamo.table import FEED_POSITION, key_of, position_of, text_of, unmoved
from mneme.errors import Conflict
from mneme.models import Memory, Scope
from mneme.structure_models import Plan

MARK = "structure_draft"  # on each record a publish wrote: the draft whose journal wrote it
CHANGED = "a record changed during the publish; resume it (apply again or resume_journals)"
OWN_ALIAS = "#item_type = :alias AND #scope_id = :id"  # a slot still holds this scope's alias
Step = tuple[str, list[Any]]


def _chunks(values: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(values[start : start + size]) for start in range(0, len(values), size)]


def rename_order(renames: dict[str, str]) -> list[tuple[str, str]]:
    """Layer renames in an order where a name is vacated before another takes it (a chain `a -> b`,
    `b -> c` runs `b -> c` first); a cycle keeps the given order."""
    pending, ordered = dict(renames), []
    while pending:
        ready = [old for old, new in pending.items() if new not in pending] or [next(iter(pending))]
        ordered += [(old, pending.pop(old)) for old in ready]
    return ordered


def journal_steps(plan: Plan) -> list[Step]:
    """The publish as ordered idempotent steps; each fits its writes in transactions of 100 items."""
    updates = [change.scope_id for change in plan.scope_updates]
    removals = list(dict.fromkeys(plan.scope_removals))
    merged = [[source, target] for source, target in plan.record_moves.items() if source in removals]
    steps: list[Step] = [("vacate", chunk) for chunk in _chunks(list(dict.fromkeys([*updates, *removals])), 100)]
    steps += [("place", chunk) for chunk in _chunks(updates, 20)]  # 5 items a scope
    steps += [("repoint", pair) for pair in merged]
    steps += [("remove", chunk) for chunk in _chunks(removals, 16)]  # 6 items a scope
    steps += [("alias", chunk) for chunk in _chunks([list(alias) for alias in plan.aliases], 50)]
    steps += [("move_memories", chunk) for chunk in _chunks(list(plan.memory_moves), 20)]  # 5 items
    steps += [("archive_memories", chunk) for chunk in _chunks(plan.memory_archives, 25)]  # 4 items
    steps += [("move_records", [source, target]) for source, target in plan.record_moves.items()]
    steps += [("archive_records", [scope_id]) for scope_id in plan.record_archives]
    if plan.layers is not None:
        steps.append(("layers", []))
        steps += [("rename_layer", [old, new]) for old, new in rename_order(plan.layer_renames)]
    return steps


def _label(step: Step) -> str:
    kind, args = step
    return f"{kind} {' '.join(str(a) for a in args)}"[:200]


@dataclass(frozen=True)
class _Publish:
    tenant: str
    draft_id: str
    now: datetime
    plan: Plan

    def marked(self, item: Item | None) -> bool:
        return item is not None and text_of(item, MARK) == self.draft_id


class DynamoPublishSteps(DynamoScopes):
    """The publish steps over scopes, memories, facts and episodes; `DynamoStructure` runs them."""

    def _record_writes(
        self, p: _Publish, kind: str, record_id: str, stored: Item, new: Item, check: str | None = None, **values: Any
    ) -> list[Write]:
        """Put `new` (marked as this publish's) over `stored` if its feed entry has not moved since it was read
        (and `check` holds), with the record's feed move."""
        previous = position_of(stored)
        position = self._position(previous)
        same, feed_values = unmoved(previous)
        record = {**new, FEED_POSITION: attr(position), MARK: attr(p.draft_id)}
        condition = same if check is None else f"{check} AND {same}"
        return [
            put(record, condition, "conflict", CHANGED, **values, **feed_values),
            *self._feed_move(p.tenant, kind, record_id, previous, position),
        ]

    def _memory_writes(self, p: _Publish, item: Item, stored: Memory, new: Memory) -> list[Write]:
        """A memory rewritten by a publish, its key slot moved with it (as update_memory does)."""
        record = to_item(new, memory_key(p.tenant, new.memory_id), item_type="memory")
        writes = self._record_writes(p, "memory", new.memory_id, item, record, "#version = :v", v=stored.version)
        old, slot = mslot_key(stored), mslot_key(new)
        mine, owner = "#memory_id = :id", {"id": new.memory_id}
        if old is not None and old == slot:
            writes.append(put(to_item(new, old, item_type="memory_slot"), mine, "conflict", CHANGED, **owner))
            return writes
        if old is not None:
            writes.append(delete(old, mine, "conflict", CHANGED, **owner))
        if slot is not None:
            taken = f"a memory with key {new.key!r} already exists there"
            writes.append(
                put(to_item(new, slot, item_type="memory_slot"), "attribute_not_exists(PK)", "memory_exists", taken)
            )
        return writes

    # -- steps --------------------------------------------------------------------------------
    def _vacate(self, p: _Publish, scope_ids: list[str]) -> None:
        """Delete the live slot each moving or removed scope still holds at its old name."""
        changes = {change.scope_id: change for change in p.plan.scope_updates}
        scopes = self._items([scope_key(p.tenant, i) for i in scope_ids])
        leaving: list[tuple[str, Item]] = []
        for scope_id in scope_ids:
            item = scopes.get(key_of(scope_key(p.tenant, scope_id)))
            if item is None or p.marked(item):
                continue  # removed or already placed
            scope, change = to_model(Scope, item), changes.get(scope_id)
            if change is None or (change.parent_id, change.segment) != (scope.parent_id, scope.segment):
                leaving.append((scope_id, slot_key(p.tenant, scope.parent_id, scope.segment)))
        slots = self._items([slot for _, slot in leaving])
        writes = []
        for scope_id, slot in leaving:
            held = slots.get(key_of(slot))
            if held is not None and text_of(held, "item_type") == LIVE and text_of(held, "scope_id") == scope_id:
                writes.append(
                    delete(slot, "#item_type = :live AND #scope_id = :id", "conflict", CHANGED, live=LIVE, id=scope_id)
                )
        if writes:
            self._transact(writes)

    def _place(self, p: _Publish, scope_ids: list[str]) -> None:
        """Put each scope with its new parent, segment and depth, its live slot there (free, or its own
        alias, consumed with its back-reference) and its feed move."""
        changes = {change.scope_id: change for change in p.plan.scope_updates}
        scopes = self._items([scope_key(p.tenant, i) for i in scope_ids])
        writes: list[Write] = []
        for scope_id in scope_ids:
            item = scopes.get(key_of(scope_key(p.tenant, scope_id)))
            if item is None:
                raise Conflict(f"scope {scope_id} was removed during the publish", code="scope_gone")
            if p.marked(item):
                continue
            change = changes[scope_id]
            place = {"parent_id": change.parent_id, "segment": change.segment, "depth": change.depth}
            moved = to_model(Scope, item).model_copy(update={**place, "updated_at": p.now})
            record = to_item(moved, scope_key(p.tenant, scope_id), item_type="scope")
            slot = to_item(moved, slot_key(p.tenant, change.parent_id, change.segment), item_type=LIVE)
            taken = f"the slot {change.segment!r} was taken during the publish"
            writes += [
                *self._record_writes(p, "scope", scope_id, item, record),
                put(slot, "attribute_not_exists(PK) OR #scope_id = :id", "scope_exists", taken, id=scope_id),
                delete(alias_ref_key(p.tenant, scope_id, change.parent_id, change.segment), None, "conflict", ""),
            ]
        if writes:
            self._transact(writes)

    def _repoint(self, p: _Publish, pair: list[str]) -> None:
        """A merged scope's aliases now resolve to the scope it merged into."""
        source, target = pair
        for refs in _chunks(self._query(alias_ref_pk(p.tenant, source)), 33):
            slots = self._items([slot_key(p.tenant, text_of(r, "parent_id"), str(r["segment"]["S"])) for r in refs])
            writes: list[Write] = []
            for ref in refs:
                parent, segment = text_of(ref, "parent_id"), str(ref["segment"]["S"])
                writes.append(delete({"PK": ref["PK"], "SK": ref["SK"]}, None, "conflict", ""))
                held = slots.get(key_of(slot_key(p.tenant, parent, segment)))
                if held is not None and text_of(held, "item_type") == ALIAS and text_of(held, "scope_id") == source:
                    alias = alias_item(p.tenant, parent, segment, target)
                    writes += [
                        put(alias, OWN_ALIAS, "conflict", CHANGED, alias=ALIAS, id=source),
                        put(alias_ref_item(p.tenant, parent, segment, target), None, "conflict", ""),
                    ]
            self._transact(writes)

    def _remove(self, p: _Publish, scope_ids: list[str]) -> None:
        """Delete removed scopes: the aliases still resolving to them, then each scope with its live slot,
        feed entry, checkpoint, lease and dirty mark."""
        for scope_id in scope_ids:
            for refs in _chunks(self._query(alias_ref_pk(p.tenant, scope_id)), 50):
                self._transact(self._unalias(p.tenant, scope_id, refs))
        scopes = self._items([scope_key(p.tenant, i) for i in scope_ids])
        present = [
            (i, to_model(Scope, item), item)
            for i in scope_ids
            if (item := scopes.get(key_of(scope_key(p.tenant, i)))) is not None
        ]
        slots = self._items([slot_key(p.tenant, scope.parent_id, scope.segment) for _, scope, _ in present])
        writes: list[Write] = []
        for scope_id, scope, item in present:
            previous = position_of(item)
            same, values = unmoved(previous)
            writes.append(delete(scope_key(p.tenant, scope_id), same, "conflict", CHANGED, **values))
            writes += [delete(k, None, "conflict", "") for k in _consolidation_keys(p.tenant, scope_id)]
            if previous is not None:
                writes.append(delete(feed_key(p.tenant, previous, scope_id), None, "conflict", ""))
            writes += self._feed_move(p.tenant, "deleted:scope", scope_id, None, self._position(previous))  # tombstone
            slot = slot_key(p.tenant, scope.parent_id, scope.segment)
            held = slots.get(key_of(slot))
            if held is not None and text_of(held, "item_type") == LIVE and text_of(held, "scope_id") == scope_id:
                writes.append(delete(slot, "#scope_id = :id", "conflict", CHANGED, id=scope_id))
        if writes:
            self._transact(writes)

    def _unalias(self, tenant: str, scope_id: str, refs: list[Item]) -> list[Write]:
        slots = self._items([slot_key(tenant, text_of(r, "parent_id"), str(r["segment"]["S"])) for r in refs])
        writes = []
        for ref in refs:
            writes.append(delete({"PK": ref["PK"], "SK": ref["SK"]}, None, "conflict", ""))
            slot = slot_key(tenant, text_of(ref, "parent_id"), str(ref["segment"]["S"]))
            held = slots.get(key_of(slot))
            if held is not None and text_of(held, "item_type") == ALIAS and text_of(held, "scope_id") == scope_id:
                writes.append(delete(slot, OWN_ALIAS, "conflict", CHANGED, alias=ALIAS, id=scope_id))
        return writes

    def _alias(self, p: _Publish, aliases: list[list[str]]) -> None:
        """Old paths keep resolving: each alias whose slot is free (the first of a slot wins)."""
        wanted = {
            key_of(slot_key(p.tenant, parent, segment)): (parent, segment, target)
            for parent, segment, target in reversed(aliases)
        }
        slots = self._items([slot_key(p.tenant, parent, segment) for parent, segment, _ in wanted.values()])
        writes: list[Write] = []
        for where, (parent, segment, target) in wanted.items():
            if where not in slots:
                writes += [
                    put(alias_item(p.tenant, parent, segment, target), "attribute_not_exists(PK)", "conflict", CHANGED),
                    put(alias_ref_item(p.tenant, parent, segment, target), None, "conflict", ""),
                ]
        if writes:
            self._transact(writes)

    def _rewrite_memories(self, p: _Publish, changes: dict[str, Callable[[Memory], dict[str, Any]]]) -> None:
        items = self._items([memory_key(p.tenant, memory_id) for memory_id in changes])
        writes: list[Write] = []
        for memory_id, change in changes.items():
            item = items.get(key_of(memory_key(p.tenant, memory_id)))
            if item is None or p.marked(item):
                continue
            stored = to_model(Memory, item)
            writes += self._memory_writes(p, item, stored, stored.model_copy(update=change(stored)))
        if writes:
            self._transact(writes)

    def _move_memories(self, p: _Publish, memory_ids: list[str]) -> None:
        def moved(target: str) -> Callable[[Memory], dict[str, Any]]:
            return lambda m: {"scope_id": target, "version": m.version + 1, "updated_at": p.now}

        self._rewrite_memories(p, {m: moved(p.plan.memory_moves[m]) for m in memory_ids})

    def _archive_memories(self, p: _Publish, memory_ids: list[str]) -> None:
        def archived(m: Memory) -> dict[str, Any]:
            return {"status": "archived", "version": m.version + 1, "updated_at": p.now}

        self._rewrite_memories(p, dict.fromkeys(memory_ids, archived))

    def _move_records(self, p: _Publish, pair: list[str]) -> None:
        """Every fact and episode of `source` into `target` (passes until the source holds none), then
        `target` marked dirty unless it is."""
        source, target = pair
        tenant = p.tenant
        while copies := self._query(tenant_pk(tenant, "SCOPEFACTS", source)):
            for chunk in _chunks(copies, 20):
                ids = [str(copy["fact_id"]["S"]) for copy in chunk]
                facts = self._items([fact_key(tenant, i) for i in ids])
                writes: list[Write] = []
                for fact_id in ids:
                    writes.append(delete(scope_fact_key(tenant, source, fact_id), None, "conflict", ""))
                    item = facts.get(key_of(fact_key(tenant, fact_id)))
                    if item is None or text_of(item, "scope_id") != source:
                        continue  # a stale copy: the fact lives elsewhere
                    new = {**item, "scope_id": attr(target)}
                    writes += [
                        *self._record_writes(p, "fact", fact_id, item, new),
                        put(_fact_copy(new, tenant, target, fact_id), None, "conflict", ""),
                    ]
                self._transact(writes)
        moved_gsi = attr(tenant_pk(tenant, "SCOPEEPS", target))
        self._rewrite_episodes(p, source, lambda item: {**item, "scope_id": attr(target), "GSI3PK": moved_gsi})
        with suppress(Conflict):  # already dirty: the mark keeps its time
            self._write_one(put(dirty_mark(tenant, target, p.now), "attribute_not_exists(PK)", "conflict", ""))

    def _archive_records(self, p: _Publish, args: list[str]) -> None:
        """Every fact and episode of the scope archived (status `archived` / `archived: true`), kept. Done
        (skipped on a re-run): archived and marked by this publish."""
        (scope_id,) = args
        tenant = p.tenant
        copies = self._query(tenant_pk(tenant, "SCOPEFACTS", scope_id))
        for chunk in _chunks([str(copy["fact_id"]["S"]) for copy in copies], 25):
            facts = self._items([fact_key(tenant, i) for i in chunk])
            writes: list[Write] = []
            for fact_id in chunk:
                item = facts.get(key_of(fact_key(tenant, fact_id)))
                if item is None or text_of(item, "scope_id") != scope_id:
                    continue
                if p.marked(item) and text_of(item, "status") == "archived":
                    continue
                new = {**item, "status": attr("archived")}
                writes += [
                    *self._record_writes(p, "fact", fact_id, item, new),
                    put(_fact_copy(new, tenant, scope_id, fact_id), None, "conflict", ""),
                ]
            if writes:
                self._transact(writes)

        def archive(item: Item) -> Item | None:
            done = p.marked(item) and item.get("archived") == {"BOOL": True}
            return None if done else {**item, "archived": attr(True)}

        self._rewrite_episodes(p, scope_id, archive)

    def _rewrite_episodes(self, p: _Publish, scope_id: str, change: Callable[[Item], Item | None]) -> None:
        """Rewrite the scope's episodes (`change` gives the new item, None when there is nothing to do),
        pass after pass until one writes nothing: GSI3 may still name episodes already moved away (re-read,
        they are skipped) and lags episodes written a moment ago."""
        while True:
            written = False
            for keys in _chunks(self._scope_episode_keys(p.tenant, scope_id), 33):
                writes: list[Write] = []
                for item in self._batch_get(keys):
                    new = change(item) if text_of(item, "scope_id") == scope_id else None
                    if new is not None:
                        new = with_session_keys(p.tenant, new)  # one stored before GSI4 gets its keys
                        writes += self._record_writes(p, "episode", str(item["episode_id"]["S"]), item, new)
                if writes:
                    self._transact(writes)
                    written = True
            if not written:
                return

    def _layers(self, p: _Publish, _: list[Any]) -> None:
        self.put_layers(p.tenant, p.plan.layers or {})

    def _rename_layer(self, p: _Publish, pair: list[str]) -> None:
        """Tagged memories of layer `old` (any status) take layer `new`; their key slots move with them."""
        old, new = pair
        while todo := [
            i for i in self._query(tenant_pk(p.tenant, "MEMS"), "#layer = :old", old=old) if not p.marked(i)
        ]:
            for chunk in _chunks(todo, 20):
                writes: list[Write] = []
                for item in chunk:
                    stored = to_model(Memory, item)
                    writes += self._memory_writes(p, item, stored, stored.model_copy(update={"layer": new}))
                self._transact(writes)


def _consolidation_keys(tenant: str, scope_id: str) -> tuple[Item, ...]:
    """A scope's checkpoint, lease and dirty mark (deleted with the scope)."""
    return checkpoint_key(tenant, scope_id), lease_key(tenant, scope_id), dirty_key(tenant, scope_id)


def _fact_copy(fact: Item, tenant: str, scope_id: str, fact_id: str) -> Item:
    """The scope's copy of a fact item (as put_facts writes it: no feed position)."""
    body = {name: value for name, value in fact.items() if name not in ("PK", "SK", "item_type", FEED_POSITION, MARK)}
    return {**body, **scope_fact_key(tenant, scope_id, fact_id), "item_type": attr("fact_copy")}
