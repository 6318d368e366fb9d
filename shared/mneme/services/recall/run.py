"""Recall's pipeline state: what every stage reads and writes (`Run`, its `Candidate`s, the query's
time window), and the vectors a rule reads, loaded on demand. The stages (`stages`) and the rules
they call (`select`, `hop`, `time`, `scope`, `context`) import it; it imports
none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mneme.models import Episode, Principal, ResolvedScope, Revision
from mneme.ports import Clock, Embedder, SearchIndex
from mneme.search_models import SearchFilter
from mneme.services.context_pack import Pack
from mneme.services.recall.records import RecallStore, Record, Result
from mneme.services.recall.request import RecallRequest
from mneme.services.scopes import ScopeService


@dataclass(frozen=True)
class QueryTime:
    since: datetime | None = None  # the window, half-open: since <= occurred_at < until
    until: datetime | None = None
    prefer: str | None = None  # latest | earliest
    said: str | None = None  # the words the window was read from
    asks_when: bool = False  # 'when did…', 'on what date…': a turn that says when answers it

    def __bool__(self) -> bool:
        return self.since is not None or self.prefer is not None


@dataclass
class Deps:
    store: RecallStore
    clock: Clock
    scopes: ScopeService
    embedder: Embedder
    index: SearchIndex


@dataclass
class Candidate:
    id: str
    vector: float = 0.0
    lexical: float = 0.0
    raw_bm25: float = 0.0
    channels: set[str] = field(default_factory=set)
    record: Record | None = None
    score: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    origin: str = "search"  # search | fallback | prerequisite
    grounding: list[str] | None = None  # a claim fact's source turns shown beside it (select)
    changed: dict[str, str] | None = None  # a later statement updates this one: by (id), at (date), why (time)


@dataclass
class Run:
    deps: Deps
    caller: Principal
    request: RecallRequest
    flt: SearchFilter
    scope_path: str
    anchors: set[str]
    k: int
    when: QueryTime = field(default_factory=QueryTime)
    candidates: dict[str, Candidate] = field(default_factory=dict)  # live, in no particular order
    ranked: list[Candidate] = field(default_factory=list)  # after select: the results, in order
    related: list[Candidate] = field(default_factory=list)  # admitted but cut by the limit
    results: list[Result] = field(default_factory=list)
    omitted: dict[str, str] = field(default_factory=dict)  # id -> reason, in the order dropped
    stages: list[dict[str, Any]] = field(default_factory=list)
    vector_error: str | None = None
    query_vector: NDArray[np.float32] | None = None
    fallback: dict[str, Any] = field(default_factory=dict)
    pack: Pack | None = None
    already: list[str] = field(default_factory=list)
    revisions: list[Revision] | None = None  # the caller's open revisions, read once (search) for `load`
    chains: dict[str, ResolvedScope] = field(default_factory=dict)  # the candidates' scopes, read once (lifecycle)
    sources: dict[str, Episode] = field(default_factory=dict)  # facts' source episodes read so far (select)

    def path_of(self, scope_id: str) -> str:
        """A scope's path: from the chains lifecycle read, else read (through the request's cache)."""
        found = self.chains.get(scope_id)
        return found.path if found is not None else self.deps.scopes.chain_of(self.flt.tenant, scope_id).path

    @property
    def scoring(self) -> Any:
        return self.request.scoring

    def with_vectors(self, candidates: list[Candidate]) -> None:
        """For rules that read a record's vector (`hop`, `time`): see `with_vectors`."""
        with_vectors(self, candidates)

    def note(self, stage: str, took: int, dropped: list[tuple[str, str]], **extra: Any) -> None:
        """Record one stage: how many candidates it took in, passed on and which it dropped, why."""
        for doc_id, reason in dropped:
            self.candidates.pop(doc_id, None)
            self.omitted.setdefault(doc_id, reason)
        passed = len(self.candidates) if stage not in ("select", "prerequisites", "pack") else len(self.ranked)
        self.stages.append(
            {
                "stage": stage,
                "in": took,
                "out": passed,
                "candidates": passed,
                "dropped": [{"id": doc_id, "reason": reason} for doc_id, reason in dropped],
                **extra,
            }
        )

    def path(self) -> str:
        """The channel that served the results: lexical_fallback when the vector channel failed or a
        result was found only by the fallback."""
        if self.vector_error or any(c.origin == "fallback" for c in self.ranked):
            return "lexical_fallback"
        if self.scoring.alpha > 0 and self.scoring.beta > 0:
            return "hybrid"
        return "vector" if self.scoring.alpha > 0 else "lexical"


def stored_vectors(run: Run, candidates: list[Candidate]) -> dict[str, NDArray[np.float32]]:
    """The candidates' stored vectors of the embedder's model: the record's own; for an episode loaded
    without it (`stages._load`), the index's (`SearchIndex.get_vectors`), else the record read again."""
    model = run.deps.embedder.model_id
    found: dict[str, NDArray[np.float32]] = {}
    bare: list[str] = []
    for candidate in candidates:
        record = candidate.record
        if getattr(record, "model_id", None) != model:
            continue
        vector = getattr(record, "vector", None)
        if vector is not None:
            found[candidate.id] = np.asarray(vector, dtype=np.float32)
        elif isinstance(record, Episode):
            bare.append(candidate.id)
    if bare:
        found.update(run.deps.index.get_vectors(run.flt.tenant, model, bare))
        rest = [i for i in bare if i not in found]
        reread = run.deps.store.get_episodes(run.flt.tenant, rest) if rest else {}
        found.update((i, np.asarray(e.vector, dtype=np.float32)) for i, e in reread.items() if e.vector is not None)
    return found


def pair_cosine(vectors: dict[str, NDArray[np.float32]], one: Candidate, other: Candidate) -> float:
    """The cosine of two candidates' stored vectors (`stored_vectors`, unit length), 0 when either has none."""
    a, b = vectors.get(one.id), vectors.get(other.id)
    return float(np.dot(a, b)) if a is not None and b is not None else 0.0


def with_vectors(run: Run, candidates: list[Candidate]) -> None:
    """Episodes loaded without their vector (`stages._load`) get it back (`stored_vectors`), for rules that
    read a record's vector (`hop`, `time`)."""
    bare = [c for c in candidates if isinstance(c.record, Episode) and c.record.vector is None]
    stored = stored_vectors(run, bare) if bare else {}
    for candidate in bare:
        if candidate.id in stored:
            assert candidate.record is not None
            candidate.record = candidate.record.model_copy(update={"vector": stored[candidate.id].tolist()})
