"""recall: hybrid (vector + BM25) ranked search with explain, fallback policy and a context pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
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

from mneme.errors import ScopeNotFound
from mneme.models import Principal, Timestamp
from mneme.models import Tier as StoredTier
from mneme.observability import logger, metrics
from mneme.ports import Clock, Embedder, SearchIndex
from mneme.search_models import DocKind, MetadataFilter, SearchFilter, as_filter
from mneme.services import anchors as anchor_rule
from mneme.services.context_pack import build_pack
from mneme.services.recall import select as recall_select
from mneme.services.recall import stages
from mneme.services.recall.records import RecallStore, Result, fact_sources, load, to_result
from mneme.services.recall.run import Deps, Run
from mneme.services.recall.stages import MIN_VECTOR
from mneme.services.recall.time import query_time
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService

MAX_QUERY_BYTES = 2 * 1024
__all__ = ["MIN_VECTOR", "RecallRequest", "RecallResponse", "RecallService", "Scoring"]


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


@dataclass
class RecallService:
    store: RecallStore
    clock: Clock
    scopes: ScopeService
    embedder: Embedder
    index: SearchIndex

    def deps(self) -> Deps:
        return Deps(self.store, self.clock, self.scopes, self.embedder, self.index)

    @per_request  # scopes read once per request; result paths built a tree level at a time
    def recall(self, caller: Principal, request: RecallRequest) -> RecallResponse:
        try:
            scope = self.scopes.resolve(caller.tenant, request.scope)
        except ScopeNotFound:  # a user, a project nobody has written about yet: empty, and said so
            return nothing_yet(request)
        if request.ids is not None:
            return self._fetch(caller, request, scope.scope.scope_id, scope.path)
        assert request.query is not None
        flt = SearchFilter(
            tenant=caller.tenant,
            ancestor_id=scope.scope.scope_id,
            kinds=frozenset(request.kinds) if request.kinds else None,
            tiers=frozenset(request.tiers) if request.tiers else None,
            since=request.since,
            until=request.until,
            session_id=None if request.delta else request.session_id,
            principal=caller.principal,
            metadata=as_filter(request.metadata),
        )
        when = query_time(request.query, request.as_of or self.clock.now())
        # roll-ups are for time: searched only when the query names a period (those coarse enough for it) or
        # `tiers` names theirs
        flt = flt.model_copy(update={"rollups": recall_select.rollups_asked(request, when),
                                     "rollup_tiers": recall_select.rollup_tiers(request, when)})  # fmt: skip
        run = Run(
            deps=self.deps(),
            caller=caller,
            request=request,
            flt=flt,
            scope_path=scope.path,
            anchors=anchor_rule.anchors(request.query),
            k=min(max(request.limit * 5, 50), 500),
            when=when,
        )
        stages.run_stages(run)
        assert run.pack is not None
        path = run.path()
        metrics.add_metric(name="RecallFallback", unit=MetricUnit.Count, value=1 if run.fallback["triggered"] else 0)
        metrics.add_metric(name=f"RecallPath_{path}", unit=MetricUnit.Count, value=1)
        logger.info("recall", extra={"retrieval_path": path, "results": len(run.results)})
        return RecallResponse(
            results=run.results,
            retrieval_path=path,
            context=run.pack.markdown,
            explain=stages.explain(run) if request.explain else None,
        )

    def _fetch(self, caller: Principal, request: RecallRequest, scope_id: str, scope_path: str) -> RecallResponse:
        """Full bodies of named items, inside the request's scope only (a tagged memory lives at root)."""
        assert request.ids is not None
        ids = list(dict.fromkeys(request.ids))
        records = load(self.store, caller, ids, vectors=False)
        self.scopes.prefetch(caller.tenant, [r.scope_id for r in records.values() if r.scope_id])
        root = self.scopes.root(caller.tenant).scope_id
        dropped: dict[str, str] = {}
        for doc_id in ids:
            record = records.get(doc_id)
            if record is None:
                dropped[doc_id] = "not_found"
            elif scope_id not in self._ancestors(caller.tenant, getattr(record, "scope_id", None) or root):
                dropped[doc_id] = "out_of_scope"
        sources = fact_sources(self.store, caller.tenant, [records[i] for i in ids if i not in dropped])
        results = [
            to_result(records[i], 1.0, {}, lambda s: self._path(caller.tenant, s), sources)
            for i in ids
            if i not in dropped
        ]
        stages.record_fetched(self.store, caller.tenant, [r.id for r in results if r.kind == "memory"])
        items = [recall_select.pack_item(r) for r in results]
        pack = build_pack(
            lambda shown: f"# fetched {shown} of {len(ids)} (scope {scope_path})",
            items,
            len(items),
            request.disclosure.budget_tokens,
        )
        if request.session_id and pack.expanded:
            self.store.add_delivered(caller.tenant, caller.principal, request.session_id, pack.expanded)
        trace = {
            "stages": [
                {
                    "stage": "fetch",
                    "in": len(ids),
                    "out": len(results),
                    "candidates": len(results),
                    "dropped": [{"id": i, "reason": r} for i, r in dropped.items()],
                }
            ],
            "omitted": [{"id": i, "reason": r} for i, r in dropped.items()],
        }
        return RecallResponse(
            results=results,
            retrieval_path="lexical",
            context=pack.markdown,
            explain=trace if request.explain else None,
        )

    def _ancestors(self, tenant: str, scope_id: str) -> set[str]:
        return {scope.scope_id for scope in self.scopes.chain_of(tenant, scope_id).chain}

    def _path(self, tenant: str, scope_id: str) -> str:
        return self.scopes.chain_of(tenant, scope_id).path


def nothing_yet(request: RecallRequest) -> RecallResponse:
    """The answer over a scope path nobody has written to: no results, a pack that says so, and the warning."""
    title = f"# recall: {request.query or 'ids'} (scope {request.scope}: nothing is remembered there yet)"
    pack = build_pack(title, [], 0, request.disclosure.budget_tokens)
    logger.info("recall", extra={"retrieval_path": "hybrid", "results": 0, "warning": SCOPE_NOT_FOUND})
    trace = {"stages": [], "omitted": [], "warnings": [SCOPE_NOT_FOUND]}
    return RecallResponse(
        results=[],
        retrieval_path="hybrid",
        context=pack.markdown,
        explain=trace if request.explain else None,
        warnings=[SCOPE_NOT_FOUND],
    )
