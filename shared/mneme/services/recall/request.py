"""What recall is asked (`RecallRequest`, its scoring and disclosure) and what it answers (`RecallResponse`).

Every stage reads the request from the run; nothing here imports a stage."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mneme.models import Tier as StoredTier
from mneme.models import Timestamp
from mneme.search_models import DocKind, MetadataFilter
from mneme.services.recall.records import Result

MAX_QUERY_BYTES = 2 * 1024


def _lower(value: Any) -> Any:
    """STTP tiers are case-insensitive: `DAILY` is `daily`."""
    return value.lower() if isinstance(value, str) else value


Tier = Annotated[StoredTier, BeforeValidator(_lower)]


def _within_query_limit(value: str | None) -> str | None:
    """A query over its limit is content too large (413), like an episode's content."""
    if value is not None and len(value.encode(errors="surrogatepass")) > MAX_QUERY_BYTES:
        raise PydanticCustomError("query_too_large", "query exceeds {limit} bytes", {"limit": MAX_QUERY_BYTES})
    return value


class Scoring(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alpha: StrictFloat = Field(0.7, ge=0, le=1, description="vector weight")
    beta: StrictFloat = Field(0.3, ge=0, le=1, description="lexical (BM25) weight")
    fallback: Literal["never", "on_empty", "always"] = "on_empty"
    resonance: StrictFloat = Field(0.0, ge=0, le=1, description="weight of AVEC resonance (needs `avec`)")
    strictness: Literal["precision", "balanced", "recall"] = Field(
        "balanced",
        description="how relevant a result must be: precision (only what shares meaningful words with the query),"
        " balanced or recall (the most, weaker matches included)",
    )

    @model_validator(mode="after")
    def _some_weight(self) -> Scoring:
        if self.alpha == 0 and self.beta == 0:
            raise ValueError("alpha and beta cannot both be 0")
        return self


class Avec(BaseModel):
    """An attractor state (Locus): each dimension in [0, 1]."""

    model_config = ConfigDict(extra="forbid")
    stability: StrictFloat = Field(ge=0, le=1)
    friction: StrictFloat = Field(ge=0, le=1)
    logic: StrictFloat = Field(ge=0, le=1)
    autonomy: StrictFloat = Field(ge=0, le=1)

    def resonance(self, other: dict[str, Any] | None) -> float | None:
        """1 − mean absolute difference over the four dimensions; None when `other` has no AVEC."""
        if not other or any(not isinstance(other.get(k), int | float) for k in AVEC_DIMENSIONS):
            return None
        return 1 - sum(abs(float(getattr(self, k)) - float(other[k])) for k in AVEC_DIMENSIONS) / 4


AVEC_DIMENSIONS = ("stability", "friction", "logic", "autonomy")


class Disclosure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expand_top: StrictInt = Field(3, ge=0, le=50, description="results shown in full in the context pack")
    budget_tokens: StrictInt | None = Field(
        None, ge=32, le=200_000, description="cut the context pack to about this many tokens"
    )


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: Annotated[str | None, AfterValidator(_within_query_limit)] = Field(
        None, min_length=1, json_schema_extra={"maxLength": MAX_QUERY_BYTES}, description="what to look for, in words"
    )
    scope: str = Field("root", min_length=4, max_length=600, description="search this scope and everything below it")
    limit: StrictInt = Field(10, ge=1, le=200, description="the most results to return")
    kinds: list[DocKind] | None = Field(None, min_length=1, description="only these kinds (default: all)")
    tiers: list[Tier] | None = Field(None, min_length=1)
    since: Timestamp | None = Field(None, description="only what occurred at or after this time (with a timezone)")
    until: Timestamp | None = Field(None, description="only what occurred before this time (with a timezone)")
    session_id: str | None = Field(
        None,
        max_length=128,
        description="only episodes of this session; with delta, the delivery session instead",
    )
    metadata: MetadataFilter | None = Field(
        None,
        description='top-level metadata equal to a value, or (a list) to one of several: {"user": "alice",'
        ' "topic": ["diet", "health"]}; every key must match. Applied inside the search (a fact matches through'
        " the metadata of its source episodes; curated memories carry none)",
    )
    scoring: Scoring = Field(default_factory=Scoring)
    disclosure: Disclosure = Field(default_factory=Disclosure)
    explain: StrictBool = False
    ids: list[str] | None = Field(
        None, min_length=1, max_length=200, description="fetch these items in full (the ids of an answer's cards)"
    )
    avec: Avec | None = Field(None, description="the agent's state, for resonance with STTP episodes")
    as_of: Timestamp | None = Field(
        None,
        description="facts as they were valid at this time (superseded included); also the time a relative"
        " period in the query ('last May', 'two years ago') is read from (default: the time of the request)",
    )
    delta: StrictBool = Field(False, description="collapse bodies already delivered in session_id (no session filter)")

    @model_validator(mode="after")
    def _check(self) -> RecallRequest:
        if self.query is None and self.ids is None:
            raise ValueError("give a query, or ids to fetch")
        for name in ("since", "until", "as_of"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} needs a timezone (e.g. Z)")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise ValueError("since is after until: the period is empty")
        if self.delta and self.session_id is None:
            raise ValueError("delta needs a session_id")
        return self


SCOPE_NOT_FOUND = "scope_not_found"


class RecallResponse(BaseModel):
    results: list[Result]
    retrieval_path: Literal["hybrid", "vector", "lexical", "lexical_fallback"]
    context: str
    explain: dict[str, Any] | None = None
    warnings: list[Literal["scope_not_found"]] = Field(
        default_factory=list,
        description=(
            "scope_not_found: nothing was ever written under this scope path (it does not exist yet), so nothing "
            "can be recalled there: the answer is empty, never a 404. Retrieve still answers 404 for it"
        ),
    )
