"""What the search index stores and how it is queried (see `mneme.ports.SearchIndex`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    field_serializer,
)

DocKind = Literal["episode", "fact", "memory"]
MetadataValue = StrictStr | StrictBool | StrictInt | StrictFloat
"""A value a metadata filter compares: JSON's scalars (a top-level list or object in metadata is never matched)."""


MAX_METADATA_KEYS = 16
MAX_METADATA_VALUES = 32  # per key
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
MetadataScalar = Annotated[StrictStr, StringConstraints(max_length=512)] | StrictBool | StrictInt | StrictFloat


def _scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 512)


def _check_filter(given: Any) -> Any:
    """One clear message for a filter of the wrong shape (a union's errors name every branch)."""
    if not isinstance(given, dict):
        raise ValueError('metadata must be an object: {"key": value} or {"key": [value, ...]}')
    if not 1 <= len(given) <= MAX_METADATA_KEYS:
        raise ValueError(f"metadata takes 1 to {MAX_METADATA_KEYS} keys")
    for key, value in given.items():
        if not 1 <= len(key) <= 128:
            raise ValueError("a metadata key has 1 to 128 characters")
        values = value if isinstance(value, list) else [value]
        if not 1 <= len(values) <= MAX_METADATA_VALUES:
            raise ValueError(f"metadata.{key}: give 1 to {MAX_METADATA_VALUES} values")
        if not all(_scalar(v) for v in values):
            raise ValueError(
                f"metadata.{key}: a value is a string (at most 512 characters), a number or a boolean; a list of"
                " them means any of them"
            )
    return given


MetadataFilter = Annotated[
    dict[
        MetadataKey,
        MetadataScalar | Annotated[list[MetadataScalar], Field(min_length=1, max_length=MAX_METADATA_VALUES)],
    ],
    Field(min_length=1, max_length=MAX_METADATA_KEYS),
    BeforeValidator(_check_filter),
]
"""A metadata filter as a client gives it: per top-level key one value (equality) or a list (`in`)."""


def as_filter(given: dict[str, Any] | None) -> dict[str, list[Any]] | None:
    """A client's metadata filter in `SearchFilter.metadata`'s shape (a list of values per key)."""
    if not given:
        return None
    return {key: list(value) if isinstance(value, list) else [value] for key, value in given.items()}


def metadata_term(key: str, value: Any) -> str | None:
    """The index term of one top-level metadata pair, or None when the value is not a scalar. A number is
    compared as a number (1 and 1.0 are one term), a boolean as a boolean (true is not 1)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if value is None or not isinstance(value, str | bool | int | float):
        return None
    return json.dumps([key, value], ensure_ascii=False, separators=(",", ":"))


def metadata_terms(metadata: Mapping[str, Any] | None) -> list[str]:
    """Every indexable (scalar) top-level pair of `metadata`, as terms, sorted."""
    return sorted({term for key, value in (metadata or {}).items() if (term := metadata_term(key, value))})


def has_metadata(metadata: Mapping[str, Any] | None, flt: SearchFilter) -> bool:
    """Whether a record's metadata passes `flt`'s metadata filter (as the index would decide it)."""
    return holds(metadata_terms(metadata), flt)


def holds(terms: Iterable[str], flt: SearchFilter) -> bool:
    """Whether a document holding these metadata terms passes `flt`'s metadata filter."""
    held = set(terms)
    return all(held.intersection(clause) for clause in flt.metadata_clauses())


def shared_terms(metadatas: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """The terms every one of several records holds: a derived record's (a fact, a roll-up), so that a metadata
    filter finds it only when every source matches, never through one source of several (their union would
    hand one user's words to another through a roll-up). A filter naming several values of a key (`in`) finds
    it only when its sources agree on one of them. None for no record."""
    held = [set(metadata_terms(metadata)) for metadata in metadatas]
    return sorted(set.intersection(*held)) if held else []


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
    metadata_terms: list[str] = Field(default_factory=list)  # `metadata_terms` of its metadata (facts: `shared_terms`)


class SearchFilter(BaseModel):
    tenant: str
    ancestor_id: str
    kinds: frozenset[DocKind] | None = None
    tiers: frozenset[str] | None = None
    since: datetime | None = None  # occurred_at window, half-open: since <= occurred_at < until
    until: datetime | None = None
    session_id: str | None = None
    principal: str | None = None  # documents with visible_to set are only seen by this principal
    # top-level metadata: every key must hold one of its values (equality, or `in` for several)
    metadata: dict[str, list[MetadataValue]] | None = None

    def metadata_clauses(self) -> list[list[str]]:
        """The metadata filter as terms: a document passes when it holds one term of every clause."""
        return [
            sorted({term for value in values if (term := metadata_term(key, value))})
            for key, values in sorted((self.metadata or {}).items())
        ]

    rollups: bool = True  # False: no roll-ups (facts of a tier other than raw), whatever `kinds`/`tiers` say
    # Roll-ups of these tiers only (None: any); other documents are untouched by it. Recall names the tiers coarse
    # enough for a period, so a finer roll-up never takes a candidate's place in the top k.
    rollup_tiers: frozenset[str] | None = None

    @field_serializer("kinds", "tiers", "rollup_tiers")
    def _sorted(self, values: frozenset[str] | None) -> list[str] | None:
        return None if values is None else sorted(values)  # an explain trace reads the same on every run


class Hit(BaseModel):
    doc_id: str
    score: float
    extra: dict[str, float] = Field(default_factory=dict)
