"""Every route's request and response, as pydantic models named as in the API's OpenAPI document.

Requests forbid unknown fields and carry the API's bounds, so a mistake fails here with the API's
`invalid_input` shape before a byte is sent. Responses keep fields they do not declare (a newer
server's additions survive a round trip). `tests/integration/test_sdk.py` checks these models
against `docs/openapi.json`: same names, same fields, same required ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

Path = Annotated[str, Field(min_length=4, max_length=600)]
Short = Annotated[str, Field(min_length=1, max_length=128)]
Tier = Literal["raw", "daily", "weekly", "monthly", "quarterly", "yearly"]
Kind = Literal["episode", "fact", "memory"]
RunStatus = Literal["running", "succeeded", "partial", "failed"]
Role = Literal["reader", "writer", "approver", "admin"]
Profile = Literal["strict", "tolerant"]
Strictness = Literal["precision", "balanced", "recall"]  # recall's relevance floor, strictest first


# defer_build: a model's validator is built on its first use, not at import (half of the import time).
class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Response(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)


# -- requests -------------------------------------------------------------------------------------


class RetrieveRequest(Request):
    path: Path


class RememberItem(Request):
    scope: Path
    content: Annotated[str, Field(min_length=1)]
    occurred_at: AwareDatetime | None = None
    session_id: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")] | None = None
    tier: Tier = "raw"
    metadata: dict[str, Any] | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    create_scope: bool = False
    format: Literal["text", "sttp"] = "text"
    profile: Profile = "strict"


class Message(Request):
    """One turn of a conversation: who said it (`name`, else `role`) and what they said."""

    role: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    name: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    content: Annotated[str, Field(min_length=1)]
    occurred_at: AwareDatetime | None = None


class Conversation(Request):
    """A conversation's messages in order: one episode each, the speaker in `metadata.speaker`."""

    scope: Path
    messages: Annotated[list[Message], Field(min_length=1, max_length=100)]
    session_id: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")] | None = None
    occurred_at: AwareDatetime | None = None
    metadata: dict[str, Any] | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    create_scope: bool = False


class CorrectFactRequest(Request):
    """A correction of a fact at `version`: at least one field besides `reason`."""

    version: Annotated[int, Field(ge=1)]
    summary: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    entity: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    property: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    value: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    valid_until: AwareDatetime | None = None
    reason: Annotated[str, Field(min_length=1, max_length=2000)] | None = None


class RememberBatch(Request):
    items: Annotated[list[RememberItem], Field(min_length=1, max_length=100)]


class Avec(Request):
    """An attractor state (STTP): each dimension in [0, 1]."""

    stability: Annotated[float, Field(ge=0, le=1)]
    friction: Annotated[float, Field(ge=0, le=1)]
    logic: Annotated[float, Field(ge=0, le=1)]
    autonomy: Annotated[float, Field(ge=0, le=1)]


class Disclosure(Request):
    expand_top: Annotated[int, Field(ge=0, le=50)] = 3
    budget_tokens: Annotated[int, Field(ge=32, le=200_000)] | None = None


class Scoring(Request):
    alpha: Annotated[float, Field(ge=0, le=1)] = 0.7
    beta: Annotated[float, Field(ge=0, le=1)] = 0.3
    resonance: Annotated[float, Field(ge=0, le=1)] = 0.0
    strictness: Strictness = "balanced"
    fallback: Literal["never", "on_empty", "always"] = "on_empty"


class RecallRequest(Request):
    query: Annotated[str, Field(min_length=1)] | None = None
    scope: Path = "root"
    ids: Annotated[list[str], Field(min_length=1, max_length=200)] | None = None
    kinds: Annotated[list[Kind], Field(min_length=1)] | None = None
    tiers: Annotated[list[Tier], Field(min_length=1)] | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    as_of: AwareDatetime | None = None
    session_id: Annotated[str, Field(max_length=128)] | None = None
    delta: bool = False
    limit: Annotated[int, Field(ge=1, le=200)] = 10
    avec: Avec | None = None
    scoring: Scoring | None = None
    disclosure: Disclosure | None = None
    explain: bool = False
    metadata: dict[str, Any] | None = None  # top-level metadata: a value, or a list of values (any of them)


