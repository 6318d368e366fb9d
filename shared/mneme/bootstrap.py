"""The composition root: the only place concrete adapters are chosen."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from mneme.ports import Clock, RecordStore
from mneme.services.keys import KeyService
from mneme.services.memories import MemoryService
from mneme.services.retrieval import RetrievalService
from mneme.services.scopes import ScopeService
from mneme.settings import DynamoStore, Settings, get_settings


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class Services:
    store: RecordStore
    clock: Clock
    scopes: ScopeService
    memories: MemoryService
    retrieval: RetrievalService
    keys: KeyService


def build_store(settings: Settings) -> RecordStore:
    if isinstance(settings.store, DynamoStore):
        from mneme.adapters.dynamo_store import DynamoRecordStore

        return DynamoRecordStore(settings.store.table_name, region_name=settings.store.region)
    from mneme.adapters.sqlite_store import SqliteRecordStore

    return SqliteRecordStore(settings.sqlite_path)


def build(settings: Settings | None = None, *, store: RecordStore | None = None,
          clock: Clock | None = None) -> Services:  # fmt: skip
    """Wire the services. Tests pass `store`/`clock` fakes; everything else comes from settings."""
    settings = settings or get_settings()
    store = store or build_store(settings)
    clock = clock or SystemClock()
    scopes = ScopeService(store, clock)
    memories = MemoryService(store, clock, scopes)
    return Services(store=store, clock=clock, scopes=scopes, memories=memories,
                    retrieval=RetrievalService(store, clock, scopes, memories), keys=KeyService(store, clock))  # fmt: skip


@cache
def current() -> Services:
    """The process-wide services, built once per cold start."""
    return build()


def current_settings() -> Settings:
    return get_settings()


def reset() -> None:
    """Forget the cached services and settings (tests, or after changing the environment)."""
    current.cache_clear()
    get_settings.cache_clear()
