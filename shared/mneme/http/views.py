"""Response bodies of the HTTP API: one typed model per answer. The OpenAPI document and the Python client
both use these; the fuzz suite checks every answer against them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mneme.http.schemas import MemoryView
from mneme.models import Role
from mneme.records import RunStatus, StageReport
from mneme.services.remember import Remembered
from mneme.structure_models import Operation, Preview


class ErrorDetail(BaseModel):
    code: str = Field(examples=["scope_not_found"])
    message: str = Field(examples=["scope root.acme.payroll does not exist"])
    details: Any = None


class ErrorBody(BaseModel):
    """Every error: a stable `code`, a human `message` and optional structured `details`."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})
    error: ErrorDetail


class Health(BaseModel):
    """`ok`, or `degraded` with a line for each part that is (the embedded engine only)."""

    status: Literal["ok", "degraded"]
    version: str
    index: str | None = Field(None, description="the search index being rebuilt, and why")
    store: str | None = Field(None, description="the store that cannot be read, and why")
    cursor_key: str | None = Field(None, description="the cursor key that cannot be used (paging answers 503)")


class Caller(BaseModel):
    """Who the API key names: its tenant, principal and roles (least first)."""

    tenant: str
    principal: str
    roles: list[Role]


class ScopeView(BaseModel):
    path: str
    scope_id: str
    depth: int
    alias: str | None = None  # set by a rename: the old path, which keeps resolving
    aliases: list[str] | None = None  # GET /v1/scopes?aliases=true: every old path that resolves here


class RenamePreview(BaseModel):
    """A rename with `dry_run: true`: the preview a structure draft of it would show; nothing changed."""

    dry_run: Literal[True]
    preview: Preview


class ScopeList(BaseModel):
    scopes: list[ScopeView]


class LayerNames(BaseModel):
    layers: dict[str, str] = Field(examples=[{"1": "clients", "2": "services"}])


class Erasure(BaseModel):
    path: str
    dry_run: bool
    counts: dict[str, Any]


class MemoryRecord(MemoryView):
    """A curated memory as the API returns it (`MemoryView` plus its body and routing fields)."""

    body: str
    summary: str | None = None
    tags: list[str] = []
    triggers: list[str] = []
    confidence: float | None = None
    valid_until: datetime | None = None
    review_due: datetime | None = None
    depends_on: list[str] = []
    search_text: str | None = None  # what recall searches it by, when not its own text ("": not searched)
    pending_revision: dict[str, Any] | None = None  # an edit to a published memory, awaiting approval
    rejected_revision: dict[str, Any] | None = None


class MemoryPage(BaseModel):
    """The memories of a scope and every scope under it, as retrieve shows them to the caller, by scope path
    (`target`), key and id; `next_cursor` gives the next page (null: the end was reached)."""

    memories: list[MemoryRecord]
    next_cursor: str | None = None
    has_more: bool


class MemoryHistory(BaseModel):
    memory_id: str
    history: list[dict[str, Any]]


class Reviews(BaseModel):
    """Approvers get the `queue`; everyone else (or `mine=true`) their own proposals: pending creates
    (`kind: create`) and revisions (`kind: revision`), with decisions and reasons."""

    queue: list[dict[str, Any]] | None = None
    mine: list[dict[str, Any]] | None = None


class DraftView(BaseModel):
    draft_id: str
    author: str
    operations: list[Operation]
    status: Literal["open", "published", "discarded"]
    created_at: datetime
    published_at: datetime | None = None
    published_by: str | None = None
    preview: Preview


class KeyView(BaseModel):
    key_id: str
    tenant: str
    principal: str
    roles: list[str]
    created_at: datetime
    revoked_at: datetime | None = None


class CreatedKey(KeyView):
    api_key: str  # the secret: shown once, never stored by Mneme
    note: str | None = None


class KeyList(BaseModel):
    keys: list[KeyView]


class Revoked(BaseModel):
    key_id: str
    revoked: Literal[True]


class RememberedBatch(BaseModel):
    episode_ids: list[str]
    items: list[Remembered]


class Diagnostic(BaseModel):
    code: str
    message: str
    span: dict[str, int]  # line, column, offset, length
    severity: str
    recovery: str
    strict_impact: bool


