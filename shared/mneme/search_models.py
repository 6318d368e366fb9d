"""What the search index stores and how it is queried (see `mneme.ports.SearchIndex`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DocKind = Literal["episode", "fact", "memory"]


class IndexDocument(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    tenant: str
    doc_id: str
    kind: DocKind
    scope_id: str
    ancestor_ids: list[str]  # root first, the scope itself last
    text: str
    # The date words of occurred_at when `text` ends with them (episodes): an index that keeps
    # dates in a field of their own (SQLite) strips them from the text and matches them only
    # for a query with a date in it.
    dates: str | None = None
    vector: list[float] | None = None
    model_id: str | None = None
    occurred_at: datetime
    tier: str = "raw"
    session_id: str | None = None
    visible_to: str | None = None  # None: every principal of the tenant; else only this one


class SearchFilter(BaseModel):
    tenant: str
    ancestor_id: str
    kinds: frozenset[DocKind] | None = None
    tiers: frozenset[str] | None = None
    since: datetime | None = None  # occurred_at window, half-open: since <= occurred_at < until
    until: datetime | None = None
    session_id: str | None = None
    principal: str | None = None  # documents with visible_to set are only seen by this principal
    rollups: bool = True  # False: no roll-ups (facts of a tier other than raw), whatever `kinds`/`tiers` say


class Hit(BaseModel):
    doc_id: str
    score: float
    extra: dict[str, float] = Field(default_factory=dict)
