"""The bookkeeping of a Serverless index's document copies (see `serverless`): a copy as a lookup
sees it, its content digest, the writer's strictly increasing clock (`written_at`), and the server ids this
process indexed recently (`RecentWrites`), so it can delete copies that are not searchable yet.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

Key = tuple[str, str]  # (tenant, doc_id)

RECENT_SECONDS = 120.0  # well past a collection's refresh interval
RECENT_MAX = 50_000


class Copy(NamedTuple):
    """One stored copy of a document, as a lookup sees it."""

    server_id: str
    written_at: int
    digest: str | None


def content_digest(source: dict[str, Any]) -> str:
    """A fingerprint of a copy's content: every field but `written_at` and `digest` (vector included)."""
    content = {key: value for key, value in source.items() if key not in ("written_at", "digest")}
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


class WriteClock:
    """Epoch milliseconds, strictly increasing across calls and past every value it is shown."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self._last = max(int(self.now() * 1000), self._last + 1)
            return self._last

    def observe(self, value: int) -> None:
        with self._lock:
            self._last = max(self._last, value)


class RecentWrites:
    """Server ids of the copies this process indexed in the last `ttl` seconds, by (tenant, doc_id)."""

    def __init__(
        self, ttl: float = RECENT_SECONDS, limit: int = RECENT_MAX, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self.clock = clock
        self._order: OrderedDict[str, tuple[Key, float]] = OrderedDict()  # server id -> (key, expiry), oldest first
        self._by_key: dict[Key, set[str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._order)

    def remember(self, key: Key, server_id: str) -> None:
        with self._lock:
            self._drop(server_id)
            self._order[server_id] = (key, self.clock() + self.ttl)
            self._by_key.setdefault(key, set()).add(server_id)
            self._prune()

    def ids(self, keys: Iterable[Key]) -> list[str]:
        with self._lock:
            self._prune()
            return [sid for key in keys for sid in sorted(self._by_key.get(key, ()))]

    def tenant_ids(self, tenant: str) -> list[str]:
        with self._lock:
            self._prune()
            return [sid for key, sids in self._by_key.items() if key[0] == tenant for sid in sorted(sids)]

    def forget(self, server_ids: Iterable[str]) -> None:
        with self._lock:
            for sid in server_ids:
                self._drop(sid)

    def _prune(self) -> None:
        """Drop expired entries and, past `limit`, the oldest (expiries are in insertion order)."""
        now = self.clock()
        while self._order:
            oldest, (_, expiry) = next(iter(self._order.items()))
            if expiry > now and len(self._order) <= self.limit:
                return
            self._drop(oldest)

    def _drop(self, server_id: str) -> None:
        entry = self._order.pop(server_id, None)
        if entry is not None:
            sids = self._by_key[entry[0]]
            sids.discard(server_id)
            if not sids:
                del self._by_key[entry[0]]