class ConsolidateRequest(Request):
    scopes: Annotated[list[Path], Field(max_length=100)] | None = None


class CreateScopeRequest(Request):
    path: Path
    parents: bool = False


class RenameScopeRequest(Request):
    path: Path
    new_path: Path
    dry_run: bool = False


class LayersRequest(Request):
    layers: Annotated[dict[str, Annotated[str, Field(min_length=1, max_length=63)]], Field(max_length=8)]


class CreateMemoryRequest(Request):
    key: Short
    body: Annotated[str, Field(min_length=1, max_length=16_384)]
    scope: Path | None = None
    tag: Annotated[str, Field(min_length=3, max_length=130)] | None = None
    summary: Annotated[str, Field(max_length=1024)] | None = None
    tags: Annotated[list[Short], Field(max_length=32)] | None = None
    triggers: Annotated[list[Short], Field(max_length=32)] | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    valid_until: AwareDatetime | None = None
    review_due: AwareDatetime | None = None
    depends_on: Annotated[list[Short], Field(max_length=32)] | None = None
    search_text: Annotated[str, Field(max_length=16_384)] | None = None  # "": kept out of recall's search


class EditMemoryRequest(Request):
    body: Annotated[str, Field(min_length=1, max_length=16_384)] | None = None
    summary: Annotated[str, Field(max_length=1024)] | None = None
    tags: Annotated[list[Short], Field(max_length=32)] | None = None
    triggers: Annotated[list[Short], Field(max_length=32)] | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    valid_until: AwareDatetime | None = None
    review_due: AwareDatetime | None = None
    depends_on: Annotated[list[Short], Field(max_length=32)] | None = None
    search_text: Annotated[str, Field(max_length=16_384)] | None = None  # null: searched by its own text again
    version: Annotated[int, Field(ge=1)] | None = None


class DecisionRequest(Request):
    author: Short | None = None
    reason: Annotated[str, Field(min_length=1, max_length=2000)] | None = None


class RejectRequest(Request):
    reason: Annotated[str, Field(min_length=1, max_length=2000)]
    author: Short | None = None


class Move(Request):
    op: Literal["move"]
    path: Path
    new_parent: Path


class Merge(Request):
    op: Literal["merge"]
    path: Path
    into: Path


class Delete(Request):
    """Delete a subtree: its memories are archived; its episodes and facts are archived (`records:
    "archive"`) or moved into another scope (`records: "move"`, `into`)."""

    op: Literal["delete"]
    path: Path
    records: Literal["archive", "move"]
    into: Path | None = None


class Layers(Request):
    op: Literal["layers"]
    layers: Annotated[dict[str, Annotated[str, Field(min_length=1, max_length=63)]], Field(max_length=8)]


class Rename(Request):
    op: Literal["rename"]
    path: Path
    new_path: Path


Operation = Annotated[Move | Rename | Merge | Delete | Layers, Field(discriminator="op")]


class DraftRequest(Request):
    operations: Annotated[list[Operation], Field(min_length=1, max_length=50)]


class PublishRequest(Request):
    fingerprint: Annotated[str, Field(min_length=1, max_length=64)]


class CreateKeyRequest(Request):
    principal: Short
    roles: Annotated[list[Role], Field(min_length=1, max_length=4)]


class ValidateRequest(Request):
    text: Annotated[str, Field(min_length=1, max_length=1_048_576)]
    profile: Profile = "strict"


class NoBody(Request):
    """The body of a route that takes none."""


# -- responses ------------------------------------------------------------------------------------


class ErrorDetail(Response):
    code: str
    message: str
    details: Any = None


class ErrorBody(Response):
    error: ErrorDetail


class Health(Response):
    """`ok`, or `degraded` with a line for each part that is (`index`, `store`, `cursor_key`)."""

    status: Literal["ok", "degraded"]
    version: str
    index: str | None = None
    store: str | None = None
    cursor_key: str | None = None


