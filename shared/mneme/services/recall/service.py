"""recall: hybrid (vector + BM25) ranked search with explain, fallback policy and a context pack."""

from __future__ import annotations

from dataclasses import dataclass

from mneme.errors import ScopeNotFound
from mneme.models import Principal
from mneme.observability import count, logger
from mneme.ports import Clock, Embedder, SearchIndex
from mneme.search_models import SearchFilter, as_filter
from mneme.services.context_pack import build_pack
from mneme.services.recall import anchors as anchor_rule
from mneme.services.recall import select as recall_select
from mneme.services.recall import stages
from mneme.services.recall.records import RecallStore, fact_sources, load, to_result
from mneme.services.recall.request import SCOPE_NOT_FOUND, RecallRequest, RecallResponse
from mneme.services.recall.run import Deps, Run
from mneme.services.recall.time import query_time
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService


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
        count("RecallFallback", 1 if run.fallback["triggered"] else 0)
        count(f"RecallPath_{path}")
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
