"""The composition root: the only place concrete adapters are chosen."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from mneme.auth import UsageKeys
from mneme.errors import StoreUnavailable
from mneme.services.keys import Authenticator
from mneme.settings import (
    BedrockEmbedderSettings,
    BedrockReasonerSettings,
    DynamoStore,
    OpenAIReasonerSettings,
    OpenSearchIndex,
    Settings,
    get_settings,
)

# The services (and numpy, consolidation, the adapters) are imported where they are built, so a function
# that needs only part of the graph (the authorizer: `current_authenticator`; retrieve) does not load the rest.
if TYPE_CHECKING:
    from mneme.adapters.opensearch.index import OpenSearchIndex as OpenSearchAdapter
    from mneme.consolidation.reasoning import Reasoner
    from mneme.consolidation.service import ConsolidationService, Orchestrator
    from mneme.models import Memory
    from mneme.ports import Clock, Embedder, RecordStore, SearchIndex
    from mneme.services.curation.listing import MemoryListing
    from mneme.services.curation.memories import MemoryService
    from mneme.services.curation.retrieval import RetrievalService
    from mneme.services.curation.review import ReviewService
    from mneme.services.curation.structure import StructureService
    from mneme.services.feed import FeedService
    from mneme.services.forgetting import ForgetService
    from mneme.services.indexing import Indexer
    from mneme.services.keys import KeyService
    from mneme.services.portability import PortabilityService
    from mneme.services.recall import RecallService
    from mneme.services.records import RecordsService
    from mneme.services.remember import RememberService
    from mneme.services.scopes import ScopeService


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def build_store(settings: Settings) -> RecordStore:
    if isinstance(settings.store, DynamoStore):
        from mneme.adapters.dynamo.store import DynamoRecordStore

        return DynamoRecordStore(settings.store.table_name, region_name=settings.store.region)
    from mneme.adapters.sqlite.store import SqliteRecordStore

    return SqliteRecordStore(settings.sqlite_path)


def build_embedder(settings: Settings) -> Embedder:
    if isinstance(settings.embedder, BedrockEmbedderSettings):
        from mneme.adapters.models.embedders import BedrockEmbedder

        return BedrockEmbedder(
            bedrock_model_id=settings.embedder.model_id,
            dimensions=settings.embedder.dimensions,
            region_name=settings.embedder.region,
            max_attempts=settings.embedder.max_attempts,
            read_timeout=settings.embedder.timeout_seconds,
        )
    from mneme.adapters.models.embedders import local_embedder

    return local_embedder(settings.embedder.model, threads=settings.embedder.threads, int8=settings.embedder.int8)


def build_index(settings: Settings, dimension: int) -> SearchIndex:
    if isinstance(settings.index, OpenSearchIndex):
        return build_opensearch_index(settings.index, dimension=dimension)
    from mneme.adapters.sqlite.index import SqliteSearchIndex

    return SqliteSearchIndex(settings.index_path)


def build_opensearch_index(settings: OpenSearchIndex, *, dimension: int | None = None) -> OpenSearchAdapter:
    """A SigV4-signed client for `settings.endpoint`: service `es` is a managed domain whose writes wait for
    the refresh (`visibility_lag` 0), `aoss` a Serverless collection whose `visibility_lag` is
    `settings.fresh_window_seconds`. `dimension` creates the index when it is missing (managed domains)."""
    from mneme.adapters.opensearch.auth import signed_client

    client = signed_client(settings)
    if settings.service == "aoss":
        from mneme.adapters.opensearch.serverless import ServerlessOpenSearchIndex

        lag = settings.fresh_window_seconds
        return ServerlessOpenSearchIndex(client, settings.index_name, dimension=dimension, visibility_lag=lag)
    from mneme.adapters.opensearch.index import OpenSearchIndex as OpenSearchAdapter

    return OpenSearchAdapter(client, settings.index_name, dimension=dimension, refresh=True)


def build_reasoner(settings: Settings) -> Reasoner:
    if isinstance(settings.reasoner, BedrockReasonerSettings):
        from mneme.adapters.models.reasoners import BedrockReasoner

        return BedrockReasoner(settings.reasoner.model_id, region_name=settings.reasoner.region)
    if isinstance(settings.reasoner, OpenAIReasonerSettings):
        from mneme.adapters.models.reasoners import OpenAIReasoner

        return OpenAIReasoner(settings.reasoner.base_url, settings.reasoner.model, api_key=settings.reasoner.api_key)
    from mneme.consolidation.reasoning import ExtractiveReasoner

    return ExtractiveReasoner()


def build_orchestrator(settings: Settings, service: ConsolidationService) -> Orchestrator:
    from mneme.adapters.orchestrators import StepFunctionsOrchestrator
    from mneme.consolidation.threads import ThreadOrchestrator

    if settings.state_machine_arn:
        return StepFunctionsOrchestrator(settings.state_machine_arn)
    return ThreadOrchestrator(service)


def build(
    settings: Settings | None = None,
    *,
    store: RecordStore | None = None,
    clock: Clock | None = None,
    embedder: Embedder | None = None,
    index: SearchIndex | None = None,
    reasoner: Reasoner | None = None,
    background: bool = True,
) -> Services:
    """Wire the services. Tests pass fakes for any port; the rest comes from settings.

    With `background=False` consolidation runs synchronously inside `start` (tests, CLI).
    """
    services = Services(settings or get_settings(), background=background, reasoner=reasoner)
    given = {"store": store, "clock": clock, "embedder": embedder, "index": index}
    for name, port in given.items():
        if port is not None:
            setattr(services, name, port)  # in place of the cached_property's first build
    return services


T = TypeVar("T")


class built(cached_property[T]):
    """A service built once, on first use, under the graph's lock: two threads asking at once (the local
    server's) share one instance. Once built it is a plain attribute, read without the lock."""

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> T: ...
    def __get__(self, instance: object | None, owner: type[Any] | None = None) -> T | Self:
        if instance is None:
            return self
        assert isinstance(instance, Services)
        with instance._building:
            return super().__get__(instance, owner)


