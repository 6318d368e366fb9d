"""Records as the domain sees them. Stores persist them; services build them."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NamedTuple, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

# Who calls lives in its own module (the authorizer's cold start loads only it); named here too.
from mneme.identity import ApiKey as ApiKey
from mneme.identity import Principal as Principal
from mneme.identity import Role as Role


def convertible_to_utc(value: datetime) -> datetime:
    if value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValueError("the time is out of range once converted to UTC") from None
    return value


def not_a_number(value: object) -> object:
    """A time is text (ISO 8601): pydantic would read a number as seconds, or as milliseconds past 2e10,
    so that `occurred_at: 1714555800000` and `-5e10` mean dates nobody wrote. Refused instead."""
    if isinstance(value, int | float):
        raise ValueError("a time is an ISO 8601 string with a timezone (e.g. 2024-05-01T09:30:00Z), not a number")
    return value


Timestamp = Annotated[datetime, BeforeValidator(not_a_number), AfterValidator(convertible_to_utc)]
"""A time from a client: ISO 8601 text, never a number; with an offset, it must stay within datetime's range
in UTC (0001-01-01T00:00+14:00 does not)."""


class Scope(BaseModel):
    """A node of a tenant's tree. Its path is derived from parent links, so renames touch one record."""

    tenant: str
    scope_id: str
    parent_id: str | None
    segment: str
    depth: int
    created_at: datetime
    updated_at: datetime


class ResolvedScope(BaseModel):
    """A scope with its canonical path and its ancestors, root first, itself last."""

    scope: Scope
    path: str
    chain: list[Scope]
    via_alias: bool = False


MemoryStatus = Literal["pending", "published", "archived"]
MemoryKind = Literal["scoped", "tagged"]


class Memory(BaseModel):
    """Curated guidance. Scoped memories attach to `scope_id`; tagged ones to `layer` (and `value`).

    `value is None` on a tagged memory means layer-wide.
    """

    tenant: str
    memory_id: str
    kind: MemoryKind
    key: str
    body: str
    status: MemoryStatus
    version: int = 1
    author: str
    created_at: datetime
    updated_at: datetime
    scope_id: str | None = None
    layer: str | None = None
    value: str | None = None
    summary: str | None = None
    tags: list[str] = Field(default_factory=list)
    triggers: list[str] = Field(default_factory=list)
    confidence: float | None = None
    valid_until: datetime | None = None
    review_due: datetime | None = None
    depends_on: list[str] = Field(default_factory=list)
    # What recall searches it by (BM25 and vector) instead of its key, summary, tags, triggers and body;
    # "" keeps it out of search: retrieve, listings and fetches by id still show it.
    search_text: str | None = None

    def uniqueness_key(self) -> str:
        """Where the key is held: one published memory per key and target, and beside it one pending
        draft per author (a draft does not hold the key against other writers, who cannot see it)."""
        target = f"scoped#{self.scope_id}" if self.kind == "scoped" else f"tagged#{self.layer}#{self.value or '*'}"
        return f"{target}#{self.key}{self.pending_suffix()}"

    def published_key(self) -> str:
        """The uniqueness key the published memory of this key and target holds."""
        return self.model_copy(update={"status": "published"}).uniqueness_key()

    def pending_suffix(self) -> str:
        return f"#PENDING#{self.author}" if self.status == "pending" else ""


Tier = Literal["raw", "daily", "weekly", "monthly", "quarterly", "yearly"]
TIERS: tuple[str, ...] = get_args(Tier)


class Episode(BaseModel):
    """A raw observation. Immutable once written; its id derives from its idempotency key."""

    tenant: str
    episode_id: str
    scope_id: str
    content: str
    content_hash: str
    occurred_at: datetime
    created_at: datetime
    author: str
    session_id: str | None = None
    sequence: int = 0  # its place among the turns one call gave (a conversation's messages: 0, 1, 2, …)
    tier: Tier = "raw"
    metadata: dict[str, Any] = Field(default_factory=dict)
    format: Literal["text", "sttp"] = "text"
    model_id: str | None = None
    vector: list[float] | None = None
    indexed: bool = False
    archived: bool = False  # by a structure delete; kept, never recalled
    search_text: str | None = None  # what is embedded and indexed when it differs from `content` (STTP)
    structured: dict[str, Any] | None = None  # an STTP node's AVEC, metrics, provenance, envelope, content


class SessionPosition(NamedTuple):
    """Where a turn stands in its session: by when it was said, then by when it was given and its place in
    that call. An exported chat log gives every turn of a session one time; the order the turns were given
    in then decides (turns of one call by their sequence, later calls after earlier ones)."""

    occurred_at: datetime
    created_at: datetime
    sequence: int


def session_position(episode: Episode) -> SessionPosition:
    return SessionPosition(episode.occurred_at, episode.created_at, episode.sequence)


IMPLICIT_SESSION = "~at:"  # outside the session id pattern: no given session id reads as one
TURN_KEYS = frozenset({"speaker", "role"})  # what differs between the turns of one conversation


def context_session(episode: Episode) -> str | None:
    """The session a turn is searched with (`Indexer.session_context`): its `session_id`; else, for a turn
    of a conversation (a `metadata.speaker`), the instant it was said with the rest of its metadata. An
    exported chat log that gives every turn of a session the session's one time, and no id, keeps each
    reply with the question before it; turns of another partition (other metadata) never share context."""
    if episode.session_id is not None:
        return episode.session_id
    if not isinstance(episode.metadata.get("speaker"), str):
        return None
    rest = {key: value for key, value in episode.metadata.items() if key not in TURN_KEYS}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{IMPLICIT_SESSION}{episode.occurred_at.astimezone(UTC).isoformat()}:{digest}"


class Revision(BaseModel):
    """A writer's pending edit of a published memory: one open revision per author per memory."""

    tenant: str
    memory_id: str
    author: str
    base_version: int
    changes: dict[str, Any]
    status: Literal["open", "approved", "rejected"] = "open"
    reason: str | None = None
    decided_by: str | None = None
    created_at: datetime
    updated_at: datetime


class HistoryEntry(BaseModel):
    """One step of a memory's life: who, when, what changed (field: [before, after]), approved by whom. A fact's
    corrections are kept the same way (`memory_id` is then the fact's id, `action` `corrected`)."""

    tenant: str
    memory_id: str
    version: int
    action: Literal[
        "created", "edited", "approved", "rejected", "archived", "revision_approved", "revision_rejected", "corrected"
    ]
    actor: str
    approved_by: str | None = None
    status: MemoryStatus | Literal["active", "superseded", "expired"]
    changes: dict[str, list[Any]] = Field(default_factory=dict)
    reason: str | None = None
    at: datetime


class Forgotten(BaseModel):
    """What is left of a forgotten episode or fact: who forgot it, when and why (its content is gone). Kept until
    its scope is erased."""

    tenant: str
    record_id: str
    kind: Literal["episode", "fact"]
    scope_id: str
    forgotten_by: str
    forgotten_at: datetime
    reason: str | None = None
