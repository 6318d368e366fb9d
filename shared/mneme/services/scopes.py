"""The scope tree: resolution through aliases, creation, listing, renames and layers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from mneme import paths
from mneme.errors import Conflict, InvalidInput, ScopeNotFound
from mneme.models import ResolvedScope, Scope
from mneme.ports import Clock, RecordStore


@dataclass
class ScopeService:
    store: RecordStore
    clock: Clock

    def root(self, tenant: str) -> Scope:
        """The tenant's root scope, created on first use."""
        root = self.store.find_child(tenant, None, paths.ROOT)
        if root is not None:
            return root
        now = self.clock.now()
        scope = Scope(
            tenant=tenant,
            scope_id=str(uuid.uuid4()),
            parent_id=None,
            segment=paths.ROOT,
            depth=0,
            created_at=now,
            updated_at=now,
        )
        try:
            self.store.create_scope(scope)
        except Conflict:  # another request created it first
            found = self.store.find_child(tenant, None, paths.ROOT)
            assert found is not None
            return found
        return scope

    def resolve(self, tenant: str, path: str) -> ResolvedScope:
        """Walk the path from root, following aliases; 404 scope_not_found when a step is missing."""
        segments = paths.parse_path(path)
        chain = [self.root(tenant)]
        via_alias = False
        for segment in segments:
            parent = chain[-1]
            child = self.store.find_child(tenant, parent.scope_id, segment)
            if child is None:
                aliased = self.store.find_alias(tenant, parent.scope_id, segment)
                child = self.store.get_scope(tenant, aliased) if aliased else None
                via_alias = True
            if child is None:
                raise ScopeNotFound(f"scope {path!r} does not exist", details={"path": path})
            chain.append(child)
        if via_alias:  # an alias may lead anywhere after a move or merge: rebuild the canonical chain
            return self.chain_of(tenant, chain[-1].scope_id).model_copy(update={"via_alias": True})
        return ResolvedScope(scope=chain[-1], path=paths.join([s.segment for s in chain[1:]]), chain=chain)

    def chain_of(self, tenant: str, scope_id: str) -> ResolvedScope:
        """Resolve a scope id to its canonical path by following parent links."""
        chain: list[Scope] = []
        current = self.store.get_scope(tenant, scope_id)
        while current is not None:
            chain.append(current)
            current = self.store.get_scope(tenant, current.parent_id) if current.parent_id else None
        if not chain or chain[-1].parent_id is not None:
            raise ScopeNotFound(f"scope {scope_id} does not exist")
        chain.reverse()
        return ResolvedScope(scope=chain[-1], path=paths.join([s.segment for s in chain[1:]]), chain=chain)

    def create(self, tenant: str, path: str, *, parents: bool = False) -> ResolvedScope:
        """Create a scope; missing ancestors are created only when `parents` is set."""
        segments = paths.parse_path(path)
        if not segments:
            raise Conflict("root always exists", code="scope_exists")
        parent = self._resolve_parent(tenant, segments[:-1], parents=parents)
        now = self.clock.now()
        scope = Scope(
            tenant=tenant,
            scope_id=str(uuid.uuid4()),
            parent_id=parent.scope.scope_id,
            segment=segments[-1],
            depth=len(segments),
            created_at=now,
            updated_at=now,
        )
        self.store.create_scope(scope)
        return ResolvedScope(scope=scope, path=paths.join(segments), chain=[*parent.chain, scope])

    def _resolve_parent(self, tenant: str, segments: tuple[str, ...], *, parents: bool) -> ResolvedScope:
        try:
            return self.resolve(tenant, paths.join(segments))
        except ScopeNotFound:
            if not parents:
                raise ScopeNotFound(
                    f"parent scope {paths.join(segments)!r} does not exist (pass parents: true to create it)",
                    details={"path": paths.join(segments)},
                ) from None
        try:
            return self.create(tenant, paths.join(segments), parents=True)
        except Conflict:  # created concurrently
            return self.resolve(tenant, paths.join(segments))

    def subtree(self, tenant: str, path: str) -> list[tuple[str, Scope]]:
        """(canonical path, scope) for a scope and all its descendants, depth-first by segment."""
        start = self.resolve(tenant, path)
        out: list[tuple[str, Scope]] = []
        stack = [(start.path, start.scope)]
        while stack:
            scope_path, scope = stack.pop()
            out.append((scope_path, scope))
            children = self.store.list_children(tenant, scope.scope_id)
            stack.extend((f"{scope_path}.{child.segment}", child) for child in reversed(children))
        return out

    def rename(self, tenant: str, path: str, new_path: str) -> tuple[ResolvedScope, str]:
        """Rename the last segment; the old path keeps resolving as an alias. Returns (scope, old path)."""
        current = self.resolve(tenant, path)
        new_segments = paths.parse_path(new_path)
        old_segments = paths.parse_path(current.path)
        if not old_segments:
            raise InvalidInput("root cannot be renamed", code="invalid_rename")
        if len(new_segments) != len(old_segments) or new_segments[:-1] != old_segments[:-1]:
            raise InvalidInput(
                f"a rename changes only the last segment of {current.path!r}; moving a scope under "
                "another parent is a structure change (use a structure draft)",
                code="invalid_rename",
            )
        if new_segments == old_segments:
            return current, current.path
        self.store.rename_scope(tenant, current.scope.scope_id, new_segments[-1], self.clock.now())
        return self.resolve(tenant, new_path), current.path

    def layers(self, tenant: str) -> dict[int, str]:
        return self.store.get_layers(tenant)

    def set_layers(self, tenant: str, layers: dict[int, str]) -> dict[int, str]:
        for depth, name in layers.items():
            if not 1 <= depth <= paths.MAX_DEPTH:
                raise InvalidInput(
                    f"layer depth {depth} must be between 1 and {paths.MAX_DEPTH}", code="invalid_layers"
                )
            paths.validate_segment(name, field="layer name")
        if len(set(layers.values())) != len(layers):
            raise InvalidInput("layer names must be distinct", code="invalid_layers")
        self.store.put_layers(tenant, dict(sorted(layers.items())))
        return self.store.get_layers(tenant)