class Caller(Response):
    """Who the API key names: its tenant, principal and roles (least first)."""

    tenant: str
    principal: str
    roles: list[Role]


class Block(Response):
    kind: Literal["scoped", "tagged"]
    target: str
    depth: int
    priority: int
    key: str
    memory_id: str
    version: int
    pending: bool
    body: str


class Bundle(Response):
    path: str
    canonical_path: str
    blocks: list[Block]
    markdown: str


class Remembered(Response):
    episode_id: str
    created: bool
    indexed: bool
    # "embedding_deferred": stored and found by its words; searchable by meaning once the index repair embeds it
    warnings: list[str] = Field(default_factory=list)


class RememberedBatch(Response):
    episode_ids: list[str]
    items: list[Remembered]


class Result(Response):
    """One recall hit: an episode, a fact or a curated memory."""

    id: str
    kind: Kind
    scope: str
    content: str
    score: float
    scores: dict[str, float]
    occurred_at: datetime
    created_at: datetime
    tier: str | None = None
    session_id: str | None = None
    sequence: int | None = None  # an episode's place among the turns its call gave (0, 1, 2, ...)
    metadata: dict[str, Any] = {}
    key: str | None = None
    status: str | None = None
    requires: list[str] = []
    fact: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    sttp: dict[str, Any] | None = None
    since_changed: dict[str, str] | None = None  # an earlier statement: a later one updates it (by, at, why)


class RecallResponse(Response):
    results: list[Result]
    retrieval_path: Literal["hybrid", "vector", "lexical", "lexical_fallback"]
    context: str
    explain: dict[str, Any] | None = None
    # "scope_not_found": nothing was ever written under the scope path, so the answer is empty (not a 404)
    warnings: list[str] = Field(default_factory=list)


class StageReport(Response):
    counters: dict[str, int] = {}
    errors: list[dict[str, Any]] = []


class RunStarted(Response):
    run_id: str
    status: RunStatus
    scopes: list[str]


class RunView(Response):
    """A consolidation run: status, per-stage counters and errors."""

    run_id: str
    status: RunStatus
    scopes: list[str] = []
    stages: dict[str, StageReport] = {}
    started_at: datetime
    finished_at: datetime | None = None
    requested_by: str
    facts: list[dict[str, Any]] = []  # the facts it wrote or reinforced (the first 100)
    set_aside: list[dict[str, Any]] = []  # the windows it set aside, each with its reason and episodes
    returned: list[dict[str, Any]] = []  # the windows set aside before that it offered again, with the outcome

    @property
    def finished(self) -> bool:
        return self.status != "running"

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [error for report in self.stages.values() for error in report.errors]


class RunList(Response):
    runs: list[RunView]


class ScopeView(Response):
    scope_id: str
    path: str
    depth: int
    alias: str | None = None
    aliases: list[str] | None = None


class ScopeList(Response):
    scopes: list[ScopeView]


class LayerNames(Response):
    layers: dict[str, str]


class Erasure(Response):
    path: str
    dry_run: bool
    counts: dict[str, Any]


class MemoryView(Response):
    """A curated memory named without its body (what archiving answers)."""

    memory_id: str
    kind: str
    target: str
    key: str
    status: str
    version: int
    author: str
    created_at: datetime
    updated_at: datetime


class MemoryRecord(MemoryView):
    """A curated memory: its routing (`target`: a scope path or a tag), status, version and body."""

    body: str
    summary: str | None = None
    tags: list[str] = []
    triggers: list[str] = []
    confidence: float | None = None
    valid_until: datetime | None = None
    review_due: datetime | None = None
    depends_on: list[str] = []
    search_text: str | None = None  # what recall searches it by, when not its own text ("": not searched)
    pending_revision: dict[str, Any] | None = None
    rejected_revision: dict[str, Any] | None = None


class MemoryHistory(Response):
    memory_id: str
    history: list[dict[str, Any]]


