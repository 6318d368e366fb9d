"""The composition root: the only place concrete adapters are chosen."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

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
# that needs only part of the graph (the authorizer: `current_authenticator`) does not load the rest.
if TYPE_CHECKING:
    from mneme.adapters.opensearch_index import OpenSearchIndex as OpenSearchAdapter
    from mneme.consolidation.reasoning import Reasoner
    from mneme.consolidation.service import ConsolidationService, Orchestrator
    from mneme.ports import Clock, Embedder, RecordStore, SearchIndex
    from mneme.services.feed import FeedService
    from mneme.services.forgetting import ForgetService
    from mneme.services.indexing import Indexer
    from mneme.services.keys import KeyService
    from mneme.services.memories import MemoryService
    from mneme.services.portability import PortabilityService
    from mneme.services.recall import RecallService
    from mneme.services.records import RecordsService
    from mneme.services.remember import RememberService
    from mneme.services.retrieval import RetrievalService
    from mneme.services.review import ReviewService
    from mneme.services.scopes import ScopeService
    from mneme.services.structure import StructureService


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class Services:
    store: RecordStore
    clock: Clock
    embedder: Embedder
    index: SearchIndex
    scopes: ScopeService
    memories: MemoryService
    retrieval: RetrievalService
    keys: KeyService
    indexer: Indexer
    remember: RememberService
    recall: RecallService
    consolidation: ConsolidationService
    review: ReviewService
    feed: FeedService
    portability: PortabilityService
    structure: StructureService
    records: RecordsService
    forgetting: ForgetService


def build_store(settings: Settings) -> RecordStore:
    if isinstance(settings.store, DynamoStore):
        from mneme.adapters.dynamo_store import DynamoRecordStore

        return DynamoRecordStore(settings.store.table_name, region_name=settings.store.region)
    from mneme.adapters.sqlite_store import SqliteRecordStore

    return SqliteRecordStore(settings.sqlite_path)


def build_embedder(settings: Settings) -> Embedder:
    if isinstance(settings.embedder, BedrockEmbedderSettings):
        from mneme.adapters.embedders import BedrockEmbedder

        return BedrockEmbedder(
            bedrock_model_id=settings.embedder.model_id,
            dimensions=settings.embedder.dimensions,
            region_name=settings.embedder.region,
            max_attempts=settings.embedder.max_attempts,
            read_timeout=settings.embedder.timeout_seconds,
        )
    from mneme.adapters.embedders import local_embedder

    return local_embedder(settings.embedder.model, threads=settings.embedder.threads, int8=settings.embedder.int8)


def build_index(settings: Settings, dimension: int) -> SearchIndex:
    if isinstance(settings.index, OpenSearchIndex):
        return build_opensearch_index(settings.index, dimension=dimension)
    from mneme.adapters.sqlite_index import SqliteSearchIndex

    return SqliteSearchIndex(settings.index_path)


def build_opensearch_index(settings: OpenSearchIndex, *, dimension: int | None = None) -> OpenSearchAdapter:
    """A SigV4-signed client for `settings.endpoint`: service `es` is a managed domain whose writes wait for
    the refresh (`visibility_lag` 0), `aoss` a Serverless collection whose `visibility_lag` is
    `settings.fresh_window_seconds`. `dimension` creates the index when it is missing (managed domains)."""
    from mneme.adapters.opensearch_auth import signed_client

    client = signed_client(settings)
    if settings.service == "aoss":
        from mneme.adapters.opensearch_serverless import ServerlessOpenSearchIndex

        lag = settings.fresh_window_seconds
        return ServerlessOpenSearchIndex(client, settings.index_name, dimension=dimension, visibility_lag=lag)
    from mneme.adapters.opensearch_index import OpenSearchIndex as OpenSearchAdapter

    return OpenSearchAdapter(client, settings.index_name, dimension=dimension, refresh=True)


def build_reasoner(settings: Settings) -> Reasoner:
    if isinstance(settings.reasoner, BedrockReasonerSettings):
        from mneme.adapters.reasoners import BedrockReasoner

        return BedrockReasoner(settings.reasoner.model_id, region_name=settings.reasoner.region)
    if isinstance(settings.reasoner, OpenAIReasonerSettings):
        from mneme.adapters.reasoners import OpenAIReasoner

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
    from mneme.consolidation.service import ConsolidationService
    from mneme.consolidation.stages import Deps
    from mneme.services.cursors import Cursors
    from mneme.services.feed import FeedService
    from mneme.services.forgetting import ForgetService
    from mneme.services.indexing import Indexer
    from mneme.services.keys import KeyService
    from mneme.services.memories import MemoryService
    from mneme.services.portability import PortabilityService
    from mneme.services.recall import RecallService
    from mneme.services.records import RecordsService
    from mneme.services.remember import RememberService
    from mneme.services.retrieval import RetrievalService
    from mneme.services.review import ReviewService
    from mneme.services.scopes import ScopeService
    from mneme.services.structure import StructureService

    settings = settings or get_settings()
    store = store or build_store(settings)
    clock = clock or SystemClock()
    embedder = embedder or build_embedder(settings)
    index = index or build_index(settings, embedder.dimension)
    scopes = ScopeService(store, clock)
    indexer = Indexer(store, scopes, embedder, index)
    memories = MemoryService(store, clock, scopes, on_change=indexer.on_memory_change)
    deps = Deps(store, clock, embedder, reasoner or build_reasoner(settings), indexer, settings.consolidation)
    consolidation = ConsolidationService(deps, scopes)
    if background:
        consolidation.orchestrator = build_orchestrator(settings, consolidation)
    secret = cursor_secret(settings)
    records = RecordsService(store, scopes, Cursors(secret))
    return Services(
        store=store,
        clock=clock,
        embedder=embedder,
        index=index,
        scopes=scopes,
        memories=memories,
        retrieval=RetrievalService(store, clock, scopes, memories),
        keys=KeyService(store, clock),
        indexer=indexer,
        remember=RememberService(store, clock, scopes, embedder, indexer),
        recall=RecallService(store, clock, scopes, embedder, index),
        consolidation=consolidation,
        review=ReviewService(store, clock, memories, scopes),
        feed=FeedService(store, secret),
        portability=PortabilityService(store, clock, scopes, indexer),
        structure=StructureService(store, clock, scopes, indexer),
        records=records,
        forgetting=ForgetService(store, clock, embedder, indexer, records),
    )


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
        if isinstance(settings.store, DynamoStore):
            raise StoreUnavailable("set MNEME_CURSOR_SECRET_ARN (or MNEME_CURSOR_SECRET) to sign feed cursors")
        from mneme.local.keyfiles import create_once, read_key

        path = settings.home / "cursor.key"
        if not path.exists():
            create_once(path, secrets.token_hex(CURSOR_KEY_BYTES))
        return read_key(path, minimum=2 * CURSOR_KEY_BYTES).encode()

    return secret


@cache
def current() -> Services:
    """The process-wide services, built once per cold start."""
    return build()


def build_authenticator(settings: Settings | None = None) -> Authenticator:
    """API-key authentication alone (the authorizer): in AWS one table read, without the other services;
    on the embedded engine, over the process's one store."""
    settings = settings or get_settings()
    if isinstance(settings.store, DynamoStore):
        return _table_authenticator(settings.store.table_name, settings.store.region)
    return Authenticator(current().store)


@cache
def _table_authenticator(table_name: str, region: str | None) -> Authenticator:
    from mneme.adapters.dynamo_keys import DynamoApiKeys

    return Authenticator(DynamoApiKeys(table_name, region_name=region))


def current_authenticator() -> Authenticator:
    return build_authenticator()


def current_usage_keys() -> UsageKeys | None:
    """The stage's throttle buckets (API Gateway usage-plan keys), when the stack configured them."""
    throttle = get_settings().throttle
    return UsageKeys(throttle.seed, throttle.buckets) if throttle is not None else None


def current_settings() -> Settings:
    return get_settings()


def reset() -> None:
    """Forget the cached services and settings (tests, or after changing the environment)."""
    current.cache_clear()
    _table_authenticator.cache_clear()
    get_settings.cache_clear()