class Services:
    """The service graph, each part built on first use and then shared: a function builds what its requests
    touch and no more (retrieve: the store, scopes and memories; no embedder, index or consolidation), so
    its cold start does not import numpy, the OpenSearch client or the consolidation code. A port passed to
    `build`, or assigned, replaces the one settings would choose."""

    def __init__(self, settings: Settings, *, background: bool, reasoner: Reasoner | None) -> None:
        self.settings, self.background, self._reasoner = settings, background, reasoner
        self._building = threading.RLock()  # re-entrant: building a service builds the ones it needs

    def build_all(self) -> None:
        """Build every service now (a long-lived server, before it takes requests)."""
        for name, member in vars(type(self)).items():
            if isinstance(member, built):
                getattr(self, name)

    def interrupt(self) -> None:
        """The process was asked to stop: the local model refuses the batches it has not started, so the
        requests in progress end in moments (a remember stores its episodes for the index sweep to embed)."""
        self._close("embedder")

    def close(self) -> None:
        """Give back what the built parts hold, at the end of a process (a server's stop, a CLI command): the
        index saves its vector caches and closes; the store checkpoints its WAL and closes, so at rest the
        file alone holds everything. Parts never built are not built now."""
        self._close("index", "store")

    def _close(self, *names: str) -> None:
        from mneme.ports import Closeable

        for name in names:
            part = self.__dict__.get(name)  # a `built` part, once built, is in the instance's dict
            if isinstance(part, Closeable):
                part.close()

    @built
    def store(self) -> RecordStore:
        return build_store(self.settings)

    @built
    def clock(self) -> Clock:
        return SystemClock()

    @built
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @built
    def index(self) -> SearchIndex:
        return build_index(self.settings, self.embedder.dimension)

    @built
    def scopes(self) -> ScopeService:
        from mneme.services.scopes import ScopeService

        return ScopeService(self.store, self.clock)

    @built
    def indexer(self) -> Indexer:
        from mneme.services.indexing import Indexer

        return Indexer(self.store, self.scopes, self.embedder, self.index)

    @built
    def memories(self) -> MemoryService:
        from mneme.services.curation.memories import MemoryService

        # the indexer (embedder, index) is built when a memory first changes, not to read one
        return MemoryService(self.store, self.clock, self.scopes, on_change=self._memory_changed)

    def _memory_changed(self, memory: Memory) -> None:
        self.indexer.on_memory_change(memory)

    @built
    def memory_listing(self) -> MemoryListing:
        from mneme.services.curation.listing import MemoryListing
        from mneme.services.cursors import Cursors

        return MemoryListing(self.store, self.scopes, self.memories, Cursors(self._cursor_secret))

    @built
    def retrieval(self) -> RetrievalService:
        from mneme.services.curation.retrieval import RetrievalService

        return RetrievalService(self.store, self.clock, self.scopes, self.memories)

    @built
    def keys(self) -> KeyService:
        from mneme.services.keys import KeyService

        return KeyService(self.store, self.clock)

    @built
    def remember(self) -> RememberService:
        from mneme.services.remember import RememberService

        return RememberService(self.store, self.clock, self.scopes, self.embedder, self.indexer)

    @built
    def recall(self) -> RecallService:
        from mneme.services.recall import RecallService

        return RecallService(self.store, self.clock, self.scopes, self.embedder, self.index)

    @built
    def consolidation(self) -> ConsolidationService:
        from mneme.consolidation.service import ConsolidationService
        from mneme.consolidation.stages import Deps

        reasoner = self._reasoner or build_reasoner(self.settings)
        deps = Deps(self.store, self.clock, self.embedder, reasoner, self.indexer, self.settings.consolidation)
        consolidation = ConsolidationService(deps, self.scopes)
        if self.background:
            consolidation.orchestrator = build_orchestrator(self.settings, consolidation)
        return consolidation

    @built
    def review(self) -> ReviewService:
        from mneme.services.curation.review import ReviewService

        return ReviewService(self.store, self.clock, self.memories, self.scopes)

    @built
    def _cursor_secret(self) -> Callable[[], bytes]:
        return cursor_secret(self.settings)

    @built
    def feed(self) -> FeedService:
        from mneme.services.feed import FeedService

        return FeedService(self.store, self._cursor_secret)

    @built
    def portability(self) -> PortabilityService:
        from mneme.services.portability import PortabilityService

        return PortabilityService(self.store, self.clock, self.scopes, self.indexer)

    @built
    def structure(self) -> StructureService:
        from mneme.services.curation.structure import StructureService

        return StructureService(self.store, self.clock, self.scopes, self.indexer)

    @built
    def records(self) -> RecordsService:
        from mneme.services.cursors import Cursors
        from mneme.services.records import RecordsService

        return RecordsService(self.store, self.scopes, Cursors(self._cursor_secret))

    @built
    def forgetting(self) -> ForgetService:
        from mneme.services.forgetting import ForgetService

        return ForgetService(self.store, self.clock, self.embedder, self.indexer, self.records)


