"""The request bodies of the OpenSearch adapter: documents, `_bulk` lines and chunks, filters, searches,
and kNN scores back to cosines. Pure functions, no I/O.

Vectors are L2-normalised before they are stored. The index has one vector dimension; a shorter vector
(another model, e.g. during a re-embedding) is zero-padded to it, which leaves every cosine between
vectors of that model unchanged, and `search_vector` only compares documents of the query's `model_id`
(a `term` filter). A longer vector is `InvalidInput`. An all-zero vector is stored without a vector: the document
stays text-searchable. Query vectors are normalised too, so the inner product of two stored unit
vectors is their cosine.

Filters. Every query carries `term` filters on `tenant` and on `ancestor_ids` (the subtree: a document
lists every scope from the root down to its own, so a rename needs no reindex and a move is
`update_ancestors`), plus `terms` on kind/tier, a half-open `range` on `occurred_at` (since <= t <
until, both sides compared at millisecond resolution), `term` on session_id and visibility
(`visible_to` missing, or equal to the principal), and one `terms` on `metadata` per key of a metadata
filter (a document's top-level metadata pairs are keyword terms, `search_models.metadata_terms`). They sit
in `bool.filter` for text and in the `knn` clause's own `filter` for vectors (efficient filtering: a small
subtree still gets its true top k).
Results are sorted by `[_score desc, doc_id asc]`, so ties break by doc_id as in the embedded index;
the kNN clause asks for a few more candidates than `k` so a tie at the cut is broken the same way.

Scores (OpenSearch "Spaces", https://docs.opensearch.org/latest/mappings/supported-field-types/knn-spaces/).
Text: BM25, positive. Vectors, innerproduct on faiss: d = -x.y = -cos, score = 1 / (1 + d) when d >= 0,
else 1 - d, so score in [0.5, 2]; `score_to_cosine` maps it back (cos = score - 1 when score >= 1, else
1 - 1 / score). An index created with cosinesimil: score = (2 - d) / 2 with d = 1 - cos, so cos = 2 * score - 1.
Both clamped to [-1, 1].
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeAlias

from numpy.typing import NDArray

from mneme.adapters.documents import as_utc, normalised_vector
from mneme.adapters.opensearch.lifecycle import SPACE
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.language.text import search_words
from mneme.search_models import IndexDocument, SearchFilter

MAX_K = 10_000  # index.max_result_window and the kNN plugin's largest k
TIE_SLACK = 16  # extra kNN candidates, so exact ties at the k-th place break by doc_id
_SORT: list[dict[str, Any]] = [{"_score": {"order": "desc"}}, {"doc_id": {"order": "asc"}}]
BodyFor: TypeAlias = Callable[[int | None], dict[str, Any] | None]
"""A ranked search's body for a size (None: the size the body sets itself), or None when nothing can match."""
Scorer: TypeAlias = Callable[[Any], float]
"""A hit's score from the first of its sort values."""

_MAX_QUERY_WORDS = 128
_BULK_ACTIONS = 500
_BULK_BYTES = 5 * 1024 * 1024  # below the smallest managed-domain payload limit (10 MiB)


def document_id(tenant: str, doc_id: str) -> str:
    """The OpenSearch `_id`: "<tenant>:<doc_id>", with ":" and "%" escaped in the tenant."""
    return f"{tenant.replace('%', '%25').replace(':', '%3A')}:{doc_id}"


def es_time(value: datetime) -> str:
    """UTC ISO-8601 at millisecond resolution (truncated), the resolution of a `date` field."""
    return as_utc(value).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def document_source(doc: IndexDocument, dimension: int | None) -> dict[str, Any]:
    """The stored `_source` of a document (every field; `vector` only when it has one); validates and pads it."""
    source: dict[str, Any] = {
        "tenant": doc.tenant,
        "doc_id": doc.doc_id,
        "kind": doc.kind,
        "scope_id": doc.scope_id,
        "ancestor_ids": list(doc.ancestor_ids),
        "text": doc.text,
        "occurred_at": es_time(doc.occurred_at),
        "tier": doc.tier,
        "session_id": doc.session_id,  # null: no value (and no `exists`)
        "visible_to": doc.visible_to,
        "model_id": None,
        "metadata": list(doc.metadata_terms),
    }
    vec = normalised_vector(doc)  # InvalidInput on an empty or non-finite vector
    if vec is not None and vec.any():
        if doc.model_id is None:
            raise InvalidInput(f"document {doc.doc_id} has a vector but no model_id")
        if dimension is None:
            raise StoreUnavailable("the search index has no vector field to store vectors in")
        source["vector"] = padded(vec, dimension, f"document {doc.doc_id}")
        source["model_id"] = doc.model_id
    return source


def write_lines(doc: IndexDocument, dimension: int | None) -> list[dict[str, Any]]:
    """The `_bulk` lines that upsert `doc`.

    A document with a vector is an `update` with `doc_as_upsert`: re-upserting an unchanged document is
    a no-op (no new version, and no deleted copy that would skew BM25 statistics until a merge). One
    without a vector is an `index` (a full replacement), which drops a vector it had before.
    """
    key = document_id(doc.tenant, doc.doc_id)
    source = document_source(doc, dimension)
    if "vector" in source:
        return [{"update": {"_id": key, "retry_on_conflict": 3}}, {"doc": source, "doc_as_upsert": True}]
    return [{"index": {"_id": key}}, source]


