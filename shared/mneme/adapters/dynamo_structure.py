"""`DynamoRecordStore`'s aliases, right-to-erasure delete and structure drafts (a mixin; keys and access
patterns are in the module docstring of `mneme.adapters.dynamo_store`).

Publishing a draft (`apply_structure`) touches more items than one transaction holds, so it goes through
a journal that makes it resumable rather than atomic:

1. Nothing is written until the plan is checked against the table (scopes exist, target name slots and
   memory key slots are free or vacated by the plan itself): a stale plan is a Conflict (`stale_preview`)
   with nothing written.
2. The plan is stored (`T#<t>#JOURNAL#<draft_id>`, in parts), then one transaction Puts the journal head
   (`T#<t>#JOURNAL` / `DRAFT#<draft_id>`: status `applying`, cursor 0, the publish's `now`, the published
   draft) and the tenant's publish lock (`T#<t>#JOURNAL` / `ACTIVE`), both if absent: one publish of a
   tenant at a time.
3. The plan runs as a list of steps, a pure function of the plan (`journal_steps`), so a cursor means
   the same steps on every resume. After each step the head's cursor advances (conditionally, never
   backwards). Every step reads what it changes and writes final state, so re-running a step that
   already (partly) committed is a no-op: records it wrote carry `structure_draft = <draft_id>` and are
   skipped; slots are deleted or put only if they are still / not yet what the step expects; a scope
   already removed is skipped. Each write of a step is one TransactWriteItems of at most 100 items that
   keeps the usual invariants (a record and its feed move, a memory and its key slot, a fact and its
   scope copy, an alias and its back-reference move together).
4. The last transaction Puts the published draft, marks the head `done` and deletes the lock. Until
   then `get_draft` reports the draft `open`: a reader never sees a half-applied plan as published.

A crash (or the `fail_after_step` hook) leaves the head `applying` with the cursor at the last recorded
step. `apply_structure` for the same draft, or `resume_journals(tenant)`, reloads the journal's plan,
draft and `now` and runs the remaining steps, so the result equals an uninterrupted publish (feed
positions aside). A publish of another draft of the tenant first completes the interrupted one, then
refuses with `stale_preview` (its plan was compiled against a half-applied tree). Meanwhile readers
see the tree part-way (paths may not resolve); the guarantee is completion, not isolation. A concurrent
change that contradicts the plan after step 1 (e.g. a scope created on a target name) fails the step
with a Conflict and leaves the journal `applying`: resume once the offending record is cleared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mneme.adapters.dynamo_codec import (
    ALIAS,
    LIVE,
    Item,
    Write,
    alias_item,
    alias_ref_item,
    alias_ref_key,
    alias_ref_pk,
    attr,
    author_revision_key,
    checkpoint_key,
    delete,
    dirty_key,
    dirty_mark,
    draft_key,
    expression,
    fact_key,
    feed_key,
    history_pk,
    journal_key,
    journal_lock_key,
    journal_plan_key,
    journal_plan_pk,
    lease_key,
    memory_key,
    mslot_key,
    put,
    revision_key,
    revision_queue_key,
    scope_fact_key,
    scope_key,
    slot_key,
    slots_pk,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo_extras import FEED_POSITION, REVISION_STATUSES, DynamoExtras, position_of, unmoved
from mneme.errors import Conflict, StoreUnavailable
from mneme.models import Memory, Scope
from mneme.structure_models import Draft, Plan

MARK = "structure_draft"  # on each record a publish wrote: the draft whose journal wrote it
PLAN_PART = 300_000  # bytes of plan JSON per journal item (an item holds at most 400 KB)
SCOPE_EPISODES = "GSI3"  # a scope's episodes (see dynamo_store)
STALE = "the tree changed under the draft: preview again"
CHANGED = "a record changed during the publish; resume it (apply again or resume_journals)"
OWN_ALIAS = "#item_type = :alias AND #scope_id = :id"  # a slot still holds this scope's alias
Step = tuple[str, list[Any]]


def _chunks(values: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(values[start : start + size]) for start in range(0, len(values), size)]


def _k(item: Item) -> tuple[str, str]:
    return item["PK"]["S"], item["SK"]["S"]


def _distinct(keys: Sequence[Item]) -> list[Item]:
    return list({_k(k): {"PK": k["PK"], "SK": k["SK"]} for k in keys}.values())


def _text(item: Item, name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if value and "S" in value else None


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
        return item is not None and _text(item, MARK) == self.draft_id


class DynamoStructure(DynamoExtras):
    """Aliases, erasure, drafts and the publish journal over the table's plumbing in `DynamoRecordStore`."""

    fail_after_step: int | None = None  # tests: raise after step N's writes, before the journal records them

    if TYPE_CHECKING:

        def _batch_get(self, keys: Sequence[Item], projection: str | None = None) -> list[Item]: ...

        def _batch_write(self, requests: Sequence[dict[str, Any]]) -> None: ...

        def put_layers(self, tenant: str, layers: dict[int, str]) -> None: ...

    # -- plumbing -----------------------------------------------------------------------------
    def _items(self, keys: Sequence[Item], projection: str | None = None) -> dict[tuple[str, str], Item]:
        """Strongly consistent reads of the items that exist, by (PK, SK)."""
        return {_k(item): item for item in self._batch_get(_distinct(keys), projection)} if keys else {}

    def _delete_all(self, keys: Sequence[Item]) -> None:
        self._batch_write([{"DeleteRequest": {"Key": k}} for k in _distinct(keys)])

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
            writes.append(put(to_item(new, slot, item_type="memory_slot"), "attribute_not_exists(PK)", "memory_exists",
                              taken))  # fmt: skip
        return writes

    def _scope_episode_keys(self, tenant: str, scope_id: str) -> list[Item]:
        """Keys of a scope's episodes from GSI3 (which lags writes by milliseconds; re-read what it names)."""
        query = {"IndexName": SCOPE_EPISODES, "KeyConditionExpression": "GSI3PK = :pk",
                 **expression({"pk": tenant_pk(tenant, "SCOPEEPS", scope_id)})}  # fmt: skip
        return _distinct([hit for page in self._pages(query) for hit in page])

    # -- aliases ------------------------------------------------------------------------------
    def list_aliases(self, tenant: str, parent_id: str) -> list[tuple[str, str]]:
        items = self._query(slots_pk(tenant, parent_id), "#item_type = :alias", alias=ALIAS)
        return sorted((str(i["segment"]["S"]), str(i["scope_id"]["S"])) for i in items)

    def put_alias(self, tenant: str, parent_id: str, segment: str, scope_id: str) -> bool:
        """Transact: Put the alias if its slot is free, and its back-reference."""
        alias = alias_item(tenant, parent_id, segment, scope_id)
        taken = f"{segment!r} is already taken under this parent"
        try:
            self._transact(
                [
                    put(alias, "attribute_not_exists(PK)", "scope_exists", taken),
                    put(alias_ref_item(tenant, parent_id, segment, scope_id), None, "conflict", ""),
                ]
            )
        except Conflict as e:
            if e.code != "scope_exists":
                raise
            return False
        return True

    # -- erasure ------------------------------------------------------------------------------
    def erase_scopes(self, tenant: str, scope_ids: Sequence[str], *, dry_run: bool) -> tuple[dict[str, int], list[str]]:
        """Count, or delete for good, the scopes and what is attached to them. Several batched writes, not
        atomic: scopes go deepest first (reverse of the given pre-order), each one's records before its
        scope item, feed entry and live slot (one transaction, last), so a crash leaves every remaining
        item reachable from the subtree's path and erasing again finishes the job. Delivered-id marks are
        not erased: they sit in per-session partitions no key leads to from a record (a Scan would), and
        hold only the opaque id of a record that no longer exists."""
        ids = list(dict.fromkeys(scope_ids))
        erased = set(ids)
        memories: dict[str, list[Item]] = {scope_id: [] for scope_id in ids}
        for item in self._query(tenant_pk(tenant, "MEMS")):
            if _text(item, "scope_id") in erased:
                memories[str(_text(item, "scope_id"))].append(item)
        projection = f"PK, SK, scope_id, episode_id, fact_id, {FEED_POSITION}"
        episodes: dict[str, list[Item]] = {}
        facts: dict[str, list[Item]] = {}
        copies: dict[str, list[Item]] = {}
        for scope_id in ids:
            found = self._batch_get(self._scope_episode_keys(tenant, scope_id), projection)
            episodes[scope_id] = [item for item in found if _text(item, "scope_id") == scope_id]
            copies[scope_id] = self._query(tenant_pk(tenant, "SCOPEFACTS", scope_id))
            fact_keys = [fact_key(tenant, str(copy["fact_id"]["S"])) for copy in copies[scope_id]]
            facts[scope_id] = [item for item in self._items(fact_keys, projection).values()
                               if _text(item, "scope_id") == scope_id]  # fmt: skip
        counts = {"scopes": len(ids), "memories": sum(map(len, memories.values())),
                  "episodes": sum(map(len, episodes.values())), "facts": sum(map(len, facts.values()))}  # fmt: skip
        if dry_run:
            return counts, []
        gone = list(ids)
        for scope_id in ids:
            gone += [str(i["memory_id"]["S"]) for i in memories[scope_id]]
        for scope_id in ids:
            gone += [str(i["episode_id"]["S"]) for i in episodes[scope_id]]
        for scope_id in ids:
            gone += [str(i["fact_id"]["S"]) for i in facts[scope_id]]
        for scope_id in reversed(ids):
            records = [(str(i[name]["S"]), i) for name, group in (("memory_id", memories), ("episode_id", episodes),
                       ("fact_id", facts)) for i in group[scope_id]]  # fmt: skip
            keys = [*(item for _, item in records), *copies[scope_id]]
            keys += [feed_key(tenant, pos, i) for i, item in records if (pos := position_of(item)) is not None]
            for item in memories[scope_id]:
                keys += self._memory_attachments(tenant, to_model(Memory, item))
            keys += self._query(tenant_pk(tenant, "CONTRA", scope_id))
            keys += [checkpoint_key(tenant, scope_id), lease_key(tenant, scope_id), dirty_key(tenant, scope_id)]
            keys += self._alias_keys(tenant, scope_id)
            self._delete_all(keys)
            self._erase_scope_item(tenant, scope_id)
        return counts, gone

    def _memory_attachments(self, tenant: str, memory: Memory) -> list[Item]:
        """A memory's key slot, revisions (with their author and queue copies) and history."""
        keys = [slot] if (slot := mslot_key(memory)) is not None else []
        prefix = revision_key(tenant, memory.memory_id, "")["SK"]["S"]
        for revision in self._query(tenant_pk(tenant, "REVS"), prefix=prefix):
            author = str(revision["author"]["S"])
            keys.append(revision_key(tenant, memory.memory_id, author))
            for status in REVISION_STATUSES:
                keys += [author_revision_key(tenant, author, status, memory.memory_id),
                         revision_queue_key(tenant, status, memory.memory_id, author)]  # fmt: skip
        return keys + self._query(history_pk(tenant, memory.memory_id))

    def _alias_keys(self, tenant: str, scope_id: str) -> list[Item]:
        """Aliases resolving to the scope (with their back-references), and every slot under it."""
        keys: list[Item] = []
        for ref in self._query(alias_ref_pk(tenant, scope_id)):
            slot = slot_key(tenant, _text(ref, "parent_id"), str(ref["segment"]["S"]))
            held = self._get(slot)
            keys.append(ref)
            if held is not None and _text(held, "item_type") == ALIAS and _text(held, "scope_id") == scope_id:
                keys.append(slot)
        for slot in self._query(slots_pk(tenant, scope_id)):
            keys.append(slot)
            if _text(slot, "item_type") == ALIAS:
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
        slot = self._get(slot_key(tenant, scope.parent_id, scope.segment))
        if slot is not None and _text(slot, "item_type") == LIVE and _text(slot, "scope_id") == scope_id:
            writes.append(delete(slot_key(tenant, scope.parent_id, scope.segment), "#scope_id = :id", "conflict",
                                 CHANGED, id=scope_id))  # fmt: skip
        self._transact(writes)

    # -- drafts -------------------------------------------------------------------------------
    @staticmethod
    def _draft_item(draft: Draft) -> Item:
        fields = {"item_type": "draft", "status": draft.status, "doc": draft.model_dump_json()}
        return {**draft_key(draft.tenant, draft.draft_id), **{n: attr(v) for n, v in fields.items()}}

    def put_draft(self, draft: Draft) -> None:
        self._call("put_item", TableName=self.table_name, Item=self._draft_item(draft))

    def get_draft(self, tenant: str, draft_id: str) -> Draft | None:
        item = self._get(draft_key(tenant, draft_id))
        return Draft.model_validate_json(item["doc"]["S"]) if item else None

    # -- publishing through the journal ---------------------------------------------------------
    def apply_structure(self, tenant: str, plan: Plan, draft: Draft, now: datetime) -> None:
        """Publish through the journal (module docstring). A draft whose journal exists is resumed with
        the journal's plan, draft and `now` (the arguments are ignored), or left alone once done."""
        head = self._get(journal_key(tenant, draft.draft_id))
        if head is not None:
            self._resume(tenant, head)
            return
        lock = self._get(journal_lock_key(tenant))
        if lock is not None:
            other = str(lock["draft_id"]["S"])
            self.resume_journals(tenant)
            message = f"the interrupted publish of draft {other} was completed first: preview again"
            raise Conflict(message, code="stale_preview", details={"draft_id": other})
        publish = _Publish(tenant, draft.draft_id, now, plan)
        self._check(publish)
        steps = journal_steps(plan)
        self._start(publish, draft, steps)
        self._run(publish, draft, steps, 0)

    def resume_journals(self, tenant: str) -> list[str]:
        """Complete the tenant's interrupted publish, if any; returns the draft ids completed."""
        lock = self._get(journal_lock_key(tenant))
        if lock is None:
            return []
        draft_id = str(lock["draft_id"]["S"])
        head = self._get(journal_key(tenant, draft_id))
        if head is not None:
            self._resume(tenant, head)
        return [draft_id]

    def get_journal(self, tenant: str, draft_id: str) -> dict[str, Any] | None:
        """Where a publish stands: status (applying | done), cursor (steps recorded), steps, next_step."""
        head = self._get(journal_key(tenant, draft_id))
        if head is None:
            return None
        return {"draft_id": draft_id, "status": _text(head, "status"), "cursor": int(head["cursor"]["N"]),
                "steps": int(head["steps"]["N"]), "next_step": _text(head, "next_step"),
                "now": datetime.fromisoformat(str(_text(head, "now")))}  # fmt: skip

    def _start(self, p: _Publish, draft: Draft, steps: list[Step]) -> None:
        data = p.plan.model_dump_json().encode()
        digest = hashlib.sha256(data).hexdigest()[:16]  # two racing publishers of one draft cannot mix parts
        parts = [data[start : start + PLAN_PART] for start in range(0, len(data), PLAN_PART)]
        for number, part in enumerate(parts):
            item = {**journal_plan_key(p.tenant, p.draft_id, digest, number), "item_type": attr("journal_plan"),
                    "plan": {"B": part}}  # fmt: skip
            self._call("put_item", TableName=self.table_name, Item=item)
        fields = {"item_type": "journal", "draft_id": p.draft_id, "status": "applying", "cursor": 0,
                  "steps": len(steps), "next_step": _label(steps[0]) if steps else "", "now": p.now,
                  "draft": draft.model_dump_json(), "plan": digest, "plan_parts": len(parts)}  # fmt: skip
        head = {**journal_key(p.tenant, p.draft_id), **{n: attr(v) for n, v in fields.items()}}
        lock = {**journal_lock_key(p.tenant), "item_type": attr("journal_lock"), "draft_id": attr(p.draft_id)}
        busy = "another structure publish of this tenant is in progress; retry when it is done"
        free = "attribute_not_exists(PK)"
        self._transact([put(head, free, "publish_in_progress", busy), put(lock, free, "publish_in_progress", busy)])

    def _resume(self, tenant: str, head: Item) -> None:
        if _text(head, "status") == "done":
            return
        draft = Draft.model_validate_json(str(_text(head, "draft")))
        prefix = f"PLAN#{_text(head, 'plan')}#"
        parts = sorted(self._query(journal_plan_pk(tenant, draft.draft_id), prefix=prefix), key=lambda i: i["SK"]["S"])
        if len(parts) != int(head["plan_parts"]["N"]):
            raise StoreUnavailable(f"the journal of draft {draft.draft_id} lost part of its plan")
        plan = Plan.model_validate_json(b"".join(bytes(part["plan"]["B"]) for part in parts))
        now = datetime.fromisoformat(str(_text(head, "now")))
        steps = journal_steps(plan)
        self._run(_Publish(tenant, draft.draft_id, now, plan), draft, steps, int(head["cursor"]["N"]))

    def _run(self, p: _Publish, draft: Draft, steps: list[Step], cursor: int) -> None:
        runners: dict[str, Callable[[_Publish, list[Any]], None]] = {
            "vacate": self._vacate, "place": self._place, "repoint": self._repoint, "remove": self._remove,
            "alias": self._alias, "move_memories": self._move_memories, "archive_memories": self._archive_memories,
            "move_records": self._move_records, "archive_records": self._archive_records,
            "layers": self._layers, "rename_layer": self._rename_layer,
        }  # fmt: skip
        for number in range(cursor + 1, len(steps) + 1):
            kind, args = steps[number - 1]
            runners[kind](p, args)
            if self.fail_after_step == number:
                raise RuntimeError(f"injected failure after step {number}")
            self._advance(p, number, _label(steps[number]) if number < len(steps) else "")
        self._finish(p, draft, len(steps))

    def _advance(self, p: _Publish, number: int, next_step: str) -> None:
        values = {"n": number, "next": next_step, "applying": "applying"}
        update, condition = "SET #cursor = :n, #next_step = :next", "#status = :applying AND #cursor < :n"
        try:
            self._call("update_item", TableName=self.table_name, Key=journal_key(p.tenant, p.draft_id),
                       UpdateExpression=update, ConditionExpression=condition,
                       **expression(values, update, condition))  # fmt: skip
        except Conflict:  # a concurrent resume recorded this step (or more) already
            return

    def _finish(self, p: _Publish, draft: Draft, steps: int) -> None:
        """Transact: the published draft, the head `done`, the lock released."""
        values = {"done": "done", "n": steps, "none": "", "applying": "applying"}
        update, condition = "SET #status = :done, #cursor = :n, #next_step = :none", "#status = :applying"
        done = Write({"Update": {"Key": journal_key(p.tenant, p.draft_id), "UpdateExpression": update,
                                 "ConditionExpression": condition, **expression(values, update, condition)}},
                     "publish_done", "the publish was completed concurrently")  # fmt: skip
        release = delete(journal_lock_key(p.tenant), "#draft_id = :id", "publish_done", "", id=p.draft_id)
        try:
            self._transact([put(self._draft_item(draft), None, "conflict", ""), done, release])
        except Conflict as e:
            head = self._get(journal_key(p.tenant, p.draft_id))
            if e.code != "publish_done" or head is None or _text(head, "status") != "done":
                raise

    # -- checking the plan before anything is written -----------------------------------------
    def _check(self, p: _Publish) -> None:
        tenant, plan = p.tenant, p.plan
        changes = {change.scope_id: change for change in plan.scope_updates}
        ids = list(dict.fromkeys([*changes, *plan.scope_removals]))
        found = self._items([scope_key(tenant, i) for i in ids])
        scopes = {i: to_model(Scope, item) for i in ids if (item := found.get(_k(scope_key(tenant, i)))) is not None}
        for scope_id in changes:
            if scope_id not in scopes:
                raise Conflict(f"scope {scope_id} no longer exists: preview again", code="stale_preview")
        vacated = {
            (s.parent_id, s.segment)
            for i, s in scopes.items()
            if i not in changes or (s.parent_id, s.segment) != (changes[i].parent_id, changes[i].segment)
        }
        slots = self._items([slot_key(tenant, c.parent_id, c.segment) for c in plan.scope_updates])
        for change in plan.scope_updates:
            held = slots.get(_k(slot_key(tenant, change.parent_id, change.segment)))
            if held is None or _text(held, "scope_id") == change.scope_id:
                continue
            if _text(held, "item_type") == LIVE and (change.parent_id, change.segment) in vacated:
                continue
            raise Conflict(f"the slot {change.segment!r} is taken: preview again", code="stale_preview")
        targets: list[tuple[Memory, Item, int]] = []  # memory, the key slot it needs, when it is taken
        memories = self._items([memory_key(tenant, m) for m in plan.memory_moves])
        for memory_id, scope_id in plan.memory_moves.items():
            item = memories.get(_k(memory_key(tenant, memory_id)))
            memory = to_model(Memory, item) if item else None
            if memory is not None and (slot := mslot_key(memory.model_copy(update={"scope_id": scope_id}))):
                targets.append((memory, slot, -1))
        order = {old: rank for rank, (old, _) in enumerate(rename_order(plan.layer_renames))}
        renamed: dict[str, Memory] = {}
        if plan.layers is not None and order:
            for item in self._query(tenant_pk(tenant, "MEMS"), "#status <> :archived", archived="archived"):
                memory = to_model(Memory, item)
                if memory.kind == "tagged" and memory.layer in order:
                    renamed[memory.memory_id] = memory
                    new = memory.model_copy(update={"layer": plan.layer_renames[str(memory.layer)]})
                    if (slot := mslot_key(new)) is not None:
                        targets.append((memory, slot, order[str(memory.layer)]))
        held_slots = self._items([slot for _, slot, _ in targets])
        for memory, slot, rank in targets:
            held = held_slots.get(_k(slot))
            holder = renamed.get(str(_text(held, "memory_id"))) if held else None
            if held is None or _text(held, "memory_id") == memory.memory_id:
                continue
            if holder is not None and rank >= 0 and order[str(holder.layer)] < rank:
                continue  # renamed away first
            raise Conflict(f"key collision on {memory.key!r}: preview again", code="stale_preview")

    # -- steps --------------------------------------------------------------------------------
    def _vacate(self, p: _Publish, scope_ids: list[str]) -> None:
        """Delete the live slot each moving or removed scope still holds at its old name."""
        changes = {change.scope_id: change for change in p.plan.scope_updates}
        scopes = self._items([scope_key(p.tenant, i) for i in scope_ids])
        leaving: list[tuple[str, Item]] = []
        for scope_id in scope_ids:
            item = scopes.get(_k(scope_key(p.tenant, scope_id)))
            if item is None or p.marked(item):
                continue  # removed or already placed
            scope, change = to_model(Scope, item), changes.get(scope_id)
            if change is None or (change.parent_id, change.segment) != (scope.parent_id, scope.segment):
                leaving.append((scope_id, slot_key(p.tenant, scope.parent_id, scope.segment)))
        slots = self._items([slot for _, slot in leaving])
        writes = []
        for scope_id, slot in leaving:
            held = slots.get(_k(slot))
            if held is not None and _text(held, "item_type") == LIVE and _text(held, "scope_id") == scope_id:
                writes.append(delete(slot, "#item_type = :live AND #scope_id = :id", "conflict", CHANGED,
                                     live=LIVE, id=scope_id))  # fmt: skip
        if writes:
            self._transact(writes)

    def _place(self, p: _Publish, scope_ids: list[str]) -> None:
        """Put each scope with its new parent, segment and depth, its live slot there (free, or its own
        alias, consumed with its back-reference) and its feed move."""
        changes = {change.scope_id: change for change in p.plan.scope_updates}
        scopes = self._items([scope_key(p.tenant, i) for i in scope_ids])
        writes: list[Write] = []
        for scope_id in scope_ids:
            item = scopes.get(_k(scope_key(p.tenant, scope_id)))
            if item is None:
                raise Conflict(f"scope {scope_id} was removed during the publish", code="scope_gone")
            if p.marked(item):
                continue
            change = changes[scope_id]
            moved = to_model(Scope, item).model_copy(update={"parent_id": change.parent_id, "segment": change.segment,
                                                            "depth": change.depth, "updated_at": p.now})  # fmt: skip
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
            slots = self._items([slot_key(p.tenant, _text(r, "parent_id"), str(r["segment"]["S"])) for r in refs])
            writes: list[Write] = []
            for ref in refs:
                parent, segment = _text(ref, "parent_id"), str(ref["segment"]["S"])
                writes.append(delete({"PK": ref["PK"], "SK": ref["SK"]}, None, "conflict", ""))
                held = slots.get(_k(slot_key(p.tenant, parent, segment)))
                if held is not None and _text(held, "item_type") == ALIAS and _text(held, "scope_id") == source:
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
        present = [(i, to_model(Scope, item), item) for i in scope_ids
                   if (item := scopes.get(_k(scope_key(p.tenant, i)))) is not None]  # fmt: skip
        slots = self._items([slot_key(p.tenant, scope.parent_id, scope.segment) for _, scope, _ in present])
        writes: list[Write] = []
        for scope_id, scope, item in present:
            previous = position_of(item)
            same, values = unmoved(previous)
            writes += [delete(scope_key(p.tenant, scope_id), same, "conflict", CHANGED, **values),
                       *(delete(k, None, "conflict", "") for k in (checkpoint_key(p.tenant, scope_id),
                         lease_key(p.tenant, scope_id), dirty_key(p.tenant, scope_id)))]  # fmt: skip
            if previous is not None:
                writes.append(delete(feed_key(p.tenant, previous, scope_id), None, "conflict", ""))
            slot = slot_key(p.tenant, scope.parent_id, scope.segment)
            held = slots.get(_k(slot))
            if held is not None and _text(held, "item_type") == LIVE and _text(held, "scope_id") == scope_id:
                writes.append(delete(slot, "#scope_id = :id", "conflict", CHANGED, id=scope_id))
        if writes:
            self._transact(writes)

    def _unalias(self, tenant: str, scope_id: str, refs: list[Item]) -> list[Write]:
        slots = self._items([slot_key(tenant, _text(r, "parent_id"), str(r["segment"]["S"])) for r in refs])
        writes = []
        for ref in refs:
            writes.append(delete({"PK": ref["PK"], "SK": ref["SK"]}, None, "conflict", ""))
            slot = slot_key(tenant, _text(ref, "parent_id"), str(ref["segment"]["S"]))
            held = slots.get(_k(slot))
            if held is not None and _text(held, "item_type") == ALIAS and _text(held, "scope_id") == scope_id:
                writes.append(delete(slot, OWN_ALIAS, "conflict", CHANGED, alias=ALIAS, id=scope_id))
        return writes

    def _alias(self, p: _Publish, aliases: list[list[str]]) -> None:
        """Old paths keep resolving: each alias whose slot is free (the first of a slot wins)."""
        wanted = {_k(slot_key(p.tenant, parent, segment)): (parent, segment, target)
                  for parent, segment, target in reversed(aliases)}  # fmt: skip
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
            item = items.get(_k(memory_key(p.tenant, memory_id)))
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
                    item = facts.get(_k(fact_key(tenant, fact_id)))
                    if item is None or _text(item, "scope_id") != source:
                        continue  # a stale copy: the fact lives elsewhere
                    new = {**item, "scope_id": attr(target)}
                    writes += [*self._record_writes(p, "fact", fact_id, item, new),
                               put(_fact_copy(new, tenant, target, fact_id), None, "conflict", "")]  # fmt: skip
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
                item = facts.get(_k(fact_key(tenant, fact_id)))
                if item is None or _text(item, "scope_id") != scope_id:
                    continue
                if p.marked(item) and _text(item, "status") == "archived":
                    continue
                new = {**item, "status": attr("archived")}
                writes += [*self._record_writes(p, "fact", fact_id, item, new),
                           put(_fact_copy(new, tenant, scope_id, fact_id), None, "conflict", "")]  # fmt: skip
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
                    new = change(item) if _text(item, "scope_id") == scope_id else None
                    if new is not None:
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
        while todo := [i for i in self._query(tenant_pk(p.tenant, "MEMS"), "#layer = :old", old=old)
                       if not p.marked(i)]:  # fmt: skip
            for chunk in _chunks(todo, 20):
                writes: list[Write] = []
                for item in chunk:
                    stored = to_model(Memory, item)
                    writes += self._memory_writes(p, item, stored, stored.model_copy(update={"layer": new}))
                self._transact(writes)


def _fact_copy(fact: Item, tenant: str, scope_id: str, fact_id: str) -> Item:
    """The scope's copy of a fact item (as put_facts writes it: no feed position)."""
    body = {name: value for name, value in fact.items() if name not in ("PK", "SK", "item_type", FEED_POSITION, MARK)}
    return {**body, **scope_fact_key(tenant, scope_id, fact_id), "item_type": attr("fact_copy")}
