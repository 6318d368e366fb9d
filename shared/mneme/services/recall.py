"""recall: hybrid (vector + BM25) ranked search with explain, fallback policy and a context pack."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
from aws_lambda_powertools.metrics import MetricUnit
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from mneme.errors import MnemeError
from mneme.models import Episode, Principal, Timestamp
from mneme.observability import logger, metrics
from mneme.ports import Clock, Embedder, RecordStore, SearchIndex
from mneme.search_models import DocKind, Hit, SearchFilter
from mneme.services import anchors as anchor_rule
from mneme.services.context_pack import PackItem, build_pack
from mneme.services.indexing import episode_text
from mneme.services.recall_records import Record, Result, lifecycle, load, record_text, to_result
from mneme.services.scopes import ScopeService, per_request

MAX_QUERY_BYTES = 2 * 1024
FRESH_LIMIT = 200
MIN_VECTOR = 0.30  # balanced strictness admits vector-only hits at or above this cosine
KIND_ORDER = {"fact": 0, "memory": 1, "episode": 2}


class Scoring(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(0.7, ge=0, le=1, description="vector weight")
    beta: float = Field(0.3, ge=0, le=1, description="lexical (BM25) weight")
    fallback: Literal["never", "on_empty", "always"] = "on_empty"
    resonance: float = Field(0.0, ge=0, le=1, description="weight of AVEC resonance (needs `avec`)")
    strictness: Literal["precision", "balanced", "recall"] = "balanced"

    @model_validator(mode="after")
    def _some_weight(self) -> Scoring:
        if self.alpha == 0 and self.beta == 0:
            raise ValueError("alpha and beta cannot both be 0")
        return self


class Avec(BaseModel):
    """An attractor state (Locus): each dimension in [0, 1]."""

    model_config = ConfigDict(extra="forbid")
    stability: float = Field(ge=0, le=1)
    friction: float = Field(ge=0, le=1)
    logic: float = Field(ge=0, le=1)
    autonomy: float = Field(ge=0, le=1)

    def resonance(self, other: dict[str, Any] | None) -> float | None:
        """1 − mean absolute difference over the four dimensions; None when `other` has no AVEC."""
        if not other or any(not isinstance(other.get(k), int | float) for k in AVEC_DIMENSIONS):
            return None
        return 1 - sum(abs(getattr(self, k) - float(other[k])) for k in AVEC_DIMENSIONS) / 4


AVEC_DIMENSIONS = ("stability", "friction", "logic", "autonomy")


class Disclosure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expand_top: int = Field(3, ge=0, le=50)
    budget_tokens: int | None = Field(None, ge=32, le=200_000)


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str | None = Field(None, min_length=1)
    scope: str = Field("root", min_length=4, max_length=600)
    limit: int = Field(10, ge=1, le=200)
    kinds: list[DocKind] | None = Field(None, min_length=1)
    tiers: list[Literal["raw", "daily", "weekly", "monthly", "quarterly", "yearly"]] | None = Field(None, min_length=1)
    since: Timestamp | None = None
    until: Timestamp | None = None
    session_id: str | None = Field(
        None,
        max_length=128,
        description="only episodes of this session; with delta, the delivery session instead",
    )
    scoring: Scoring = Field(default_factory=Scoring)
    disclosure: Disclosure = Field(default_factory=Disclosure)
    explain: StrictBool = False
    ids: list[str] | None = Field(None, min_length=1, max_length=200)
    avec: Avec | None = Field(None, description="the agent's state, for resonance with STTP episodes")
    as_of: Timestamp | None = Field(None, description="facts as they were valid at this time (superseded included)")
    delta: StrictBool = Field(False, description="collapse bodies already delivered in session_id (no session filter)")

    @model_validator(mode="after")
    def _check(self) -> RecallRequest:
        if self.query is None and self.ids is None:
            raise ValueError("give a query, or ids to fetch")
        if self.query is not None and len(self.query.encode()) > MAX_QUERY_BYTES:
            raise ValueError(f"query exceeds {MAX_QUERY_BYTES} bytes")
        for name in ("since", "until", "as_of"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} needs a timezone (e.g. Z)")
        if self.delta and self.session_id is None:
            raise ValueError("delta needs a session_id")
        return self


class RecallResponse(BaseModel):
    results: list[Result]
    retrieval_path: Literal["hybrid", "vector", "lexical", "lexical_fallback"]
    context: str
    explain: dict[str, Any] | None = None


@dataclass
class _Candidate:
    id: str
    vector: float = 0.0
    lexical: float = 0.0
    raw_bm25: float = 0.0
    channels: set[str] = field(default_factory=set)


@dataclass
class RecallService:
    store: RecordStore
    clock: Clock
    scopes: ScopeService
    embedder: Embedder
    index: SearchIndex

    @per_request  # scopes read once per request; result paths built a tree level at a time
    def recall(self, caller: Principal, request: RecallRequest) -> RecallResponse:
        scope = self.scopes.resolve(caller.tenant, request.scope)
        if request.ids is not None:
            return self._fetch(caller, request)
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
        )
        trace: dict[str, Any] = {
            "filters": flt.model_dump(mode="json", exclude={"tenant", "principal"}),
            "stages": [],
            "omitted": [],
        }
        scoring = request.scoring
        k = min(max(request.limit * 5, 50), 500)
        candidates, path, vector_error, query_vector = self._search(flt, request.query, scoring, k, trace)
        query_anchors = anchor_rule.anchors(request.query)
        trace["anchors"] = sorted(query_anchors)
        results = self._rank(caller, candidates, scoring, query_anchors, request.as_of, query_vector, trace)
        if request.avec is not None and scoring.resonance > 0:
            results = sorted((self._resonate(r, request.avec, scoring.resonance) for r in results), key=_order)
        fallback: dict[str, Any] = {
            "policy": scoring.fallback,
            "triggered": bool(vector_error),
            "reason": "vector_unavailable" if vector_error else None,
        }
        if scoring.fallback == "always" or (scoring.fallback == "on_empty" and not results):
            seen = {r.id for r in results}
            extra = self._lexical_fallback(caller, flt, request.query, k, seen, request.as_of, trace)
            if extra:
                if not fallback["triggered"]:
                    fallback.update(triggered=True, reason=scoring.fallback)
                results = sorted([*results, *extra], key=_order)
                if scoring.fallback == "on_empty":
                    path = "lexical_fallback"
            metrics.add_metric(name="RecallFallback", unit=MetricUnit.Count, value=1 if extra else 0)
        trace["fallback"] = fallback
        results = results[: request.limit]
        trace["stages"].append({"stage": "selected", "candidates": len(results)})
        context, results = self._context(caller, request, scope.path, results, trace)
        metrics.add_metric(name=f"RecallPath_{path}", unit=MetricUnit.Count, value=1)
        logger.info("recall", extra={"retrieval_path": path, "results": len(results)})
        return RecallResponse(
            results=results, retrieval_path=path, context=context, explain=trace if request.explain else None
        )

    # -- stages ---------------------------------------------------------------------------
    def _search(
        self, flt: SearchFilter, query: str, scoring: Scoring, k: int, trace: dict[str, Any]
    ) -> tuple[dict[str, _Candidate], str, str | None, NDArray[np.float32] | None]:
        candidates: dict[str, _Candidate] = {}
        vector_hits: list[Hit] = []
        vector_error: str | None = None
        vector = None
        if scoring.alpha > 0:
            try:
                vector = self.embedder.embed([query])[0]
                vector_hits = self.index.search_vector(flt, vector, self.embedder.model_id, k)
            except MnemeError as e:
                if scoring.fallback == "never":
                    raise
                vector_error = e.code
                logger.warning("vector channel failed", extra={"code": e.code})
            trace["stages"].append({"stage": "vector", "candidates": len(vector_hits), "error": vector_error})
        lexical_hits: list[Hit] = []
        if scoring.beta > 0:
            lexical_hits = self.index.search_text(flt, query, k)  # the index drops stopwords, reads dates
            trace["stages"].append({"stage": "lexical", "candidates": len(lexical_hits)})
        for hit in vector_hits:
            candidate = candidates.setdefault(hit.doc_id, _Candidate(hit.doc_id))
            candidate.vector = max(0.0, hit.score)
            candidate.channels.add("vector")
        top = max((hit.score for hit in lexical_hits), default=1.0) or 1.0
        for hit in lexical_hits:
            candidate = candidates.setdefault(hit.doc_id, _Candidate(hit.doc_id))
            candidate.lexical, candidate.raw_bm25 = hit.score / top, hit.score
            candidate.channels.add("lexical")
        if self.index.visibility_lag > 0:
            self._fresh_tail(flt, query, vector if scoring.alpha > 0 else None, candidates, trace)
        trace["stages"].append({"stage": "fused", "candidates": len(candidates)})
        if vector_error:
            return candidates, "lexical_fallback", vector_error, None
        path = "hybrid" if scoring.alpha > 0 and scoring.beta > 0 else ("vector" if scoring.alpha > 0 else "lexical")
        return candidates, path, None, vector

    def _fresh_tail(
        self,
        flt: SearchFilter,
        query: str,
        vector: NDArray[np.float32] | None,
        candidates: dict[str, _Candidate],
        trace: dict[str, Any],
    ) -> None:
        """Read-after-write over an eventually consistent index (OpenSearch Serverless has no
        refresh): score the episodes written within the index's `visibility_lag` from their records."""
        since = self.clock.now() - timedelta(seconds=self.index.visibility_lag)
        query_anchors = anchor_rule.anchors(query)
        added = 0
        for episode in self.store.list_recent_episodes(flt.tenant, since, FRESH_LIMIT):
            if episode.episode_id in candidates or episode.archived or not self._in_filter(flt, episode):
                continue
            cosine = 0.0
            if vector is not None and episode.vector is not None and episode.model_id == self.embedder.model_id:
                cosine = max(0.0, float(np.dot(vector, np.asarray(episode.vector, dtype=np.float32))))
            overlap = anchor_rule.anchor_hits(query_anchors, episode_text(episode)) / max(len(query_anchors), 1)
            if cosine <= 0 and overlap <= 0:
                continue
            candidate = candidates[episode.episode_id] = _Candidate(episode.episode_id, cosine, overlap)
            candidate.channels.update({"fresh", *(["vector"] if cosine else []), *(["lexical"] if overlap else [])})
            added += 1
        trace["stages"].append({"stage": "fresh", "candidates": added})

    def _in_filter(self, flt: SearchFilter, episode: Episode) -> bool:
        ancestors = {scope.scope_id for scope in self.scopes.chain_of(flt.tenant, episode.scope_id).chain}
        return (
            flt.ancestor_id in ancestors
            and (flt.kinds is None or "episode" in flt.kinds)
            and (flt.tiers is None or episode.tier in flt.tiers)
            and (flt.since is None or episode.occurred_at >= flt.since)
            and (flt.until is None or episode.occurred_at < flt.until)
            and (flt.session_id is None or episode.session_id == flt.session_id)
        )

    def _rank(
        self,
        caller: Principal,
        candidates: dict[str, _Candidate],
        scoring: Scoring,
        query_anchors: set[str],
        as_of: datetime | None,
        query_vector: NDArray[np.float32] | None,
        trace: dict[str, Any],
    ) -> list[Result]:
        records = self._load(caller, list(candidates), trace)
        if query_vector is not None:
            self._fill_vector_scores(candidates, records, query_vector)
        now = self.clock.now()
        weight = (scoring.alpha if any("vector" in c.channels for c in candidates.values()) else 0) + scoring.beta
        results = []
        for candidate in candidates.values():
            record = records.get(candidate.id)
            if record is None:
                continue
            text = record_text(record)
            if not _admitted(scoring.strictness, candidate, query_anchors, text):
                trace["omitted"].append({"id": candidate.id, "reason": f"not_admitted:{scoring.strictness}"})
                continue
            factor, reason = lifecycle(record, now, as_of)
            if factor == 0:
                trace["omitted"].append({"id": candidate.id, "reason": reason})
                continue
            fused = (scoring.alpha * candidate.vector + scoring.beta * candidate.lexical) / (weight or 1)
            scores = {
                "vector": round(candidate.vector, 6),
                "lexical": round(candidate.lexical, 6),
                "bm25": round(candidate.raw_bm25, 6),
                "lifecycle": factor,
            }
            results.append(self._result(caller.tenant, record, fused * factor, scores))
        trace["stages"].append({"stage": "admitted", "candidates": len(results)})
        return sorted(results, key=_order)

    def _fill_vector_scores(
        self, candidates: dict[str, _Candidate], records: dict[str, Record], query_vector: NDArray[np.float32]
    ) -> None:
        """A hit found only by BM25 gets its real cosine from the stored vector, not 0 (exact matches
        that the vector top-k missed must not be ranked below weaker hits both channels found)."""
        for candidate in candidates.values():
            record = records.get(candidate.id)
            stored = getattr(record, "vector", None)
            if (
                "vector" in candidate.channels
                or stored is None
                or getattr(record, "model_id", None) != self.embedder.model_id
            ):
                continue
            candidate.vector = max(0.0, float(np.dot(query_vector, np.asarray(stored, dtype=np.float32))))

    @staticmethod
    def _resonate(result: Result, avec: Avec, weight: float) -> Result:
        """Locus' resonance signal (against the node's model AVEC), added to the score with its weight."""
        resonance = avec.resonance(((result.sttp or {}).get("avec") or {}).get("model"))
        if resonance is None:
            return result
        scores = {**result.scores, "resonance": round(resonance, 6)}
        return result.model_copy(update={"score": round(result.score + weight * resonance, 6), "scores": scores})

    def _lexical_fallback(
        self,
        caller: Principal,
        flt: SearchFilter,
        query: str,
        k: int,
        seen: set[str],
        as_of: datetime | None,
        trace: dict[str, Any],
    ) -> list[Result]:
        hits = [hit for hit in self.index.search_text(flt, query, k) if hit.doc_id not in seen]
        trace["stages"].append({"stage": "lexical_fallback", "candidates": len(hits)})
        top = max((hit.score for hit in hits), default=1.0) or 1.0
        records = self._load(caller, [hit.doc_id for hit in hits], trace)
        now = self.clock.now()
        results = []
        for hit in hits:
            record = records.get(hit.doc_id)
            factor, reason = lifecycle(record, now, as_of) if record is not None else (0.0, "missing")
            if record is None or factor == 0:
                trace["omitted"].append({"id": hit.doc_id, "reason": reason})
                continue
            scores = {
                "vector": 0.0,
                "lexical": round(hit.score / top, 6),
                "bm25": round(hit.score, 6),
                "lifecycle": factor,
            }
            results.append(self._result(caller.tenant, record, hit.score / top * factor, scores))
        return results

    def _load(self, caller: Principal, ids: list[str], trace: dict[str, Any]) -> dict[str, Record]:
        found = load(self.store, caller, ids)
        self.scopes.prefetch(caller.tenant, [record.scope_id for record in found.values() if record.scope_id])
        for missing in (i for i in ids if i not in found):
            trace["omitted"].append({"id": missing, "reason": "not_found"})
        return found

    def _result(self, tenant: str, record: Record, score: float, scores: dict[str, float]) -> Result:
        return to_result(self.store, record, score, scores, lambda scope_id: self._path(tenant, scope_id))

    def _path(self, tenant: str, scope_id: str) -> str:
        return self.scopes.chain_of(tenant, scope_id).path

    def _context(
        self,
        caller: Principal,
        request: RecallRequest,
        scope_path: str,
        results: list[Result],
        trace: dict[str, Any],
    ) -> tuple[str, list[Result]]:
        results = self._with_prerequisites(caller, results)
        already: list[str] = []
        if request.delta and request.session_id:
            delivered = self.store.get_delivered(caller.tenant, caller.principal, request.session_id)
            already = [r.id for r in results if r.id in delivered]
        items = [_pack_item(r) for r in results if r.id not in already]
        title = f"# recall: {request.query} (scope {scope_path}, {len(results)} results)"
        pack = build_pack(title, items, request.disclosure.expand_top, request.disclosure.budget_tokens, already)
        if request.session_id and pack.expanded:
            self.store.add_delivered(caller.tenant, caller.principal, request.session_id, pack.expanded)
        trace["context"] = {
            "expanded": pack.expanded,
            "cards": pack.cards,
            "dropped": pack.dropped,
            "already_loaded": already,
            "tokens": pack.tokens,
        }
        return pack.markdown, results

    def _with_prerequisites(self, caller: Principal, results: list[Result]) -> list[Result]:
        """`depends_on` prerequisites of a selected memory join the results just before it."""
        out: list[Result] = []
        present = {r.id for r in results}
        for result in results:
            keys = result.metadata.get("depends_on") if result.kind == "memory" else None
            if keys:
                memory = self.store.get_memory(caller.tenant, result.id)
                scope_id = memory.scope_id if memory else None
                siblings = self.store.list_scoped_memories(caller.tenant, scope_id) if scope_id else []
                now = self.clock.now()
                for prereq in (m for m in siblings if m.key in keys and m.memory_id not in present):
                    if prereq.status == "published" and lifecycle(prereq, now)[0] > 0:
                        out.append(self._result(caller.tenant, prereq, result.score, {"prerequisite": 1.0}))
                        present.add(prereq.memory_id)
                result = result.model_copy(update={"requires": [m.memory_id for m in siblings if m.key in keys]})
            out.append(result)
        return out

    def _fetch(self, caller: Principal, request: RecallRequest) -> RecallResponse:
        assert request.ids is not None
        trace: dict[str, Any] = {
            "stages": [{"stage": "fetch", "candidates": len(request.ids)}],
            "omitted": [],
        }
        records = self._load(caller, request.ids, trace)
        results = [self._result(caller.tenant, records[i], 1.0, {}) for i in request.ids if i in records]
        items = [_pack_item(r) for r in results]
        pack = build_pack(
            f"# fetched {len(results)} of {len(request.ids)}",
            items,
            len(items),
            request.disclosure.budget_tokens,
        )
        return RecallResponse(
            results=results,
            retrieval_path="lexical",
            context=pack.markdown,
            explain=trace if request.explain else None,
        )


def _admitted(strictness: str, candidate: _Candidate, query_anchors: set[str], text: str) -> bool:
    if strictness == "precision":
        return anchor_rule.admits(query_anchors, text)
    if strictness == "balanced":
        return "lexical" in candidate.channels or candidate.vector >= MIN_VECTOR
    return True


def _order(result: Result) -> tuple[float, int, str]:
    return (-result.score, KIND_ORDER[result.kind], result.id)


def _pack_item(result: Result) -> PackItem:
    label = result.key or f"{result.occurred_at:%Y-%m-%d}"
    summary = (result.metadata.get("summary") if result.kind == "memory" else None) or result.content
    return PackItem(
        id=result.id,
        kind=result.kind,
        scope=result.scope,
        label=label,
        body=result.content,
        summary=summary,
        requires=result.requires,
    )
