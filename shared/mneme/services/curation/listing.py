"""The scoped memories under a scope, paged: what `GET /v1/scopes/memories` lists."""

from __future__ import annotations

from dataclasses import dataclass

from mneme.errors import InvalidInput
from mneme.models import Memory, Principal, Revision, Role
from mneme.services.curation.memories import MemoriesStore, MemoryService
from mneme.services.cursors import Cursors
from mneme.services.scopes import ScopeService

Listed = tuple[Memory, str, Revision | None]  # a memory, its scope's path, the caller's open edit of it
Position = tuple[str, str, str]  # (scope path, key, memory id): the order of the listing


@dataclass
class MemoryListing:
    store: MemoriesStore
    scopes: ScopeService
    memories: MemoryService
    cursors: Cursors

    def page(self, caller: Principal, path: str, cursor: str | None, limit: int) -> tuple[list[Listed], str | None]:
        """Up to `limit` memories of scope `path` and every scope under it, as retrieve shows them to the caller
        (published ones and its own drafts; never archived, expired or another's draft), by scope path, key and
        id; with the cursor of the next page (None at the end). The scopes are walked in path order, only as far
        as the page needs and never through a subtree the cursor has passed; each scope's memories are one
        indexed read (the store's per-scope listing). The cursor is signed for the listed scope, not its path,
        and holds its position below it: a rename of that scope or one above it between two pages keeps it."""
        tenant = caller.tenant
        start = self.scopes.resolve(tenant, path)
        purpose = f"memories {start.scope.scope_id}"
        after = self._after(tenant, cursor, purpose, start.path)
        now = self.memories.clock.now()
        revisions = self._open_revisions(caller)
        listed: list[Listed] = []
        for scope_path, scope in self.scopes.walk(tenant, start, after=after[0] if after else None):
            if after is not None and scope_path < after[0]:
                continue
            held = self.memories.visible_to(caller, self.store.list_scoped_memories(tenant, scope.scope_id), now)
            for memory in sorted(held, key=lambda m: (m.key, m.memory_id)):
                if after is not None and (scope_path, memory.key, memory.memory_id) <= after:
                    continue
                if len(listed) == limit:
                    last, last_path, _ = listed[-1]
                    below = last_path.removeprefix(start.path)  # "" or ".<segments>": where it is under the scope
                    return listed, self.cursors.encode(tenant, [below, last.key, last.memory_id], purpose)
                revision = revisions.get(memory.memory_id) if memory.status == "published" else None
                listed.append((memory, scope_path, revision))
        return listed, None

    def _open_revisions(self, caller: Principal) -> dict[str, Revision]:
        """The caller's open edits of published memories (an approver edits in place: it has none)."""
        if caller.has(Role.approver):
            return {}
        found = self.store.list_revisions(caller.tenant, author=caller.principal)
        return {r.memory_id: r for r in found if r.status == "open"}

    def _after(self, tenant: str, cursor: str | None, purpose: str, start: str) -> Position | None:
        """The position a cursor resumes after, its scope path under the listed scope's path now (`start`)."""
        if cursor is None:
            return None
        values = self.cursors.decode(tenant, cursor, purpose)
        if len(values) != 3 or not all(isinstance(v, str) for v in values):
            raise InvalidInput("invalid cursor", code="invalid_cursor")
        return start + values[0], values[1], values[2]
