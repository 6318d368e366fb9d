"""`ServerlessOpenSearchIndex`: the OpenSearch adapter on an Amazon OpenSearch Serverless VECTORSEARCH
collection.

Why. Vector search collections assign document ids themselves: a `_bulk` `index` action may not carry
an `_id`, and there is no upsert, no update by id, no `_update_by_query`, `_delete_by_query`, `_refresh`
or scroll. Search is eventually consistent: a write becomes visible at the collection's next refresh.

Documents. Every write indexes a new *copy* of a document, without `_id` (the server's id comes back in
the `_bulk` response). `tenant` + `doc_id` identify the document; `written_at` (epoch ms) orders its
copies, and the newest copy is the document. A writer gives a copy max(its clock, newest copy it saw + 1),
its clock being strictly increasing (`WriteClock`), so a copy outranks every copy its writer could see.

Writes. Lookups are `term tenant` + `terms doc_id` (or `term scope_id`) searches, sorted by
[doc_id asc, written_at desc] and paged with `search_after` *inclusively* at the last (doc_id,
written_at): a copy tied with the page's last one is fetched again (and dropped by server id) rather than
skipped, and a page that is one tie group is widened.
- `upsert`: look up the batch's copies, index the new copies, then bulk-delete the old ones by server id.
  Indexing first means a failure never leaves a document missing: at worst an old copy survives next to
  the new one, hidden by de-duplication and removed by `compact`. A document whose newest visible copy
  already has the content (`digest`, a hash of the copy) is not rewritten: as on a managed domain, an
  unchanged re-upsert is a no-op and leaves no deleted copy to skew BM25 statistics until a merge.
- `delete`, `clear_tenant`: look up the copies and bulk-delete them by server id.
- `update_ancestors`: no partial update exists, so a scope move re-indexes: it reads the scope's copies
  with `_source`, indexes them with the new path (`written_at` + 1: the order between a document's copies
  is kept, and a later upsert still outranks the moved copy), then deletes the old ones.
Each writer also remembers the server ids it indexed in the last `RECENT_SECONDS` (`RecentWrites`, `copies`,
bounded) and deletes those too when it replaces, deletes or clears the same documents.

Reads. `search_text` and `search_vector` de-duplicate by doc_id, keeping the best-scoring copy (the
first in [_score desc, doc_id asc] order). They ask for 2k + 16 candidates and, while duplicates leave
fewer than k distinct documents and more candidates exist, ask again for twice as many (up to 10,000).
`count` and `doc_ids` count distinct doc_ids exactly, with a paged `composite` aggregation on doc_id.

Compaction keeps the newest copy of a document and deletes the others. Duplicates only arise from writes,
so the scheduled repair compacts a window (`compact_recent(since)`): a `composite` aggregation on (tenant,
doc_id) over the copies with `written_at` >= since - `visibility_lag` (a copy written before the previous
window but not yet visible then is still in it) names the documents touched, and only their copies are
looked up; its cost follows the writes since the last window, not the size of the index. A full pass,
`compact(tenant)`, aggregates every doc_id of the tenant (doc_count > 1). What only the full pass finds: a
duplicate none of whose copies was written in the window, i.e. a scope move whose deletes failed
(`update_ancestors` keeps `written_at` + 1), or copies left by a compaction tick that never ran.

What is exact, what is eventual.
- Exact once the writes are visible: one copy per document after an upsert, a delete or a clear; `count`
  and `doc_ids` are distinct doc_ids; searches never return a doc_id twice and return k distinct
  documents when k exist (within the first 10,000 candidates).
- Exact within one process, for any refresh lag under `RECENT_SECONDS`: upsert -> upsert, upsert -> delete
  and upsert -> clear_tenant of the same document remove the copies this process wrote (`RecentWrites`).
- Eventual: a copy written by *another* process and not yet visible survives a replace (a duplicate, hidden
  by de-duplication, but a search may match it on its old text or filters until `compact` removes it; and
  if the replace was an unchanged re-upsert, skipped, that newer copy wins) or a delete/clear (the
  document lingers until the domain's `rebuild`: the record store is the truth).
  `update_ancestors` moves only visible copies: a copy still invisible keeps its old path. Counts and
  lookups see the index as of its last refresh. The newest copy is chosen by `written_at`, so writers'
  clocks are assumed to agree to within the time between two writes of the same document.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mneme.adapters.opensearch.copies import Copy, Key, RecentWrites, WriteClock, content_digest
from mneme.adapters.opensearch.errors import index_not_built
from mneme.adapters.opensearch.index import OpenSearchIndex
from mneme.adapters.opensearch.queries import MAX_K, TIE_SLACK, BodyFor, Scorer, document_source
from mneme.errors import MnemeError, StoreUnavailable
from mneme.search_models import Hit, IndexDocument

if TYPE_CHECKING:
    from opensearchpy import OpenSearch


COPY_SORT: list[dict[str, Any]] = [
    {"doc_id": {"order": "asc"}},
    {"written_at": {"order": "desc", "missing": "_last"}},
]
SOURCE_PAGE = 200  # copies per page when reading `_source` (vectors included)
TERMS_CHUNK = 1000  # doc_ids per lookup query
_NOT_FOUND = frozenset({404})
# Pauses between `_bulk` attempts while a new index is still being built: Serverless creates an index
# asynchronously, and until it is ready a write is refused with 404 index_not_found. 7.5 s at most, well
# inside remember's 25 s function timeout; what still fails stays unindexed for the repair sweep.
INDEX_WAIT = (0.5, 1.0, 2.0, 4.0)


def candidates(k: int) -> int:
    """How many hits a de-duplicating search asks for first: room for a duplicate of every result."""
    return min(2 * max(k, 0) + TIE_SLACK, MAX_K)


class ServerlessOpenSearchIndex(OpenSearchIndex):
    """`mneme.ports.SearchIndex` on one index of a Serverless collection (see the module docstring):
    copies with server-generated ids, de-duplicated reads, `compact`; never a refresh parameter.
    `visibility_lag` is how long a write may take to become searchable (the collection's refresh
    interval, with margin). Thread-safe; the constructor does no I/O."""

    serverless = True

    def __init__(
        self,
        client: OpenSearch,
        index_name: str,
        *,
        dimension: int | None = None,
        page_size: int = 1000,
        visibility_lag: float = 120.0,
        clock: WriteClock | None = None,
        index_wait: Sequence[float] = INDEX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client, index_name, dimension=dimension, page_size=page_size)
        self.visibility_lag = visibility_lag
        self.index_wait = tuple(index_wait)
        self.sleep = sleep
        self.clock = clock if clock is not None else WriteClock()
        self.recent = RecentWrites()

    # -- lookups ------------------------------------------------------------------------------------
    def copies(
        self, query: dict[str, Any], action: str, *, source: bool | list[str] = False, page_size: int | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Every copy matching `query` (`_id`, sort = [doc_id, written_at]), a page at a time, each once."""
        base = page_size or self.page_size
        size = base
        after: list[Any] | None = None
        seen: set[str] = set()  # copies already yielded that tie with `after`
        while True:
            body: dict[str, Any] = {
                "size": size,
                "query": query,
                "sort": COPY_SORT,
                "_source": source,
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            hits = self._search(body, action)
            fresh = [hit for hit in hits if hit["_id"] not in seen]
            if fresh:
                yield fresh
            if len(hits) < size:
                return
            last = hits[-1]["sort"]
            tied = {hit["_id"] for hit in hits if hit["sort"] == last}
            if not fresh and len(tied) < len(hits):  # a full page of copies already seen
                raise StoreUnavailable(f"search index paging made no progress while {action}")
            if len(tied) < len(hits):  # go on from the last (doc_id, written_at), inclusive
                after, seen, size = [last[0], last[1] + 1], tied, base
            elif size < MAX_K:  # the whole page is one tie group: widen it
                seen, size = seen | tied, min(2 * size, MAX_K)
            else:  # 10,000 copies of one document written in the same millisecond: skip the rest
                after, seen, size = last, set(), base

    def _find(self, keys: Iterable[Key], action: str) -> dict[Key, list[Copy]]:
        """The visible copies of each key, newest first."""
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, doc_id in dict.fromkeys(keys):
            by_tenant[tenant].append(doc_id)
        found: dict[Key, list[Copy]] = defaultdict(list)
        for tenant, doc_ids in by_tenant.items():
            for start in range(0, len(doc_ids), TERMS_CHUNK):
                chunk = doc_ids[start : start + TERMS_CHUNK]
                query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"terms": {"doc_id": chunk}}]}}
                for hits in self.copies(query, action, source=["digest"]):
                    for hit in hits:
                        digest = (hit.get("_source") or {}).get("digest")
                        found[(tenant, hit["sort"][0])].append(Copy(hit["_id"], int(hit["sort"][1]), digest))
        return found

    def _doc_id_buckets(self, tenant: str, action: str) -> Iterator[list[dict[str, Any]]]:
        """The tenant's doc_ids with their copy counts (`{"key": {"doc_id": ...}, "doc_count": n}`), paged."""
        return self._buckets({"term": {"tenant": tenant}}, ("doc_id",), action)

    def _buckets(self, query: dict[str, Any], fields: Sequence[str], action: str) -> Iterator[list[dict[str, Any]]]:
        """The distinct values of `fields` among the copies matching `query`, with their copy counts
        (`{"key": {field: ...}, "doc_count": n}`), a `composite` aggregation page at a time."""
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": self.page_size,
                "sources": [{field: {"terms": {"field": field}}} for field in fields],
            }
            if after is not None:
                composite["after"] = after
            body = {"size": 0, "query": query, "aggs": {"doc_ids": {"composite": composite}}, "track_total_hits": False}
            response = self._search_response(body, action)
            agg = (response or {}).get("aggregations", {}).get("doc_ids", {})
            buckets: list[dict[str, Any]] = agg.get("buckets", [])
            if buckets:
                yield buckets
            if len(buckets) < self.page_size or not agg.get("after_key"):
                return
            after = agg["after_key"]

    # -- bulk -------------------------------------------------------------------------------------
    def _bulk(
        self,
        lines: list[dict[str, Any]],
        action: str,
        ignore: frozenset[int] = frozenset(),
        *,
        items: list[dict[str, Any]] | None = None,
    ) -> None:
        """`OpenSearchIndex._bulk`, tried again after `index_wait` pauses while the index is still being
        built (every item, or the request, refused with index_not_found: nothing was written)."""
        for pause in (*self.index_wait, None):
            attempt: list[dict[str, Any]] = []
            try:
                super()._bulk(lines, action, ignore, items=attempt)
            except MnemeError as exc:
                if pause is None or not index_not_built(exc, attempt):
                    if items is not None:
                        items.extend(attempt)
                    raise
                self.sleep(pause)
                continue
            if items is not None:
                items.extend(attempt)
            return

    def _index(self, keys: Sequence[Key], sources: Sequence[dict[str, Any]], action: str) -> None:
        """Index one new copy per source (no `_id`); remember the server ids of those that landed."""
        lines: list[dict[str, Any]] = []
        for source in sources:
            lines += [{"index": {}}, source]
        items: list[dict[str, Any]] = []
        try:
            self._bulk(lines, action, items=items)
        finally:
            for key, item in zip(keys, items, strict=False):
                result = item.get("index", {})
                if 200 <= int(result.get("status", 500)) < 300 and result.get("_id"):
                    self.recent.remember(key, result["_id"])

    def _delete(self, server_ids: Iterable[str], action: str) -> int:
        """Bulk-delete copies by server id (already gone is fine); returns how many were deleted."""
        ids = list(dict.fromkeys(server_ids))
        if not ids:
            return 0
        items: list[dict[str, Any]] = []
        self._bulk([{"delete": {"_id": sid}} for sid in ids], action, _NOT_FOUND, items=items)
        self.recent.forget(ids)
        return sum(1 for item in items if item.get("delete", {}).get("result") == "deleted")

    # -- writes -----------------------------------------------------------------------------------
    def _add_fields(self) -> None:
        """Nothing: the first write creates the index with its whole mapping (`ensure_index`, from
        `index_body`; the stack declares no index, infra/mneme_infra/search.py says why), and this adapter
        adds no field to an existing one."""

    def upsert(self, docs: Sequence[IndexDocument]) -> None:
        """Index new copies of `docs` (the last of each (tenant, doc_id)), then delete the copies they replace.

        A document whose newest visible copy already has its content is left alone (its older copies are
        still deleted), as an unchanged re-upsert is a no-op on a managed domain: no deleted copy skews
        BM25 statistics until a merge. Not when this process wrote a copy of it that is not visible yet.
        """
        latest, dimension = self._latest(docs)
        sources: dict[Key, dict[str, Any]] = {}
        for doc in latest:  # every document validated before any request
            source = document_source(doc, dimension)
            sources[(doc.tenant, doc.doc_id)] = {**source, "digest": content_digest(source)}
        found = self._find(sources, "indexing documents")
        now = self.clock()
        keys: list[Key] = []
        new: list[dict[str, Any]] = []
        stale: list[str] = []
        for key, source in sources.items():
            seen = found.get(key, [])
            visible = {copy.server_id for copy in seen}
            mine = self.recent.ids([key])
            if seen and seen[0].digest == source["digest"] and visible.issuperset(mine):
                stale += [copy.server_id for copy in seen[1:]]
                continue
            written = max([now, *(copy.written_at + 1 for copy in seen)])  # newer than every copy seen
            self.clock.observe(written)
            keys.append(key)
            new.append({**source, "written_at": written})
            stale += [copy.server_id for copy in seen] + mine
        if new:
            self._index(keys, new, "indexing documents")
        self._delete(stale, "replacing documents")

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        if not doc_ids or not self._ready():
            return
        keys = [(tenant, doc_id) for doc_id in dict.fromkeys(doc_ids)]
        found = self._find(keys, "deleting documents")
        visible = [copy.server_id for key in keys for copy in found.get(key, [])]
        self._delete(visible + self.recent.ids(keys), "deleting documents")

    def clear_tenant(self, tenant: str) -> None:
        """No `_delete_by_query` on Serverless: find the tenant's copies and bulk-delete them."""
        if not self._ready():
            return
        for hits in self.copies({"term": {"tenant": tenant}}, "clearing a tenant"):
            self._delete([hit["_id"] for hit in hits], "clearing a tenant")
        self._delete(self.recent.tenant_ids(tenant), "clearing a tenant")

    def update_ancestors(self, tenant: str, scope_id: str, ancestor_ids: Sequence[str]) -> None:
        """Re-index the scope's copies with the new path (root first, the scope itself last)."""
        if not self._ready():
            return
        path = list(ancestor_ids)
        query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"scope_id": scope_id}}]}}
        page = min(self.page_size, SOURCE_PAGE)
        for hits in self.copies(query, "moving a scope", source=True, page_size=page):
            moving = [hit for hit in hits if hit["_source"].get("ancestor_ids") != path]  # also skips our copies
            if not moving:
                continue
            keys: list[Key] = []
            sources: list[dict[str, Any]] = []
            for hit in moving:
                source = hit["_source"]
                written = int(source.get("written_at") or 0) + 1
                self.clock.observe(written)
                keys.append((tenant, source["doc_id"]))
                moved = {**source, "ancestor_ids": path}
                sources.append({**moved, "digest": content_digest(moved), "written_at": written})
            self._index(keys, sources, "moving a scope")
            self._delete([hit["_id"] for hit in moving], "moving a scope")

    def compact(self, tenant: str) -> int:
        """The full pass: delete all but the newest copy of every doc_id of the tenant; returns how many went.
        It aggregates every document of the tenant: the scheduled repair runs `compact_recent`."""
        removed = 0
        for buckets in self._doc_id_buckets(tenant, "compacting documents"):
            removed += self._keep_newest(tenant, [b["key"]["doc_id"] for b in buckets if b["doc_count"] > 1])
        return removed

    def compact_recent(self, since: datetime) -> dict[str, int]:
        """The windowed pass: delete all but the newest copy of every document, of any tenant, with a copy
        written at or after `since` less `visibility_lag`; returns the copies removed per tenant (those
        that lost any). Copies of those documents older than the window go too; other documents are not read."""
        start = int(since.timestamp() * 1000) - int(self.visibility_lag * 1000)
        query = {"range": {"written_at": {"gte": start}}}
        removed: dict[str, int] = defaultdict(int)
        for buckets in self._buckets(query, ("tenant", "doc_id"), "compacting documents"):
            touched: dict[str, list[str]] = defaultdict(list)
            for bucket in buckets:
                touched[bucket["key"]["tenant"]].append(bucket["key"]["doc_id"])
            for tenant, doc_ids in touched.items():
                removed[tenant] += self._keep_newest(tenant, doc_ids)
        return {tenant: count for tenant, count in removed.items() if count}

    def _keep_newest(self, tenant: str, doc_ids: Sequence[str]) -> int:
        """Delete all but the newest visible copy of each of the tenant's `doc_ids`; returns how many went."""
        removed = 0
        for start in range(0, len(doc_ids), TERMS_CHUNK):
            chunk = list(doc_ids[start : start + TERMS_CHUNK])
            query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"terms": {"doc_id": chunk}}]}}
            stale: list[str] = []
            kept: str | None = None
            for hits in self.copies(query, "compacting documents"):
                for hit in hits:  # newest first within each doc_id
                    if hit["sort"][0] == kept:
                        stale.append(hit["_id"])
                    else:
                        kept = hit["sort"][0]
            removed += self._delete(stale, "compacting documents")
        return removed

    # -- reads ------------------------------------------------------------------------------------
    def count(self, tenant: str) -> int:
        return sum(len(buckets) for buckets in self._doc_id_buckets(tenant, "counting documents"))

    def doc_ids(self, tenant: str) -> set[str]:
        return {b["key"]["doc_id"] for buckets in self._doc_id_buckets(tenant, "listing documents") for b in buckets}

    def _ranked(self, k: int, body_for: BodyFor, action: str, score: Scorer) -> list[Hit]:
        """The top k distinct doc_ids (best-scoring copy of each), widening while duplicates crowd them out."""
        size = candidates(k)
        while True:
            body = body_for(size)
            if body is None:
                return []
            hits = self._search(body, action)
            best: dict[str, Hit] = {}
            for hit in hits:  # [_score desc, doc_id asc]: a doc_id's first hit is its best
                doc_id = hit["sort"][1]
                if doc_id not in best:
                    best[doc_id] = Hit(doc_id=doc_id, score=score(hit["sort"][0]))
            if len(best) >= k or len(hits) < size or size >= MAX_K:
                return list(best.values())[:k]
            size = min(2 * size, MAX_K)