def padded(vec: NDArray[Any], dimension: int, what: str) -> list[float]:
    if vec.size > dimension:
        raise InvalidInput(f"{what}: a vector of {vec.size} dimensions does not fit the index's {dimension}")
    return [float(x) for x in vec] + [0.0] * (dimension - vec.size)


# -- searches ----------------------------------------------------------------------------------
def filter_clauses(flt: SearchFilter) -> list[dict[str, Any]]:
    """Every filter of `flt`, as `bool.filter` clauses (tenant and subtree first)."""
    clauses: list[dict[str, Any]] = [
        {"term": {"tenant": flt.tenant}},
        {"term": {"ancestor_ids": flt.ancestor_id}},
    ]
    if flt.kinds is not None:
        clauses.append({"terms": {"kind": sorted(flt.kinds)}})
    if flt.tiers is not None:
        clauses.append({"terms": {"tier": sorted(flt.tiers)}})
    if flt.since is not None or flt.until is not None:
        window: dict[str, str] = {}
        if flt.since is not None:
            window["gte"] = es_time(flt.since)
        if flt.until is not None:
            window["lt"] = es_time(flt.until)
        clauses.append({"range": {"occurred_at": window}})
    if flt.session_id is not None:
        clauses.append({"term": {"session_id": flt.session_id}})
    clauses += [{"terms": {"metadata": terms}} for terms in flt.metadata_clauses()]
    if not flt.rollups or flt.rollup_tiers is not None:  # no fact of a tier other than raw (or those named)
        kept = sorted(flt.rollup_tiers or []) if flt.rollups else []
        other_tier = {"bool": {"must_not": [{"terms": {"tier": ["raw", *kept]}}]}}
        clauses.append({"bool": {"must_not": [{"bool": {"filter": [{"term": {"kind": "fact"}}, other_tier]}}]}})
    public: dict[str, Any] = {"bool": {"must_not": [{"exists": {"field": "visible_to"}}]}}
    if flt.principal is None:
        clauses.append(public)
    else:
        clauses.append(
            {"bool": {"should": [public, {"term": {"visible_to": flt.principal}}], "minimum_should_match": 1}}
        )
    return clauses


def matches_nothing(flt: SearchFilter, k: int) -> bool:
    return k <= 0 or flt.kinds == frozenset() or flt.tiers == frozenset()


def match_text(query: str) -> str | None:
    """The query's words for `match` (no query syntax exists there), the words the embedded index searches by
    (`language.text.search_words`: no stopword, no light verb before "to"; every word when nothing else is left),
    once each; None without any word."""
    return " ".join(search_words(query)[:_MAX_QUERY_WORDS]) or None


def text_search_body(flt: SearchFilter, query: str, k: int, *, size: int | None = None) -> dict[str, Any] | None:
    """The `_search` body of `search_text` (`size` hits, default k); None when nothing can match."""
    text = match_text(query)
    if text is None or matches_nothing(flt, k):
        return None
    return {
        "size": min(k if size is None else size, MAX_K),
        "query": {
            "bool": {
                "must": [{"match": {"text": {"query": text, "operator": "or"}}}],
                "filter": filter_clauses(flt),
            }
        },
        "sort": _SORT,
        "_source": False,
        "track_total_hits": False,
    }


def vector_search_body(
    flt: SearchFilter, vector: Sequence[float], model_id: str, k: int, *, size: int | None = None
) -> dict[str, Any] | None:
    """The `_search` body of `search_vector` (`vector` already normalised and padded; `size` hits, default k)."""
    if matches_nothing(flt, k):
        return None
    size = min(k if size is None else size, MAX_K)
    return {
        "size": size,
        "query": {
            "knn": {
                "vector": {
                    "vector": list(vector),
                    "k": min(size + TIE_SLACK, MAX_K),
                    "filter": {"bool": {"filter": [*filter_clauses(flt), {"term": {"model_id": model_id}}]}},
                }
            }
        },
        "sort": _SORT,
        "_source": False,
        "track_total_hits": False,
    }


def score_to_cosine(score: float, space: str = SPACE) -> float:
    """An OpenSearch kNN score back to the cosine of two unit vectors, in [-1, 1] (module docstring, Scores)."""
    score = float(score)
    if space == "cosinesimil":
        cosine = 2.0 * score - 1.0
    else:  # innerproduct: score = 1 - d for d = -cos < 0, else 1 / (1 + d)
        cosine = score - 1.0 if score >= 1.0 else 1.0 - 1.0 / max(score, 1e-9)
    return min(1.0, max(-1.0, cosine))


def bulk_bodies(lines: list[dict[str, Any]]) -> Iterator[str]:
    """NDJSON `_bulk` bodies of whole actions, at most `_BULK_ACTIONS` actions or ~`_BULK_BYTES` each."""
    chunk: list[str] = []
    actions = size = 0
    i = 0
    while i < len(lines):
        head = lines[i]
        has_source = next(iter(head)) in ("index", "create", "update")
        group = [json.dumps(line, ensure_ascii=False) for line in lines[i : i + (2 if has_source else 1)]]
        i += len(group)
        group_size = sum(len(s.encode()) + 1 for s in group)
        if chunk and (actions >= _BULK_ACTIONS or size + group_size > _BULK_BYTES):
            yield "\n".join(chunk) + "\n"
            chunk, actions, size = [], 0, 0
        chunk.extend(group)
        actions += 1
        size += group_size
    if chunk:
        yield "\n".join(chunk) + "\n"