class Reviews(Response):
    """Approvers get the `queue`; everyone else (or `mine=true`) their own proposals."""

    queue: list[dict[str, Any]] | None = None
    mine: list[dict[str, Any]] | None = None


class Preview(Response):
    path_changes: list[tuple[str, str | None]]
    aliases: list[tuple[str, str]]
    memories: list[dict[str, str]]
    tagged: list[dict[str, str]] = []
    records: list[dict[str, Any]]
    conflicts: list[str]
    fingerprint: str


class DraftView(Response):
    draft_id: str
    author: str
    operations: list[Operation]
    status: Literal["open", "published", "discarded"]
    created_at: datetime
    published_at: datetime | None = None
    published_by: str | None = None
    preview: Preview


class KeyView(Response):
    key_id: str
    tenant: str
    principal: str
    roles: list[str]
    created_at: datetime
    revoked_at: datetime | None = None


class CreatedKey(KeyView):
    api_key: str  # the secret: shown once
    note: str | None = None


class KeyList(Response):
    keys: list[KeyView]


class Revoked(Response):
    key_id: str
    revoked: Literal[True]


class Diagnostic(Response):
    code: str
    message: str
    span: dict[str, int]
    severity: str
    recovery: str
    strict_impact: bool


class SttpValidation(Response):
    ok: bool
    strict_valid: bool
    profile: Profile
    diagnostics: list[Diagnostic]
    canonical: str | None = None


class Change(Response):
    """One entry of the change feed; a tombstone (`deleted`) carries the kind and id only."""

    position: str
    kind: str
    id: str
    record: dict[str, Any] | None = None
    deleted: bool = False


class ChangesPage(Response):
    changes: list[Change]
    next_cursor: str | None = None
    has_more: bool


class RenamePreview(Response):
    """A rename's dry run: the preview a structure draft of it would show; nothing changed."""

    dry_run: Literal[True]
    preview: Preview


# -- episodes and facts as records -------------------------------------------------------------------


class EpisodeRecord(Response):
    """An episode as remembered, with the facts drawn from it when fetched alone."""

    id: str
    kind: Literal["episode"]
    scope: str
    content: str
    occurred_at: datetime
    created_at: datetime
    session_id: str | None = None
    sequence: int = 0  # its place among the turns its call gave (0, 1, 2, ...)
    tier: str
    metadata: dict[str, Any] = {}
    format: str
    author: str
    sttp: dict[str, Any] | None = None
    facts: list[FactRecord] | None = None


class FactRecord(Response):
    """A fact, with its sources, the ids of sources forgotten since and its corrections when fetched alone."""

    id: str
    kind: Literal["fact"]
    scope: str
    tier: str
    entity: str | None = None
    property: str | None = None
    value: str | None = None
    summary: str
    confidence: float
    source_episode_ids: list[str]
    valid_from: datetime
    valid_until: datetime | None = None
    superseded_by: str | None = None
    status: str
    stale: bool
    changed_by: str | None = None  # the later episode that changed its subject (the fact is then stale)
    changed_at: datetime | None = None
    version: int
    created_at: datetime
    updated_at: datetime
    reinforced_at: datetime
    sources: list[EpisodeRecord] | None = None
    missing_sources: list[str] | None = None
    history: list[dict[str, Any]] | None = None
    settled: list[Settled] | None = None  # a correction: what carried the old value, settled


class MemoryPage(Response):
    memories: list[MemoryRecord]
    next_cursor: str | None = None
    has_more: bool


class EpisodePage(Response):
    episodes: list[EpisodeRecord]
    next_cursor: str | None = None
    has_more: bool


class FactPage(Response):
    facts: list[FactRecord]
    next_cursor: str | None = None
    has_more: bool


class Settled(Response):
    id: str
    action: Literal["retracted", "regrounded", "stale", "rebuilt"]


class Forgot(Response):
    """A record forgotten for good, and what became of the facts derived from it."""

    id: str
    kind: Literal["episode", "fact"]
    forgotten: Literal[True]
    settled: list[Settled]
