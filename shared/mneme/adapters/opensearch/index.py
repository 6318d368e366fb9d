"""`mneme.ports.SearchIndex` over OpenSearch: Amazon OpenSearch Service domains (`es`) and Serverless (`aoss`).

Documents. On a managed domain, one OpenSearch document per (tenant, doc_id), `_id` = "<tenant>:<doc_id>"
(a ":" or "%" inside the tenant is percent-escaped, so two tenants can never produce the same `_id`).
Serverless vector search collections do not accept custom ids: there every write indexes a new copy
with a server-generated id, and the subclass `ServerlessOpenSearchIndex` in
`mneme.adapters.opensearch.serverless` (its docstring explains the model, what is exact and what is
eventually consistent) replaces the write path, de-duplicates search results by doc_id and adds
`compact`.

Writes (managed domains) go through `_bulk` (chunked by count and size): `update` with `doc_as_upsert`
for documents with a vector, so an unchanged re-upsert is a no-op (`write_lines`), `index` for those
without; `update_ancestors` is a bulk partial update of the scope's documents, found page by page.

Consistency. With `refresh=True` (managed domains; `bootstrap` sets it for service `es`) writes pass
`refresh="wait_for"` (`refresh=true` for delete-by-query), so a document is searchable when `upsert`
returns (`visibility_lag` 0). Serverless has no refresh API and no refresh parameter, so the subclass
never sends one: documents become searchable within the collection's refresh interval, its
`visibility_lag` (`fresh_window_seconds` in the settings), and read-after-write is handled above the
port (recall scores the episodes written within the lag from the record store), not here. `count`,
`doc_ids` and the paged writes see the index as of its last refresh. Serverless collections support
`_bulk`, `_search` and `_count`, but not `_delete_by_query`, `_update_by_query`, `_refresh` or scroll,
and *vector search* collections take no custom `_id` and no update by id: see `serverless`.

Errors are translated at the boundary (`errors`). A missing index reads as empty; writes
create it when the adapter knows the dimension, else raise `StoreUnavailable`.

The parts: `queries` (documents, `_bulk` lines, filters and search bodies, scores),
`lifecycle` (the mapping, creating the index, its dimension), `errors`,
`auth` (the SigV4-signed client) and `serverless`. Which class serves a setting
(service `es` or `aoss`) is chosen in `mneme.bootstrap`. Only these adapters import opensearch-py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from opensearchpy import OpenSearchException

from mneme.adapters.opensearch.errors import bulk_failure, index_missing, translate_error
from mneme.adapters.opensearch.lifecycle import IndexLifecycle
from mneme.adapters.opensearch.queries import (
    BodyFor,
    Scorer,
    bulk_bodies,
    document_id,
    matches_nothing,
    padded,
    score_to_cosine,
    text_search_body,
    vector_search_body,
    write_lines,
)
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.search_models import Hit, IndexDocument, SearchFilter

if TYPE_CHECKING:
    from opensearchpy import OpenSearch


class OpenSearchIndex(IndexLifecycle):
    """`mneme.ports.SearchIndex` on one index of a managed OpenSearch domain; safe to share between threads.

    `dimension` is the vector dimension used to create the index if it is missing (without it the
    index must exist, and its dimension is read from its mapping). `refresh=True` makes writes wait
    for visibility, so `visibility_lag` is 0. Serverless collections are the subclass
    `serverless.ServerlessOpenSearchIndex`. The constructor does no I/O.
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
        super().__init__(client, index_name, dimension=dimension)
        self.refresh = refresh
        self.page_size = page_size

    # -- plumbing -------------------------------------------------------------------------------
    def _write_params(self, *, by_query: bool = False) -> dict[str, Any]:
        if not self.refresh:
            return {}
        return {"refresh": True if by_query else "wait_for"}

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
        for body in bulk_bodies(lines):
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

        Only a Serverless collection can hold several copies of a document (see `serverless`);
        on a managed domain the `_id` is unique, so this is 0 without any request.
        """
        return 0

    def compact_recent(self, since: datetime) -> dict[str, int]:
        """`compact` for the documents written since `since` (the scheduled repair's window), per tenant:
        nothing to do on a managed domain, without any request."""
        return {}

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

    def _ranked(self, k: int, body_for: BodyFor, action: str, score: Scorer) -> list[Hit]:
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
        if norm == 0.0 or matches_nothing(flt, k):
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