class SttpValidation(BaseModel):
    ok: bool
    strict_valid: bool
    profile: Literal["strict", "tolerant"]
    diagnostics: list[Diagnostic]
    canonical: str | None = None


class Change(BaseModel):
    """One entry of the change feed: what changed (`kind`, `id`) and the record as it is now. A tombstone
    (`deleted`: the record was erased) carries the kind and id only."""

    position: str
    kind: str
    id: str
    record: dict[str, Any] | None = None
    deleted: bool = False


class ChangesPage(BaseModel):
    changes: list[Change]
    next_cursor: str | None = None
    has_more: bool


class RunStarted(BaseModel):
    run_id: str
    status: RunStatus
    scopes: list[str]


class RunView(BaseModel):
    """A consolidation run: status, per-stage counters and errors (extract counts reasoner calls and tokens),
    the facts it wrote, the windows it set aside (with why) and those set aside before that it offered again."""

    run_id: str
    status: RunStatus
    scopes: list[str] = []
    stages: dict[str, StageReport] = {}
    started_at: datetime
    finished_at: datetime | None = None
    requested_by: str
    facts: list[dict[str, Any]] = Field(
        default=[], description="facts it wrote or reinforced (the first 100): fact_id, scope_id, summary, status"
    )
    set_aside: list[dict[str, Any]] = Field(
        default=[],
        description="windows it set aside, to be offered again after a backoff (the first 50): scope_id, stage, "
        "reason, episodes, episode_ids (first 5)",
    )
    returned: list[dict[str, Any]] = Field(
        default=[],
        description="windows set aside before that it offered again (the first 50): scope_id, outcome "
        "(consolidated, set aside again, given up), attempts, episodes, episode_ids (first 5)",
    )

    @property
    def finished(self) -> bool:
        return self.status != "running"

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [error for report in self.stages.values() for error in report.errors]


class RunList(BaseModel):
    """The most recent consolidation runs, newest first."""

    runs: list[RunView]


class EpisodeRecord(BaseModel):
    """An episode as remembered (its content never changes), with the facts drawn from it when fetched alone."""

    id: str
    kind: Literal["episode"]
    scope: str
    content: str
    occurred_at: datetime
    created_at: datetime
    session_id: str | None = None
    sequence: int = Field(0, description="its place among the turns one call gave (0, 1, 2, ...)")
    tier: str
    metadata: dict[str, Any] = {}
    format: str
    author: str
    sttp: dict[str, Any] | None = None
    facts: list[FactRecord] | None = None  # GET /v1/episodes/{id}: the facts drawn from it


class FactRecord(BaseModel):
    """A fact consolidation drew from episodes (or a roll-up of a period), with its sources and corrections when
    fetched alone. `version` is what a correction (PATCH) sends back."""

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
    changed_by: str | None = None  # the later episode that changed its subject (then stale)
    changed_at: datetime | None = None
    version: int
    created_at: datetime
    updated_at: datetime
    reinforced_at: datetime
    sources: list[EpisodeRecord] | None = None  # GET /v1/facts/{id}: its source episodes still remembered
    missing_sources: list[str] | None = None  # ... and the ids of those forgotten or erased since
    history: list[dict[str, Any]] | None = None  # ... and its corrections: who, when, before and after, why
    settled: list[Settled] | None = None  # PATCH: the roll-ups composed again, the summaries retracted


class EpisodePage(BaseModel):
    """Episodes newest remembered first (the turns of one call by their `sequence`, the last first);
    `next_cursor` gives the next page (null: the end was reached)."""

    episodes: list[EpisodeRecord]
    next_cursor: str | None = None
    has_more: bool


class FactPage(BaseModel):
    """Facts newest first; `next_cursor` gives the next page (null: the end was reached)."""

    facts: list[FactRecord]
    next_cursor: str | None = None
    has_more: bool


class Settled(BaseModel):
    id: str
    action: Literal["retracted", "regrounded", "stale", "rebuilt"]


class Forgot(BaseModel):
    """A record forgotten: gone from search at once, a tombstone in the change feed, and what was derived from it
    settled (`settled`: facts retracted, re-grounded on their other sources, marked stale or rebuilt)."""

    id: str
    kind: Literal["episode", "fact"]
    forgotten: Literal[True]
    settled: list[Settled]