CURSOR_KEY_BYTES = 32  # the generated cursor.key: 64 hex characters
MIN_SECRET_BYTES = 8  # a configured cursor secret shorter than this is refused, never used


def configured(secret: bytes, source: str) -> bytes:
    if len(secret.strip()) < MIN_SECRET_BYTES:
        raise StoreUnavailable(
            f"{source} is {'empty' if not secret.strip() else 'too short'}: set at least {MIN_SECRET_BYTES} "
            "bytes to sign feed cursors",
            code="cursor_secret_invalid",
        )
    return secret


def cursor_secret(settings: Settings) -> Callable[[], bytes]:
    """Where the cursor key comes from, read on first use: the setting, a Secrets Manager secret, or
    (embedded engine only) a key generated once into MNEME_HOME."""

    @cache
    def secret() -> bytes:
        if settings.cursor_secret is not None:
            return configured(settings.cursor_secret.get_secret_value().encode(), "MNEME_CURSOR_SECRET")
        if settings.cursor_secret_arn is not None:
            from mneme.adapters.secrets import fetch_secret

            return configured(fetch_secret(settings.cursor_secret_arn), "the cursor secret")
        path = cursor_key_file(settings)
        if path is None:
            raise StoreUnavailable("set MNEME_CURSOR_SECRET_ARN (or MNEME_CURSOR_SECRET) to sign feed cursors")
        from mneme.adapters.keyfiles import create_once, read_key

        if not os.path.lexists(path):
            create_once(path, secrets.token_hex(CURSOR_KEY_BYTES))
        return read_key(path, minimum=2 * CURSOR_KEY_BYTES).encode()

    return secret


def cursor_key_file(settings: Settings) -> Path | None:
    """Where the embedded engine keeps its cursor key (None when one is configured, or in AWS)."""
    if settings.cursor_secret is not None or settings.cursor_secret_arn is not None:
        return None
    return None if isinstance(settings.store, DynamoStore) else settings.home / "cursor.key"


Provide = Callable[[], Services]
"""What a route, command or scheduled handler is given: the services to use, asked for on each call (in
Lambda `current`, so a function's services are built on its first request, not on import)."""


def current() -> Services:
    """The process-wide services, built from the settings once per cold start (a Lambda function's; a host
    that wires its own hands them to the routes, the gateway or the command instead)."""
    return _built()


@cache
def _built() -> Services:
    return build()


def close_current() -> None:
    """Close the process-wide services if this process built them (`Services.close`)."""
    if _built.cache_info().currsize:
        _built().close()


def build_authenticator(settings: Settings | None = None) -> Authenticator:
    """API-key authentication alone (the authorizer): in AWS one table read, without the other services;
    on the embedded engine, over the process's one store."""
    settings = settings or get_settings()
    if isinstance(settings.store, DynamoStore):
        return _table_authenticator(settings.store.table_name, settings.store.region)
    return Authenticator(current().store)


@cache
def _table_authenticator(table_name: str, region: str | None) -> Authenticator:
    from mneme.adapters.dynamo.keys import DynamoApiKeys

    return Authenticator(DynamoApiKeys(table_name, region_name=region))


def current_authenticator() -> Authenticator:
    return build_authenticator()


def current_usage_keys() -> UsageKeys | None:
    return usage_keys(get_settings())


def authorizer_over(services: Provide) -> tuple[Callable[[], Authenticator], Callable[[], UsageKeys | None]]:
    """What the authorizer is given over `services` instead of the process's: the key lookup on their
    store and the throttle buckets their settings name (the local gateway)."""
    return (lambda: Authenticator(services().store)), (lambda: usage_keys(services().settings))


def usage_keys(settings: Settings) -> UsageKeys | None:
    """The stage's throttle buckets (API Gateway usage-plan keys), when the stack configured them."""
    throttle = settings.throttle
    return UsageKeys(throttle.seed, throttle.buckets, throttle.pinned_digests) if throttle is not None else None


def current_settings() -> Settings:
    return get_settings()


def reset() -> None:
    """Forget the services built and the settings (tests, or after changing the environment)."""
    _built.cache_clear()
    _table_authenticator.cache_clear()
    get_settings.cache_clear()
