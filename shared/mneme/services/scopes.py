"""The scope tree: resolution through aliases, creation, listing, renames and layers.

Canonical paths of many scopes (a recall's results) are built by `paths_of` / `chains_of` with one
batch read per depth level. Inside `ScopeService.request_cache()` (entered by a request that resolves
many paths or scopes, e.g. `RecallService.recall` and `RememberService.remember` through `request_cache.per_request`)
every scope read is kept for the rest of the request, and so is every step a path resolution found
(never a missing one: a request may create it), so ancestors shared by many results, and the prefixes
shared by a batch's paths, are read once; outside it nothing is cached.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from mneme import paths
from mneme.errors import Conflict, InvalidInput, ScopeNotFound
from mneme.models import ResolvedScope, Scope
from mneme.ports import Clock, ScopeStore

_Known = dict[tuple[str, str], Scope | None]  # (tenant, scope_id) -> the scope, None when it does not exist


@dataclass
class _Request:
    scopes: _Known = field(default_factory=dict)
    children: dict[tuple[str, str | None, str], Scope] = field(default_factory=dict)  # (tenant, parent, segment)


_REQUEST: ContextVar[_Request | None] = ContextVar("mneme_scope_cache", default=None)


@dataclass
class ScopeService:
    store: ScopeStore
    clock: Clock

    def _child(self, tenant: str, parent_id: str | None, segment: str) -> Scope | None:
        """The child `segment` of `parent_id` (None: the tenant's root), kept for the request when found."""
        cache = _REQUEST.get()
        key = (tenant, parent_id, segment)
        if cache is not None and key in cache.children:
            return cache.children[key]
        child = self.store.find_child(tenant, parent_id, segment)
        if cache is not None and child is not None:
            cache.children[key] = child
        return child

    def root(self, tenant: str) -> Scope:
        """The tenant's root scope, created on first use."""
        root = self._child(tenant, None, paths.ROOT)
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
            child = self._child(tenant, parent.scope_id, segment)
            if child is None:
                aliased = self.store.find_alias(tenant, parent.scope_id, segment)
                child = self.store.get_scope(tenant, aliased) if aliased else None
                via_alias = True
            if child is None:
                raise ScopeNotFound(f"scope {path!r} does not exist", details={"path": path})
            chain.append(child)
        if via_alias:  # an alias may lead anywhere after a move or merge: rebuild the canonical chain
            return self.chain_of(tenant, chain[-1].scope_id).model_copy(update={"via_alias": True})
        if (cache := _REQUEST.get()) is not None:
            cache.scopes.update({(tenant, scope.scope_id): scope for scope in chain})
        return ResolvedScope(scope=chain[-1], path=paths.join([s.segment for s in chain[1:]]), chain=chain)

    def chain_of(self, tenant: str, scope_id: str) -> ResolvedScope:
        """Resolve a scope id to its canonical path by following parent links."""
        found = self.chains_of(tenant, [scope_id]).get(scope_id)
        if found is None:
            raise ScopeNotFound(f"scope {scope_id} does not exist")
        return found

    def prefetch(self, tenant: str, scope_ids: Iterable[str]) -> None:
        """Read the chains of `scope_ids` into the request's cache (level by level), for later lookups."""
        if _REQUEST.get() is not None:
            self._read_up(tenant, list(dict.fromkeys(scope_ids)))

    def paths_of(self, tenant: str, scope_ids: Iterable[str]) -> dict[str, str]:
        """Canonical paths of many scopes (see `chains_of`); scopes that do not exist are left out."""
        return {scope_id: resolved.path for scope_id, resolved in self.chains_of(tenant, scope_ids).items()}

    def chains_of(self, tenant: str, scope_ids: Iterable[str]) -> dict[str, ResolvedScope]:
        """Canonical chains of many scopes, read level by level: one batch for the scopes, one for their
        parents, and so on up to the root (scopes already read in this request are not read again).
        A scope that does not exist, or whose chain is broken, is left out."""
        wanted = list(dict.fromkeys(scope_ids))
        known = self._read_up(tenant, wanted)
        chains: dict[str, ResolvedScope] = {}
        for scope_id in wanted:
            chain: list[Scope] = []
            current = known.get((tenant, scope_id))
            while current is not None and len(chain) <= paths.MAX_DEPTH:
                chain.append(current)
                current = known.get((tenant, current.parent_id)) if current.parent_id else None
            if chain and chain[-1].parent_id is None:
                chain.reverse()
                path = paths.join([s.segment for s in chain[1:]])
                chains[scope_id] = ResolvedScope(scope=chain[-1], path=path, chain=chain)
        return chains

    def _read_up(self, tenant: str, scope_ids: list[str]) -> _Known:
        """The scopes and all their ancestors, by (tenant, scope_id): one `get_scopes` per level."""
        cache = _REQUEST.get()
        known: _Known = cache.scopes if cache is not None else {}
        level = [i for i in scope_ids if (tenant, i) not in known]
        for _ in range(paths.MAX_DEPTH + 1):
            if not level:
                break
            found = self.store.get_scopes(tenant, level)
            known.update({(tenant, i): found.get(i) for i in level})
            parents = (s.parent_id for s in found.values() if s.parent_id is not None)
            level = [i for i in dict.fromkeys(parents) if (tenant, i) not in known]
        return known

    @staticmethod
    @contextmanager
    def request_cache() -> Iterator[None]:
        """Keep every scope `chains_of` reads until the block ends (one request: scopes do not move
        under it in a way its answer must reflect). Nested blocks share the outer cache."""
        if _REQUEST.get() is not None:
            yield
            return
        token = _REQUEST.set(_Request())
        try:
            yield
        finally:
            _REQUEST.reset(token)

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
            depth=parent.scope.depth + 1,
            created_at=now,
            updated_at=now,
        )
        self.store.create_scope(scope)
        path = paths.join([*paths.parse_path(parent.path), segments[-1]])  # canonical when the parent is an alias
        return ResolvedScope(scope=scope, path=path, chain=[*parent.chain, scope])

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

    def walk(self, tenant: str, start: ResolvedScope, after: str | None = None) -> Iterator[tuple[str, Scope]]:
        """(canonical path, scope) for `start` and its descendants in the order of their paths, read lazily:
        a scope's children are read when it is reached, and not at all when every path under it comes before
        `after` (a listing resumed there). Each path is greater than its parent's, so the least path not yet
        reached is always one whose parent was."""
        frontier = [(start.path, start.scope)]  # paths are unique: a scope is never compared
        while frontier:
            scope_path, scope = heapq.heappop(frontier)
            yield scope_path, scope
            below = f"{scope_path}."
            if after is not None and below < after and not after.startswith(below):
                continue  # the whole subtree sorts before `after`
            for child in self.store.list_children(tenant, scope.scope_id):
                heapq.heappush(frontier, (below + child.segment, child))

    def aliases(self, tenant: str, tree: list[tuple[str, Scope]]) -> dict[str, list[str]]:
        """scope_id → the old paths (aliases left under a scope of `tree`) that resolve to it."""
        found: dict[str, list[str]] = {}
        for path, scope in tree:
            for segment, scope_id in self.store.list_aliases(tenant, scope.scope_id):
                found.setdefault(scope_id, []).append(f"{path}.{segment}")
        return found

    def rename(self, tenant: str, path: str, new_path: str) -> tuple[ResolvedScope, str]:
        """Rename the last segment; the old path keeps resolving as an alias. Returns (scope, old path)."""
        current, segment = self.renaming(tenant, path, new_path)
        if segment == current.scope.segment:
            return current, current.path
        self.store.rename_scope(tenant, current.scope.scope_id, segment, self.clock.now())
        return self.resolve(tenant, new_path), current.path

    def renaming(self, tenant: str, path: str, new_path: str) -> tuple[ResolvedScope, str]:
        """The scope a rename changes and its new last segment (400 `invalid_rename` when it is not one)."""
        current = self.resolve(tenant, path)
        return current, renamed_segment(current.path, new_path)

    def layers(self, tenant: str) -> dict[int, str]:
        return self.store.get_layers(tenant)

    def set_layers(self, tenant: str, layers: dict[int, str]) -> dict[int, str]:
        validate_layers(layers)
        self.store.put_layers(tenant, dict(sorted(layers.items())))
        return self.store.get_layers(tenant)


def renamed_segment(path: str, new_path: str) -> str:
    """The new last segment of a rename from canonical `path` to `new_path` (400 `invalid_rename` otherwise)."""
    new_segments, old_segments = paths.parse_path(new_path), paths.parse_path(path)
    if not old_segments:
        raise InvalidInput("root cannot be renamed", code="invalid_rename")
    if len(new_segments) != len(old_segments) or new_segments[:-1] != old_segments[:-1]:
        raise InvalidInput(
            f"a rename changes only the last segment of {path!r}; moving a scope under "
            "another parent is a structure change (use a structure draft)",
            code="invalid_rename",
        )
    return new_segments[-1]


def validate_layers(layers: dict[int, str]) -> None:
    for depth, name in layers.items():
        if not 1 <= depth <= paths.MAX_DEPTH:
            raise InvalidInput(f"layer depth {depth} must be between 1 and {paths.MAX_DEPTH}", code="invalid_layers")
        paths.validate_segment(name, field="layer name")
    if len(set(layers.values())) != len(layers):
        raise InvalidInput("layer names must be distinct", code="invalid_layers")
