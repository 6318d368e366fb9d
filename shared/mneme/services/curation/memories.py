"""Curated memories: create, edit and archive, with the status model pending → published → archived."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from mneme import paths
from mneme.errors import Conflict, Forbidden, InvalidInput, MemoryNotFound, PayloadTooLarge
from mneme.models import HistoryEntry, Memory, Principal, Revision, Role
from mneme.ports import Clock, MemoryStore, ScopeStore
from mneme.services.context_pack import agent_view
from mneme.services.scopes import ScopeService

KEY_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
KEY_PATTERN = f"^{KEY_RE.pattern}$"
TAG_PATTERN = rf"^{paths.SEGMENT_RE.pattern}=({paths.SEGMENT_RE.pattern}|\*)$"  # what `parse_tag` takes
MAX_BODY_BYTES = 16 * 1024
EDITABLE = (
    "body", "summary", "tags", "triggers", "confidence", "valid_until", "review_due", "depends_on", "search_text",
)  # fmt: skip
NOT_NULL = ("body", "tags", "triggers", "depends_on")


class MemoriesStore(MemoryStore, ScopeStore, Protocol):
    """The record store's roles memories use: memories and the tenant's layers."""


def validate_key(key: str, *, field: str = "key") -> str:
    if not KEY_RE.fullmatch(key):
        raise InvalidInput(
            f"invalid {field} {key!r}: 1-128 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
            code="invalid_key",
        )
    return key


def parse_tag(tag: str) -> tuple[str, str | None]:
    """`layer=value` targets one value of a layer; `layer=*` is layer-wide."""
    layer, sep, value = tag.partition("=")
    if not sep:
        raise InvalidInput(f"invalid tag {tag!r}: write 'layer=value' or 'layer=*'", code="invalid_tag")
    paths.validate_segment(layer, field="tag layer")
    if value == "*":
        return layer, None
    return layer, paths.validate_segment(value, field="tag value")


def tag_label(memory: Memory) -> str:
    return f"{memory.layer}={memory.value or '*'}"


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def check_changes(changes: dict[str, Any]) -> None:
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise InvalidInput(f"fields not editable: {sorted(unknown)}", code="invalid_fields")
    nulled = sorted(field for field in NOT_NULL if field in changes and changes[field] is None)
    if nulled:
        raise InvalidInput(f"fields cannot be null: {nulled}", code="invalid_fields")
    _check_fields(changes)


def check_version(memory: Memory, version: int | None) -> None:
    """`version`, when given, must be the stored version: a stale edit is a 409 for every role."""
    if version is not None and version != memory.version:
        raise Conflict(
            f"memory {memory.memory_id} is at version {memory.version}, not {version}",
            code="version_conflict",
            details={"current_version": memory.version},
        )


def _check_fields(fields: dict[str, Any]) -> None:
    body = fields.get("body")
    if body is not None:
        if not body.strip():
            raise InvalidInput("body must not be empty", code="invalid_body")
        if len(body.encode()) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"body exceeds {MAX_BODY_BYTES} bytes", code="body_too_large")
        if not agent_view(body):
            raise InvalidInput(
                "body has nothing an agent would read: frontmatter and the Context, Example and Origin "
                "sections are never shown; add the guidance itself",
                code="invalid_body",
            )
    search_text = fields.get("search_text")
    if search_text is not None and len(search_text.encode()) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"search_text exceeds {MAX_BODY_BYTES} bytes", code="body_too_large")
    for dependency in fields.get("depends_on") or []:
        validate_key(dependency, field="depends_on key")


@dataclass
class MemoryService:
    store: MemoriesStore
    clock: Clock
    scopes: ScopeService
    on_change: Callable[[Memory], None] | None = None

    def _changed(
        self,
        memory: Memory,
        action: str,
        actor: str,
        before: Memory | None = None,
        approved_by: str | None = None,
        reason: str | None = None,
    ) -> Memory:
        """Record the step in the memory's history, then tell the index."""
        fields = ("key", "status", *EDITABLE)
        changes = {
            f: [getattr(before, f) if before else None, getattr(memory, f)]
            for f in fields
            if before is None or getattr(before, f) != getattr(memory, f)
        }
        entry = HistoryEntry(
            tenant=memory.tenant, memory_id=memory.memory_id, version=memory.version, action=action,
            actor=actor, approved_by=approved_by, status=memory.status, reason=reason, at=memory.updated_at,
            changes={k: [_plain(v) for v in pair] for k, pair in changes.items() if pair[0] != pair[1]},
        )  # fmt: skip
        self.store.add_history(entry)
        if self.on_change is not None:
            self.on_change(memory)
        return memory

    def create(
        self,
        caller: Principal,
        *,
        key: str,
        body: str,
        scope: str | None = None,
        tag: str | None = None,
        **fields: Any,
    ) -> tuple[Memory, str]:
        """Create a scoped (`scope`) or tagged (`tag`) memory. Returns it with its target label."""
        validate_key(key)
        _check_fields({"body": body, **fields})
        if (scope is None) == (tag is None):
            raise InvalidInput(
                "give exactly one of 'scope' (a path) or 'tag' ('layer=value' or 'layer=*')",
                code="invalid_target",
            )
        now = self.clock.now()
        target: dict[str, Any]
        if scope is not None:
            resolved = self.scopes.resolve(caller.tenant, scope)
            target, label = {"kind": "scoped", "scope_id": resolved.scope.scope_id}, resolved.path
        else:
            assert tag is not None
            layer, value = parse_tag(tag)
            if layer not in self.store.get_layers(caller.tenant).values():
                raise InvalidInput(
                    f"unknown layer {layer!r}: define it with PUT /v1/layers first", code="unknown_layer"
                )
            target, label = {"kind": "tagged", "layer": layer, "value": value}, f"{layer}={value or '*'}"
        status = "published" if caller.has(Role.approver) else "pending"
        memory = Memory(
            tenant=caller.tenant,
            memory_id=str(uuid.uuid4()),
            key=key,
            body=body,
            status=status,
            author=caller.principal,
            created_at=now,
            updated_at=now,
            **target,
            **fields,
        )
        self.store.create_memory(memory)
        approved_by = caller.principal if status == "published" else None
        return self._changed(memory, "created", caller.principal, approved_by=approved_by), label

    def get(self, caller: Principal, memory_id: str) -> Memory:
        """The memory, if the caller may know it exists: not another author's unapproved work (pending, or
        archived without ever being published: rejected or withdrawn) unless the caller is an approver."""
        memory = self.store.get_memory(caller.tenant, memory_id)
        if memory is None or (
            memory.author != caller.principal and not caller.has(Role.approver) and not self._was_public(memory)
        ):
            raise MemoryNotFound(f"memory {memory_id} does not exist", details={"memory_id": memory_id})
        return memory

    def find(self, caller: Principal, path: str, key: str) -> tuple[Memory, str, Revision | None]:
        """The memory keyed `key` in scope `path` as retrieve shows it to the caller, with the scope's
        canonical path: the caller's own pending draft of the key first, else the published memory (and the
        caller's open revision of it, if any); never an archived or expired one, nor another's draft."""
        validate_key(key)
        resolved = self.scopes.resolve(caller.tenant, path)
        found = self.store.find_scoped_memories(caller.tenant, resolved.scope.scope_id, key, caller.principal)
        visible = self.visible_to(caller, found, self.clock.now())
        if not visible:
            details = {"scope": resolved.path, "key": key}
            raise MemoryNotFound(f"no memory {key!r} in scope {resolved.path}", details=details)
        memory, revision = visible[0], None
        if memory.status == "published" and not caller.has(Role.approver):  # approvers edit in place
            revision = self.store.get_revision(caller.tenant, memory.memory_id, caller.principal)
        return memory, resolved.path, revision if revision is not None and revision.status == "open" else None

    def _was_public(self, memory: Memory) -> bool:
        if memory.status != "archived":
            return memory.status == "published"
        return any(entry.status == "published" for entry in self.store.list_history(memory.tenant, memory.memory_id))

    def _writable(self, caller: Principal, memory_id: str) -> Memory:
        memory = self.get(caller, memory_id)
        if memory.status == "archived":
            raise Conflict(f"memory {memory_id} is archived", code="memory_archived")
        if not caller.has(Role.approver) and not (memory.status == "pending" and memory.author == caller.principal):
            raise Forbidden("only an approver can change published memories or other authors' work")
        return memory

    def edit(self, caller: Principal, memory_id: str, *, version: int | None = None, **changes: Any) -> Memory:
        """Apply field changes; `version`, when given, must match the stored version (else 409)."""
        check_changes(changes)
        memory = self._writable(caller, memory_id)
        check_version(memory, version)
        changes = {field: value for field, value in changes.items() if getattr(memory, field) != value}
        if not changes:  # `PATCH {}` (or values already stored) writes nothing and keeps the version
            return memory
        return self.apply(caller, memory, changes, action="edited")

    def apply(
        self,
        caller: Principal,
        memory: Memory,
        changes: dict[str, Any],
        *,
        action: str,
        status: str | None = None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> Memory:
        """Write `changes` as the next version (optimistic on the version read). `actor` is who made the
        change when it is not the caller (an author's revision that the calling approver approves)."""
        update = {**changes, "version": memory.version + 1, "updated_at": self.clock.now()}
        if status is not None:
            update["status"] = status
        updated = Memory.model_validate(memory.model_copy(update=update).model_dump())
        self.store.update_memory(updated, memory.version)
        published = updated.status == "published" and caller.has(Role.approver)
        approved_by = caller.principal if published else None
        return self._changed(updated, action, actor or caller.principal, memory, approved_by, reason)

    def archive(self, caller: Principal, memory_id: str) -> Memory:
        memory = self._writable(caller, memory_id)
        return self.apply(caller, memory, {}, action="archived", status="archived")

    def visible_to(self, caller: Principal, memories: list[Memory], now: datetime) -> list[Memory]:
        """Published memories plus the caller's own pending work; expired ones are left out."""
        return [
            m
            for m in memories
            if (m.status == "published" or (m.status == "pending" and m.author == caller.principal))
            and (m.valid_until is None or m.valid_until > now)
        ]
