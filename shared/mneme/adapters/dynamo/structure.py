"""`DynamoRecordStore`'s aliases, right-to-erasure delete and structure drafts (a mixin; keys and access
patterns are in the module docstring of `mneme.adapters.dynamo.store`).

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
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mneme.adapters.dynamo.codec import (
    LIVE,
    Item,
    Write,
    attr,
    delete,
    draft_key,
    expression,
    journal_key,
    journal_lock_key,
    journal_plan_key,
    journal_plan_pk,
    memory_key,
    mslot_key,
    put,
    scope_key,
    slot_key,
    tenant_pk,
    to_model,
)
from mneme.adapters.dynamo.publish import DynamoPublishSteps, Step, _label, _Publish, journal_steps, rename_order
from mneme.adapters.dynamo.table import key_of, text_of
from mneme.errors import Conflict, StoreUnavailable
from mneme.models import Memory, Scope
from mneme.structure_models import Draft, Plan

PLAN_PART = 300_000  # bytes of plan JSON per journal item (an item holds at most 400 KB)


class DynamoStructure(DynamoPublishSteps):
    """Structure drafts and the publish journal that applies them."""

    fail_after_step: int | None = None  # tests: raise after step N's writes, before the journal records them

    # -- drafts -------------------------------------------------------------------------------
    @staticmethod
    def _draft_item(draft: Draft) -> Item:
        fields = {"item_type": "draft", "status": draft.status, "doc": draft.model_dump_json()}
        return {**draft_key(draft.tenant, draft.draft_id), **{n: attr(v) for n, v in fields.items()}}

    def put_draft(self, draft: Draft) -> None:
        self._call("put_item", TableName=self.table_name, Item=self._draft_item(draft))

    def close_draft(self, draft: Draft) -> None:
        message = f"draft {draft.draft_id} is no longer open"
        self._write_one(put(self._draft_item(draft), "#status = :open", "draft_closed", message, open="open"))

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
        return {
            "draft_id": draft_id,
            "status": text_of(head, "status"),
            "cursor": int(head["cursor"]["N"]),
            "steps": int(head["steps"]["N"]),
            "next_step": text_of(head, "next_step"),
            "now": datetime.fromisoformat(str(text_of(head, "now"))),
        }

    def _start(self, p: _Publish, draft: Draft, steps: list[Step]) -> None:
        data = p.plan.model_dump_json().encode()
        digest = hashlib.sha256(data).hexdigest()[:16]  # two racing publishers of one draft cannot mix parts
        parts = [data[start : start + PLAN_PART] for start in range(0, len(data), PLAN_PART)]
        for number, part in enumerate(parts):
            item = {
                **journal_plan_key(p.tenant, p.draft_id, digest, number),
                "item_type": attr("journal_plan"),
                "plan": {"B": part},
            }
            self._call("put_item", TableName=self.table_name, Item=item)
        fields = {
            "item_type": "journal",
            "draft_id": p.draft_id,
            "status": "applying",
            "cursor": 0,
            "steps": len(steps),
            "next_step": _label(steps[0]) if steps else "",
            "now": p.now,
            "draft": draft.model_dump_json(),
            "plan": digest,
            "plan_parts": len(parts),
        }
        head = {**journal_key(p.tenant, p.draft_id), **{n: attr(v) for n, v in fields.items()}}
        lock = {**journal_lock_key(p.tenant), "item_type": attr("journal_lock"), "draft_id": attr(p.draft_id)}
        busy = "another structure publish of this tenant is in progress; retry when it is done"
        free = "attribute_not_exists(PK)"
        self._transact([put(head, free, "publish_in_progress", busy), put(lock, free, "publish_in_progress", busy)])

    def _resume(self, tenant: str, head: Item) -> None:
        if text_of(head, "status") == "done":
            return
        draft = Draft.model_validate_json(str(text_of(head, "draft")))
        prefix = f"PLAN#{text_of(head, 'plan')}#"
        parts = sorted(self._query(journal_plan_pk(tenant, draft.draft_id), prefix=prefix), key=lambda i: i["SK"]["S"])
        if len(parts) != int(head["plan_parts"]["N"]):
            raise StoreUnavailable(f"the journal of draft {draft.draft_id} lost part of its plan")
        plan = Plan.model_validate_json(b"".join(bytes(part["plan"]["B"]) for part in parts))
        now = datetime.fromisoformat(str(text_of(head, "now")))
        steps = journal_steps(plan)
        self._run(_Publish(tenant, draft.draft_id, now, plan), draft, steps, int(head["cursor"]["N"]))

    def _run(self, p: _Publish, draft: Draft, steps: list[Step], cursor: int) -> None:
        runners: dict[str, Callable[[_Publish, list[Any]], None]] = {
            "vacate": self._vacate,
            "place": self._place,
            "repoint": self._repoint,
            "remove": self._remove,
            "alias": self._alias,
            "move_memories": self._move_memories,
            "archive_memories": self._archive_memories,
            "move_records": self._move_records,
            "archive_records": self._archive_records,
            "layers": self._layers,
            "rename_layer": self._rename_layer,
        }
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
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=journal_key(p.tenant, p.draft_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                **expression(values, update, condition),
            )
        except Conflict:  # a concurrent resume recorded this step (or more) already
            return

    def _finish(self, p: _Publish, draft: Draft, steps: int) -> None:
        """Transact: the published draft, the head `done`, the lock released."""
        values = {"done": "done", "n": steps, "none": "", "applying": "applying"}
        update, condition = "SET #status = :done, #cursor = :n, #next_step = :none", "#status = :applying"
        done = Write(
            {
                "Update": {
                    "Key": journal_key(p.tenant, p.draft_id),
                    "UpdateExpression": update,
                    "ConditionExpression": condition,
                    **expression(values, update, condition),
                }
            },
            "publish_done",
            "the publish was completed concurrently",
        )
        release = delete(journal_lock_key(p.tenant), "#draft_id = :id", "publish_done", "", id=p.draft_id)
        try:
            self._transact([put(self._draft_item(draft), None, "conflict", ""), done, release])
        except Conflict as e:
            head = self._get(journal_key(p.tenant, p.draft_id))
            if e.code != "publish_done" or head is None or text_of(head, "status") != "done":
                raise

    # -- checking the plan before anything is written -----------------------------------------
    def _check(self, p: _Publish) -> None:
        tenant, plan = p.tenant, p.plan
        changes = {change.scope_id: change for change in plan.scope_updates}
        ids = list(dict.fromkeys([*changes, *plan.scope_removals]))
        found = self._items([scope_key(tenant, i) for i in ids])
        items = {i: found.get(key_of(scope_key(tenant, i))) for i in ids}
        scopes = {i: to_model(Scope, item) for i, item in items.items() if item is not None}
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
            held = slots.get(key_of(slot_key(tenant, change.parent_id, change.segment)))
            if held is None or text_of(held, "scope_id") == change.scope_id:
                continue
            if text_of(held, "item_type") == LIVE and (change.parent_id, change.segment) in vacated:
                continue
            raise Conflict(f"the slot {change.segment!r} is taken: preview again", code="stale_preview")
        targets: list[tuple[Memory, Item, int]] = []  # memory, the key slot it needs, when it is taken
        memories = self._items([memory_key(tenant, m) for m in plan.memory_moves])
        for memory_id, scope_id in plan.memory_moves.items():
            item = memories.get(key_of(memory_key(tenant, memory_id)))
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
            held = held_slots.get(key_of(slot))
            holder = renamed.get(str(text_of(held, "memory_id"))) if held else None
            if held is None or text_of(held, "memory_id") == memory.memory_id:
                continue
            if holder is not None and rank >= 0 and order[str(holder.layer)] < rank:
                continue  # renamed away first
            raise Conflict(f"key collision on {memory.key!r}: preview again", code="stale_preview")
