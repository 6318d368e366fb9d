"""The change feed: records changed after an opaque, signed cursor, in a total (position, id) order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mneme.errors import InvalidInput
from mneme.models import Memory, Principal
from mneme.ports import ChangeFeed, EpisodeStore, FactStore, MemoryStore, ScopeStore
from mneme.services.cursors import Cursors

MAX_LIMIT = 1000
TOMBSTONE = "deleted:"  # a feed kind `deleted:<kind>`: the record was erased; only its id remains


class FeedStore(ChangeFeed, ScopeStore, MemoryStore, EpisodeStore, FactStore, Protocol):
    """The record store's roles the feed reads: the change feed, and the records it names."""


@dataclass
class FeedService:
    store: FeedStore
    secret_source: Callable[[], bytes]  # read on first use: functions that never page the feed never fetch it

    @property
    def secret(self) -> bytes:
        return self.secret_source()

    def changes(self, caller: Principal, cursor: str | None, limit: int = 100) -> dict[str, Any]:
        """A page of changes the caller may read. Entries the caller may not read (another author's
        pending work, or work archived before it was ever published) are skipped, so a page can be
        shorter than `limit`; `next_cursor` still moves past them. An erased record leaves a tombstone:
        `deleted: true`, its kind and id, no record."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", code="invalid_limit")
        after = self._decode(caller.tenant, cursor) if cursor else None
        rows = self.store.list_changes(caller.tenant, after, limit + 1)
        page, has_more = rows[:limit], len(rows) > limit
        records = self._records(caller, page)
        changes = []
        for ts, kind, record_id in page:
            if kind.startswith(TOMBSTONE):
                changes.append(
                    {"position": ts, "kind": kind[len(TOMBSTONE) :], "id": record_id, "record": None, "deleted": True}
                )
            elif (kind, record_id) in records:
                changes.append(
                    {
                        "position": ts,
                        "kind": kind,
                        "id": record_id,
                        "record": records[kind, record_id],
                        "deleted": False,
                    }
                )
        last = (page[-1][0], page[-1][2]) if page else after
        return {
            "changes": changes,
            "next_cursor": self._encode(caller.tenant, last) if last else cursor,
            "has_more": has_more,
        }

    def _records(self, caller: Principal, page: list[tuple[str, str, str]]) -> dict[tuple[str, str], Any]:
        """The records of a page that the caller may read, by (kind, id)."""
        ids: dict[str, list[str]] = {}
        for _, kind, record_id in page:
            ids.setdefault(kind, []).append(record_id)
        out: dict[tuple[str, str], Any] = {}
        tenant = caller.tenant
        for episode in self.store.get_episodes(tenant, ids.get("episode", [])).values():
            out["episode", episode.episode_id] = episode.model_dump(mode="json", exclude={"tenant", "vector"})
        for fact in self.store.get_facts(tenant, ids.get("fact", [])).values():
            out["fact", fact.fact_id] = fact.model_dump(mode="json", exclude={"tenant", "vector"})
        for memory_id in ids.get("memory", []):
            memory = self.store.get_memory(tenant, memory_id)
            if memory is not None and self.readable(caller, memory):
                out["memory", memory_id] = memory.model_dump(mode="json", exclude={"tenant"})
        for scope in self.store.get_scopes(tenant, ids.get("scope", [])).values():  # one read, not one per scope
            out["scope", scope.scope_id] = scope.model_dump(mode="json", exclude={"tenant"})
        return out

    def readable(self, caller: Principal, memory: Memory) -> bool:
        """Its author reads every state of a memory; everyone else only what was published: a published
        memory, or one archived after it had been published (never a rejected or withdrawn proposal)."""
        if memory.author == caller.principal or memory.status == "published":
            return True
        if memory.status == "pending":
            return False
        return any(entry.status == "published" for entry in self.store.list_history(memory.tenant, memory.memory_id))

    # -- cursors (`mneme.services.cursors`): signed over the tenant, the feed's signature of before ----------
    def _encode(self, tenant: str, position: tuple[str, str]) -> str:
        return Cursors(self.secret_source).encode(tenant, list(position))

    def _decode(self, tenant: str, cursor: str) -> tuple[str, str]:
        values = Cursors(self.secret_source).decode(tenant, cursor)
        if len(values) != 2:
            raise InvalidInput("invalid cursor", code="invalid_cursor")
        return str(values[0]), str(values[1])
