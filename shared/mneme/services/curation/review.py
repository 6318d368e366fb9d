"""The review workflow: writers' pending work, approvers' decisions, the queue and the history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mneme.errors import Conflict, Forbidden, InvalidInput, MemoryNotFound, NotFound
from mneme.models import HistoryEntry, Memory, Principal, Revision, Role
from mneme.ports import Clock, MemoryStore
from mneme.services.curation.memories import EDITABLE, MemoryService, check_changes, check_version, tag_label
from mneme.services.scopes import ScopeService


@dataclass
class ReviewService:
    store: MemoryStore
    clock: Clock
    memories: MemoryService
    scopes: ScopeService

    def edit(self, caller: Principal, memory_id: str, *, version: int | None = None, **changes: Any) -> dict[str, Any]:
        """Approvers and the author of pending work edit directly; a writer's edit of a published
        memory becomes (or updates) that writer's pending revision."""
        memory = self.memories.get(caller, memory_id)
        if caller.has(Role.approver) or memory.status != "published":
            return {"memory": self.memories.edit(caller, memory_id, version=version, **changes), "revision": None}
        check_changes(changes)
        check_version(memory, version)  # a stale edit is refused for every role, never rebased
        existing = self.store.get_revision(caller.tenant, memory_id, caller.principal)
        if not changes:  # nothing to propose: no new revision, no new version
            return {"memory": memory, "revision": existing if existing and existing.status == "open" else None}
        now = self.clock.now()
        if existing is not None and existing.status == "open":
            revision = existing.model_copy(
                update={"changes": {**existing.changes, **_plain(changes)}, "updated_at": now}
            )
        else:
            revision = Revision(
                tenant=caller.tenant,
                memory_id=memory_id,
                author=caller.principal,
                base_version=memory.version,
                changes=_plain(changes),
                created_at=now,
                updated_at=now,
            )
        self.store.put_revision(revision)
        return {"memory": memory, "revision": revision}

    def approve(
        self, caller: Principal, memory_id: str, author: str | None = None, reason: str | None = None
    ) -> Memory:
        memory = self._memory(caller, memory_id)
        if memory.status == "pending" and author in (None, memory.author):
            return self.memories.apply(caller, memory, {}, action="approved", status="published", reason=reason)
        revision = self._revision(caller, memory_id, author)
        if revision.base_version != memory.version:
            raise Conflict(
                f"the revision was made on version {revision.base_version}; the memory is now at version "
                f"{memory.version}: the author must edit again",
                code="stale_revision",
                details={"base_version": revision.base_version, "current_version": memory.version},
            )
        updated = self.memories.apply(
            caller, memory, _typed(revision.changes), action="revision_approved", actor=revision.author, reason=reason
        )  # the author made the edit; the approver approved it (`approved_by`)
        self.store.put_revision(
            revision.model_copy(
                update={"status": "approved", "decided_by": caller.principal, "updated_at": self.clock.now()}
            )
        )
        return updated

    def reject(self, caller: Principal, memory_id: str, reason: str, author: str | None = None) -> dict[str, Any]:
        memory = self._memory(caller, memory_id)
        if memory.status == "pending" and author in (None, memory.author):
            rejected = self.memories.apply(caller, memory, {}, action="rejected", status="archived", reason=reason)
            return {"memory": rejected, "revision": None}
        revision = self._revision(caller, memory_id, author)
        closed = revision.model_copy(
            update={
                "status": "rejected",
                "reason": reason,
                "decided_by": caller.principal,
                "updated_at": self.clock.now(),
            }
        )
        self.store.put_revision(closed)
        self.store.add_history(
            HistoryEntry(
                tenant=caller.tenant,
                memory_id=memory_id,
                version=memory.version,
                action="revision_rejected",
                actor=caller.principal,
                status=memory.status,
                reason=reason,
                at=self.clock.now(),
                changes={k: [getattr(memory, k), v] for k, v in revision.changes.items()},
            )
        )
        return {"memory": memory, "revision": closed}

    def queue(self, caller: Principal, path: str | None = None) -> list[dict[str, Any]]:
        """Pending creates and open revisions, oldest first, with a diff against the published version."""
        within = self.scopes.resolve(caller.tenant, path).scope.scope_id if path else None
        now = self.clock.now()
        items = []
        for memory in self.store.list_memories(caller.tenant):
            if memory.status == "pending" and self._within(memory, within):
                items.append(
                    self._item(
                        memory,
                        "create",
                        memory.author,
                        memory.created_at,
                        now,
                        {f: [None, _field(memory, f)] for f in ("body", *EDITABLE[1:]) if _field(memory, f)},
                    )
                )
        for revision in self.store.list_revisions(caller.tenant):
            published = self.store.get_memory(caller.tenant, revision.memory_id)
            if published is None or published.status != "published" or not self._within(published, within):
                continue
            diff = {k: [_plain_value(getattr(published, k)), v] for k, v in revision.changes.items()}
            item = self._item(published, "revision", revision.author, revision.created_at, now, diff)
            item["stale"] = revision.base_version != published.version
            items.append(item)
        return sorted(items, key=lambda i: (i["submitted_at"], i["memory_id"], i["author"]))

    def history(self, caller: Principal, memory_id: str) -> list[HistoryEntry]:
        self._memory(caller, memory_id)
        return self.store.list_history(caller.tenant, memory_id)

    def mine(self, caller: Principal) -> list[dict[str, Any]]:
        """The caller's own proposals in every state, so an author can read why one was rejected: pending
        creates (`kind: create`, open / approved / rejected with the reason) and revisions (`kind: revision`)."""
        creates = []
        for memory in self.store.list_memories(caller.tenant, archived=True):
            if memory.author != caller.principal:
                continue
            decision = next(
                (h for h in reversed(self.store.list_history(caller.tenant, memory.memory_id))
                 if h.action in ("approved", "rejected")),
                None,
            )  # fmt: skip
            if memory.status != "pending" and decision is None:
                continue  # published without review (an approver's own), or withdrawn by its author
            creates.append(
                {
                    "kind": "create",
                    "memory_id": memory.memory_id,
                    "key": memory.key,
                    "target": self._target(memory),
                    "author": memory.author,
                    "status": "open" if decision is None else decision.action,
                    "reason": decision.reason if decision else None,
                    "decided_by": decision.actor if decision else None,
                    "created_at": memory.created_at.isoformat(),
                    "updated_at": (decision.at if decision else memory.updated_at).isoformat(),
                    "body": memory.body,
                }
            )
        revisions = [
            {"kind": "revision", **r.model_dump(mode="json", exclude={"tenant"})}
            for r in self.store.list_revisions(caller.tenant, author=caller.principal, status=None)
        ]
        return creates + revisions

    # -- helpers ----------------------------------------------------------------------------
    def _memory(self, caller: Principal, memory_id: str) -> Memory:
        if not caller.has(Role.approver):
            raise Forbidden("reviewing needs the approver role")
        memory = self.store.get_memory(caller.tenant, memory_id)
        if memory is None:
            raise MemoryNotFound(f"memory {memory_id} does not exist", details={"memory_id": memory_id})
        return memory

    def _revision(self, caller: Principal, memory_id: str, author: str | None) -> Revision:
        open_ = self.store.list_revisions(caller.tenant, memory_id=memory_id, author=author)
        if not open_:
            raise NotFound(
                f"memory {memory_id} has no pending work" + (f" by {author}" if author else ""), code="no_pending_work"
            )
        if len(open_) > 1:
            raise InvalidInput(
                "several authors have pending revisions: name one with 'author'",
                code="ambiguous_revision",
                details={"authors": [r.author for r in open_]},
            )
        return open_[0]

    def _within(self, memory: Memory, scope_id: str | None) -> bool:
        if scope_id is None:
            return True
        if memory.scope_id is None:
            return self.scopes.root(memory.tenant).scope_id == scope_id
        return scope_id in {s.scope_id for s in self.scopes.chain_of(memory.tenant, memory.scope_id).chain}

    def _target(self, memory: Memory) -> str:
        if memory.kind == "tagged":
            return tag_label(memory)
        return self.scopes.chain_of(memory.tenant, memory.scope_id or "").path

    def _item(
        self, memory: Memory, kind: str, author: str, submitted: Any, now: Any, diff: dict[str, Any]
    ) -> dict[str, Any]:
        target = self._target(memory)
        return {
            "memory_id": memory.memory_id,
            "kind": kind,
            "key": memory.key,
            "target": target,
            "author": author,
            "submitted_at": submitted,
            "age_seconds": int((now - submitted).total_seconds()),
            "published_version": memory.version if memory.status == "published" else None,
            "diff": diff,
        }


def _plain_value(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _plain(changes: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain_value(v) for k, v in changes.items()}


def _typed(changes: dict[str, Any]) -> dict[str, Any]:
    """Stored revision changes are JSON; let the Memory model parse datetimes back."""
    return Memory.model_validate({**_SAMPLE, **changes}).model_dump(include=set(changes))


def _field(memory: Memory, name: str) -> Any:
    return _plain_value(getattr(memory, name))


_SAMPLE: dict[str, Any] = {
    "tenant": "t",
    "memory_id": "m",
    "kind": "scoped",
    "key": "k",
    "body": "b",
    "status": "pending",
    "author": "a",
    "created_at": "2000-01-01T00:00:00Z",
    "updated_at": "2000-01-01T00:00:00Z",
}
