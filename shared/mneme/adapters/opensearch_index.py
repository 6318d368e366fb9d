"""`mneme.ports.SearchIndex` over OpenSearch: Amazon OpenSearch Service domains (`es`) and Serverless (`aoss`).

Documents. On a managed domain, one OpenSearch document per (tenant, doc_id), `_id` = "<tenant>:<doc_id>"
(a ":" or "%" inside the tenant is percent-escaped, so two tenants can never produce the same `_id`).
Serverless vector search collections do not accept custom ids: there every write indexes a new copy
with a server-generated id, and the subclass `ServerlessOpenSearchIndex` in
`mneme.adapters.opensearch_serverless` (its docstring explains the model, what is exact and what is
eventually consistent) replaces the write path, de-duplicates search results by doc_id and adds
`compact`. The mapping is `index_body(dimension)`: keyword filter fields, `text` with an English
stemming analyzer, `occurred_at` as a `date` (millisecond precision), `vector` as an HNSW `knn_vector`
(faiss, innerproduct), and, written by the Serverless subclass only,
`written_at` (epoch ms, the order of a document's copies) and `digest` (a content hash, neither indexed
nor aggregatable).

Vectors are L2-normalised before they are stored. The index has one vector dimension; a shorter vector
(another model, e.g. during a re-embedding) is zero-padded to it, which leaves every cosine between
vectors of that model unchanged, and `search_vector` only compares documents of the query's `model_id`
(a `term` filter). A longer vector is `InvalidInput`. An all-zero vector is stored without a vector: the document
stays text-searchable. Query vectors are normalised too, so the inner product of two stored unit
vectors is their cosine.

Why faiss + innerproduct. It is a mapping OpenSearch Serverless vector search collections support
("distance metrics such as Euclidean distance, cosine similarity, and dot product similarity",
https://docs.aws.amazon.com/opensearch-service/latest/developerguide/serverless-vector-search.html;
the CloudFormation `AWS::OpenSearchServerless::Index` schema lists engine faiss, method hnsw, space
innerproduct), and, unlike faiss cosinesimil, it needs no OpenSearch 2.19 engine. On unit vectors it ranks
exactly as cosine does. An index created earlier with cosinesimil keeps working: the space is read from
its mapping and its scores are converted with that space's formula.

Writes (managed domains) go through `_bulk` (chunked by count and size): `update` with `doc_as_upsert`
for documents with a vector, so an unchanged re-upsert is a no-op (`write_lines`), `index` for those
without; `update_ancestors` is a bulk partial update of the scope's documents, found page by page.

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

Consistency. With `refresh=True` (managed domains; `from_settings` sets it for service `es`) writes pass
`refresh="wait_for"` (`refresh=true` for delete-by-query), so a document is searchable when `upsert`
returns (`visibility_lag` 0). Serverless has no refresh API and no refresh parameter, so the subclass
never sends one: documents become searchable within the collection's refresh interval, its
`visibility_lag` (`fresh_window_seconds` in the settings), and read-after-write is handled above the
port (recall scores the episodes written within the lag from the record store), not here. `count`,
`doc_ids` and the paged writes see the index as of its last refresh. Serverless collections support
`_bulk`, `_search` and `_count`, but not `_delete_by_query`, `_update_by_query`, `_refresh` or scroll,
and *vector search* collections take no custom `_id` and no update by id: see `opensearch_serverless`.

Errors. opensearch-py exceptions are translated by `translate_error`: connection failures and 5xx are
`StoreUnavailable`, 429 is `Throttled`, a rejected request (4xx) is `StoreUnavailable` with the server's
reason. Bulk item failures are translated the same way, the worst one winning. A missing index reads
as empty; writes create it when the adapter knows the dimension, else raise `StoreUnavailable`.

Only this module imports opensearch-py.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import requests
from numpy.typing import NDArray
from opensearchpy import (
    ConnectionError as OpenSearchConnectionError,
)
from opensearchpy import (
    OpenSearch,
    OpenSearchException,
    RequestsAWSV4SignerAuth,
    RequestsHttpConnection,
    TransportError,
)

from mneme.adapters.vector_cache import as_utc, normalised_vector
from mneme.errors import InvalidInput, MnemeError, StoreUnavailable, Throttled
from mneme.search_models import Hit, IndexDocument, SearchFilter

if TYPE_CHECKING:
    from mneme.settings import OpenSearchIndex as OpenSearchSettings

Engine = Literal["faiss", "lucene"]

MAX_K = 10_000  # index.max_result_window and the kNN plugin's largest k
TIE_SLACK = 16  # extra kNN candidates, so exact ties at the k-th place break by doc_id
ANALYZER = "mneme_english"
SPACE = "innerproduct"  # on L2-normalised vectors: cosine ranking (module docstring, "Why faiss + innerproduct")
_SORT: list[dict[str, Any]] = [{"_score": {"order": "desc"}}, {"doc_id": {"order": "asc"}}]
_WORD = re.compile(r"[^\W_]")
_MAX_QUERY_WORDS = 128
_BULK_ACTIONS = 500
_BULK_BYTES = 5 * 1024 * 1024  # below the smallest managed-domain payload limit (10 MiB)


# -- the index ---------------------------------------------------------------------------------
def index_body(dimension: int, *, engine: Engine = "faiss") -> dict[str, Any]:
    """Settings and mappings of the index (also the source for the CDK `AWS::OpenSearchServerless::Index`).

    The analyzer only names built-in components: the standard tokenizer, `apostrophe` (drops an
    apostrophe and what follows: "Alice's" -> "alice"), lowercase, ASCII folding (as the embedded
    index's unicode61 removes diacritics) and the Porter stemmer (as its `porter` tokenizer). There are
    no stopwords, so "and" or "not" are searchable words, as in the embedded index.
    `engine` is faiss (innerproduct on normalised vectors: a mapping Serverless supports, see the module
    docstring) or lucene; nmslib is not offered because it has no filtered kNN.
    """
    if dimension < 1:
        raise ValueError(f"dimension must be positive, not {dimension}")

    def keyword() -> dict[str, str]:  # a fresh dict per field: callers may edit the body
        return {"type": "keyword"}

    return {
        "settings": {
            "index": {"knn": True},
            "analysis": {
                "analyzer": {
                    ANALYZER: {
                        "type": "custom",
                        "tokenizer": "standard",
                        "filter": ["apostrophe", "lowercase", "asciifolding", "porter_stem"],
                    }
                }
            },
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "tenant": keyword(),
                "doc_id": keyword(),
                "kind": keyword(),
                "scope_id": keyword(),
                "ancestor_ids": keyword(),
                "text": {"type": "text", "analyzer": ANALYZER},
                "occurred_at": {"type": "date"},
                "tier": keyword(),
                "session_id": keyword(),
                "visible_to": keyword(),
                "model_id": keyword(),
                "metadata": keyword(),  # `search_models.metadata_terms`: one term a top-level metadata pair
                "written_at": {"type": "long"},  # serverless only: epoch ms, orders a document's copies
                "digest": {"type": "keyword", "index": False, "doc_values": False},  # serverless: content hash
                "vector": {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {
                        "name": "hnsw",
                        "engine": engine,
                        "space_type": SPACE,
                        "parameters": {"m": 16, "ef_construction": 128},
                    },
                },
            },
        },
    }


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


# -- queries -----------------------------------------------------------------------------------
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
    if not flt.rollups:  # no fact of a tier other than raw
        other_tier = {"bool": {"must_not": [{"term": {"tier": "raw"}}]}}
        clauses.append({"bool": {"must_not": [{"bool": {"filter": [{"term": {"kind": "fact"}}, other_tier]}}]}})
    public: dict[str, Any] = {"bool": {"must_not": [{"exists": {"field": "visible_to"}}]}}
    if flt.principal is None:
        clauses.append(public)
    else:
        clauses.append(
            {"bool": {"should": [public, {"term": {"visible_to": flt.principal}}], "minimum_should_match": 1}}
        )
    return clauses


def _matches_nothing(flt: SearchFilter, k: int) -> bool:
    return k <= 0 or flt.kinds == frozenset() or flt.tiers == frozenset()


def match_text(query: str) -> str | None:
    """The query as plain words for `match` (no query syntax exists there); None without any word."""
    if not _WORD.search(query):
        return None
    return " ".join(query.split()[:_MAX_QUERY_WORDS])


def text_search_body(flt: SearchFilter, query: str, k: int, *, size: int | None = None) -> dict[str, Any] | None:
    """The `_search` body of `search_text` (`size` hits, default k); None when nothing can match."""
    text = match_text(query)
    if text is None or _matches_nothing(flt, k):
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
    if _matches_nothing(flt, k):
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


# -- errors ------------------------------------------------------------------------------------
def _reason(info: Any, fallback: str) -> str:
    error = info.get("error") if isinstance(info, dict) else None
    if isinstance(error, dict):
        cause = error.get("caused_by")
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": ")
        if isinstance(cause, dict) and cause.get("reason"):
            reason += f" ({cause['reason']})"
        return reason
    if isinstance(error, str):
        return error
    return fallback


def _by_status(status: int | None, message: str) -> MnemeError:
    details = {"status": status} if status is not None else None
    if status == 429:
        return Throttled(message, details=details)
    return StoreUnavailable(message, details=details)


def translate_error(exc: Exception, action: str) -> MnemeError:
    """The domain error for an opensearch-py exception raised while doing `action`."""
    if isinstance(exc, MnemeError):
        return exc
    if isinstance(exc, OpenSearchConnectionError):  # also timeouts and TLS failures
        return StoreUnavailable(f"search index unreachable while {action}: {exc.error}")
    if isinstance(exc, TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else None
        reason = _reason(exc.info, str(exc.error))
        if status is not None and 400 <= status < 500 and status != 429:
            return StoreUnavailable(f"search index rejected {action} ({status}): {reason}", details={"status": status})
        return _by_status(status, f"search index failed while {action} ({status}): {reason}")
    return StoreUnavailable(f"search index failed while {action}: {exc}")


def index_missing(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.status_code == 404 and exc.error == "index_not_found_exception"


def bulk_failure(response: dict[str, Any], action: str, ignore: frozenset[int] = frozenset()) -> MnemeError | None:
    """The error for a `_bulk` response with failed items (the worst status wins), or None."""
    failed: list[tuple[int, str]] = []
    for item in response.get("items", []):
        result: dict[str, Any] = next(iter(item.values()), {})
        status = int(result.get("status", 500))
        if "error" in result and status not in ignore:
            failed.append((status, _reason({"error": result["error"]}, "unknown error")))
    if not failed:
        return None
    status, reason = max(failed, key=lambda f: (f[0] == 429, f[0] >= 500, f[0]))
    message = f"{len(failed)} of {len(response.get('items', []))} documents failed while {action} ({status}): {reason}"
    return _by_status(status, message)


# -- credentials -------------------------------------------------------------------------------
class LazySigV4Auth(requests.auth.AuthBase):
    """SigV4 signing whose credentials (and default region) are looked up on the first request."""

    def __init__(self, region: str | None, service: str) -> None:
        self.region = region
        self.service = service
        self._signer: RequestsAWSV4SignerAuth | None = None
        self._lock = threading.Lock()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        return self.signer()(request)  # type: ignore[no-any-return]

    def signer(self) -> RequestsAWSV4SignerAuth:
        with self._lock:
            if self._signer is None:
                import boto3

                session = boto3.Session()
                credentials = session.get_credentials()
                region = self.region or session.region_name
                if credentials is None:
                    raise StoreUnavailable("no AWS credentials to sign search index requests")
                if not region:
                    raise StoreUnavailable("no AWS region to sign search index requests")
                self._signer = RequestsAWSV4SignerAuth(credentials, region, self.service)
            return self._signer


# -- the adapter -------------------------------------------------------------------------------
class OpenSearchIndex:
    """`mneme.ports.SearchIndex` on one index of a managed OpenSearch domain; safe to share between threads.

    `dimension` is the vector dimension used to create the index if it is missing (without it the
    index must exist, and its dimension is read from its mapping). `refresh=True` makes writes wait
    for visibility, so `visibility_lag` is 0. Serverless collections are the subclass
    `opensearch_serverless.ServerlessOpenSearchIndex`. The constructor does no I/O.
    """

    serverless = False
    visibility_lag = 0.0  # seconds until a write is searchable: writes wait for the refresh (`refresh=True`)

    def __init__(
        self,
        client: OpenSearch,
        index_name: str,
        *,
        dimension: int | None = None,
        refresh: bool = False,
        page_size: int = 1000,
    ) -> None:
        self.client = client
        self.index_name = index_name
        self.refresh = refresh
        self.page_size = page_size
        self._create_dimension = dimension
        self._dimension: int | None = None  # the index's, once known
        self._space = SPACE  # the vector field's space type, as its mapping says once read
        self._exists = False
        self._fields_added = False
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: OpenSearchSettings, *, dimension: int | None = None) -> OpenSearchIndex:
        """A SigV4-signed client for `settings.endpoint` (TLS for https); credentials are looked up lazily.
        Service `aoss` gives a `ServerlessOpenSearchIndex` whose `visibility_lag` is
        `settings.fresh_window_seconds`."""
        endpoint = settings.endpoint if "://" in settings.endpoint else f"https://{settings.endpoint}"
        client = OpenSearch(
            hosts=[endpoint],
            http_auth=LazySigV4Auth(settings.region, settings.service),
            use_ssl=endpoint.startswith("https://"),
            verify_certs=True,
            connection_class=RequestsHttpConnection,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            retry_on_timeout=True,
            pool_maxsize=16,
        )
        if settings.service == "aoss":
            from mneme.adapters.opensearch_serverless import ServerlessOpenSearchIndex

            lag = settings.fresh_window_seconds
            return ServerlessOpenSearchIndex(client, settings.index_name, dimension=dimension, visibility_lag=lag)
        return OpenSearchIndex(client, settings.index_name, dimension=dimension, refresh=True)

    # -- plumbing -------------------------------------------------------------------------------
    def _call(self, action: str, fn: Any, /, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except OpenSearchException as exc:
            raise translate_error(exc, action) from exc

    def _write_params(self, *, by_query: bool = False) -> dict[str, Any]:
        if not self.refresh:
            return {}
        return {"refresh": True if by_query else "wait_for"}

    def ensure_index(self, dimension: int) -> bool:
        """Create the index (`index_body(dimension)`) if it is missing; True if this call created it."""
        if self._call("checking the index", self.client.indices.exists, index=self.index_name):
            self._exists = True
            return False
        try:
            self.client.indices.create(index=self.index_name, body=index_body(dimension))
        except OpenSearchException as exc:
            if not (isinstance(exc, TransportError) and exc.error == "resource_already_exists_exception"):
                raise translate_error(exc, "creating the index") from exc
            self._exists = True
            return False
        self._exists = True
        self._dimension = dimension
        self._fields_added = True  # created with today's mapping
        return True

    def _ready(self) -> bool:
        """Whether the index exists, creating it when the dimension is known."""
        if self._exists:
            return True
        with self._lock:
            if not self._exists:
                if self._create_dimension is not None:
                    self.ensure_index(self._create_dimension)
                else:
                    self._exists = bool(
                        self._call("checking the index", self.client.indices.exists, index=self.index_name)
                    )
            return self._exists

    def _add_fields(self) -> None:
        """Before this process's first write, add to the index the fields its mapping gained since it was
        created (`metadata`): additive, so idempotent, and a strict mapping refuses documents carrying a field
        it lacks. A managed domain's index is the application's own (`ensure_index`)."""
        if not self._fields_added:
            mapping = {"properties": {"metadata": {"type": "keyword"}}}
            self._call("adding new fields to the mapping", self.client.indices.put_mapping, index=self.index_name,
                       body=mapping)  # fmt: skip
            self._fields_added = True

    def _vector_dimension(self) -> int | None:
        """The index's vector dimension (None when the index is missing or has no vector field)."""
        if self._dimension is None:
            try:
                mapping = self.client.indices.get_mapping(index=self.index_name)
            except OpenSearchException as exc:
                if index_missing(exc):
                    return self._create_dimension
                raise translate_error(exc, "reading the mapping") from exc
            for body in mapping.values():
                field = body.get("mappings", {}).get("properties", {}).get("vector", {})
                if field.get("dimension") is not None:
                    self._dimension = int(field["dimension"])
                    self._space = str(field.get("method", {}).get("space_type") or field.get("space_type") or SPACE)
        return self._dimension

    def _bulk(
        self,
        lines: list[dict[str, Any]],
        action: str,
        ignore: frozenset[int] = frozenset(),
        *,
        items: list[dict[str, Any]] | None = None,
    ) -> None:
        """Send action/source lines in chunks (by count and size); raise on the first failed chunk.

        `items` collects the response items of every chunk sent (the failed chunk's too), in order.
        """
        for body in _chunks(lines):
            response = self._call(action, self.client.bulk, body=body, index=self.index_name, **self._write_params())
            if items is not None:
                items.extend(response.get("items", []))
            if response.get("errors"):
                failure = bulk_failure(response, action, ignore)
                if failure is not None:
                    raise failure

    def _search_response(self, body: dict[str, Any], action: str) -> dict[str, Any] | None:
        """The whole `_search` response; None when the index is missing."""
        try:
            response: dict[str, Any] = self.client.search(index=self.index_name, body=body)
        except OpenSearchException as exc:
            if index_missing(exc):
                return None
            raise translate_error(exc, action) from exc
        return response

    def _search(self, body: dict[str, Any], action: str) -> list[dict[str, Any]]:
        response = self._search_response(body, action)
        hits: list[dict[str, Any]] = [] if response is None else response["hits"]["hits"]
        return hits

    def _pages(self, query: dict[str, Any], action: str) -> Iterator[list[dict[str, Any]]]:
        """All matching hits (`_id`, sort = [doc_id]), a page at a time, by `search_after` on doc_id."""
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": self.page_size,
                "query": query,
                "sort": [{"doc_id": {"order": "asc"}}],
                "_source": False,
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            hits = self._search(body, action)
            if hits:
                yield hits
            if len(hits) < self.page_size:
                return
            after = hits[-1]["sort"]

    # -- writes ---------------------------------------------------------------------------------
    def _latest(self, docs: Sequence[IndexDocument]) -> tuple[list[IndexDocument], int | None]:
        """The last version of each document in `docs`, and the vector dimension to write them with (the
        index is created first if it is missing)."""
        latest = {(d.tenant, d.doc_id): d for d in docs}  # the last version in a batch wins
        if not latest:
            return [], None
        needs_vectors = any(d.vector is not None for d in latest.values())
        if not self._ready():
            raise StoreUnavailable(
                f"search index {self.index_name!r} does not exist and no dimension was given to create it"
            )
        return list(latest.values()), self._vector_dimension() if needs_vectors else None

    def upsert(self, docs: Sequence[IndexDocument]) -> None:
        latest, dimension = self._latest(docs)
        lines = [line for doc in latest for line in write_lines(doc, dimension)]  # all validated first
        if lines:
            self._add_fields()
            self._bulk(lines, "indexing documents")

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        if not doc_ids or not self._ready():
            return
        lines = [{"delete": {"_id": document_id(tenant, d)}} for d in dict.fromkeys(doc_ids)]
        self._bulk(lines, "deleting documents", ignore=frozenset({404}))

    def update_ancestors(self, tenant: str, scope_id: str, ancestor_ids: Sequence[str]) -> None:
        """Give every document of `scope_id` the new path (root first, the scope itself last)."""
        if not self._ready():
            return
        path = list(ancestor_ids)
        query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"scope_id": scope_id}}]}}
        for hits in self._pages(query, "moving a scope"):
            lines: list[dict[str, Any]] = []
            for hit in hits:
                lines.append({"update": {"_id": hit["_id"], "retry_on_conflict": 3}})
                lines.append({"doc": {"ancestor_ids": path}})
            self._bulk(lines, "moving a scope", ignore=frozenset({404}))  # 404: deleted meanwhile

    def clear_tenant(self, tenant: str) -> None:
        if not self._ready():
            return
        self._call(
            "clearing a tenant",
            self.client.delete_by_query,
            index=self.index_name,
            body={"query": {"term": {"tenant": tenant}}},
            conflicts="proceed",
            **self._write_params(by_query=True),
        )

    def compact(self, tenant: str) -> int:
        """Delete all but the newest copy of each of the tenant's documents; returns how many copies went.

        Only a Serverless collection can hold several copies of a document (see `opensearch_serverless`);
        on a managed domain the `_id` is unique, so this is 0 without any request. The sweep
        (`Indexer.sweep`) should call it, when the index has it, for the tenants it touched.
        """
        return 0

    # -- reads ----------------------------------------------------------------------------------
    def count(self, tenant: str) -> int:
        """How many documents the tenant has (distinct doc_ids)."""
        try:
            response = self.client.count(index=self.index_name, body={"query": {"term": {"tenant": tenant}}})
        except OpenSearchException as exc:
            if index_missing(exc):
                return 0
            raise translate_error(exc, "counting documents") from exc
        return int(response["count"])

    def doc_ids(self, tenant: str) -> set[str]:
        return {
            hit["sort"][0] for hits in self._pages({"term": {"tenant": tenant}}, "listing documents") for hit in hits
        }

    def _ranked(
        self,
        k: int,
        body_for: Callable[[int | None], dict[str, Any] | None],
        action: str,
        score: Callable[[Any], float],
    ) -> list[Hit]:
        """Hits from the sort values [score, doc_id] of `body_for(None)` (the size the body sets itself)."""
        body = body_for(None)
        if body is None:
            return []
        return [Hit(doc_id=h["sort"][1], score=score(h["sort"][0])) for h in self._search(body, action)]

    def search_text(self, flt: SearchFilter, query: str, k: int) -> list[Hit]:
        return self._ranked(k, lambda size: text_search_body(flt, query, k, size=size), "searching text", float)

    def get_vectors(self, tenant: str, model_id: str, doc_ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """None: a round trip here costs more than the records' own vectors (DynamoDB returns them)."""
        return {}

    def search_vector(self, flt: SearchFilter, vector: NDArray[np.float32], model_id: str, k: int) -> list[Hit]:
        query = np.asarray(vector, dtype=np.float64).reshape(-1)
        if not np.isfinite(query).all():
            raise InvalidInput("query vector has non-finite values")
        norm = float(np.linalg.norm(query))
        if norm == 0.0 or _matches_nothing(flt, k):
            return []
        dimension = self._vector_dimension()
        if dimension is None:
            return []  # no index (or no vector field) yet: nothing to find
        padded_query = padded(query / norm, dimension, "query")
        return self._ranked(
            k,
            lambda size: vector_search_body(flt, padded_query, model_id, k, size=size),
            "searching vectors",
            lambda score: score_to_cosine(score, self._space),
        )


def _chunks(lines: list[dict[str, Any]]) -> Iterator[str]:
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
