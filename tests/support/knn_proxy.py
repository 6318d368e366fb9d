"""A test double: OpenSearch's `knn` query in front of osmem-server, which has none.

`KnnProxy(upstream)` listens on loopback and forwards every request to `upstream` (an osmem clone)
unchanged, except a `_search` whose `query` is exactly one `knn` clause. That one it answers itself,
following OpenSearch's documented semantics for what mneme uses (docs: "Spaces", "Efficient k-NN filtering"):

- the field must be a `knn_vector` of the index's mapping (read from osmem); its `space_type` decides the
  score: cosinesimil (2 - d) / 2 with d = 1 - cos (a zero query vector is rejected), l2 1 / (1 + d) with
  d the squared distance, innerproduct (faiss/nmslib) 1 / (1 + d) for d = -x.y >= 0, else 1 - d;
  arithmetic in float32, as the engines store vectors;
- `filter` is efficient filtering: the k nearest among the documents the filter matches (osmem evaluates
  the filter: the double asks it for the filtered documents that have the field, with their vectors);
- the query matches those k documents (`hits.total` = how many, unless `track_total_hits` is false), then
  `sort` (`_score` and single-valued keyword fields of `_source`), `from`, `size` and `_source` (osmem
  applies includes/excludes to the page's documents) shape the response as OpenSearch's.

Anything else in such a request (another body key, knn parameters such as `min_score`, a sort it cannot
model, a wrong dimension, more than 10,000 filtered documents) is an HTTP 400 with an OpenSearch-shaped
error; a `knn` elsewhere (inside `bool`, `hybrid`, `_msearch`) reaches osmem, which rejects it with a 400.

Not modelled: HNSW's approximation (results here are exact, so a real engine may miss a neighbour this
finds), several shards (OpenSearch takes up to k per shard, then `size`), refresh timing (osmem makes writes
visible at once), score ties (OpenSearch orders them by internal doc id; here by osmem's order), nested fields,
radial search, rescoring and quantisation.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import numpy as np

MAX_K = 10_000
_SEARCH = re.compile(r"^/([^/_][^/?]*)/_search(\?.*)?$")
_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length"}
_BODY_KEYS = {"query", "size", "from", "sort", "_source", "track_total_hits"}


class Rejected(Exception):
    """A request the double (like OpenSearch) refuses: HTTP 400."""


def _score(space: str, engine: str, docs: np.ndarray, query: np.ndarray) -> np.ndarray:
    if space == "cosinesimil":
        if not query.any():
            raise Rejected("zero vector is not supported when space type is [cosinesimil]")
        norms = np.linalg.norm(docs, axis=1) * np.linalg.norm(query)
        distance = np.float32(1) - (docs @ query) / norms
        return (np.float32(2) - distance) / np.float32(2)
    if space == "l2":
        return np.float32(1) / (np.float32(1) + ((docs - query) ** 2).sum(axis=1))
    if space == "innerproduct" and engine in ("faiss", "nmslib"):
        distance = -(docs @ query)
        return np.where(
            distance >= 0, np.float32(1) / (np.float32(1) + np.maximum(distance, 0)), np.float32(1) - distance
        )
    raise Rejected(f"the knn double does not model space type [{space}] on engine [{engine}]")


class KnnProxy:
    """The loopback proxy; `url` is its address, `close()` stops it (the upstream stays up)."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve = functools.partial(self.server.serve_forever, poll_interval=0.02)  # close() waits for one poll
        self.thread = threading.Thread(target=serve, name="knn-proxy", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, {k: v for k, v in response.getheaders() if k.lower() not in _HOP}, data
        finally:
            connection.close()

    def upstream_json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        status, _, raw = self.forward(method, path, data, {"Content-Type": "application/json"})
        return status, json.loads(raw) if raw else None

    # -- the knn query ------------------------------------------------------------------------------
    def knn_search(self, index: str, body: dict[str, Any]) -> tuple[int, Any]:
        field, clause, k = _knn_clause(body)
        status, mapping = self.upstream_json("GET", f"/{index}/_mapping")
        if status != 200:
            return status, mapping  # e.g. index_not_found_exception, as OpenSearch answers
        if len(mapping) != 1:
            raise Rejected("the knn double searches one concrete index")
        ((index_name, found),) = mapping.items()
        spec = found.get("mappings", {}).get("properties", {}).get(field, {})
        if spec.get("type") != "knn_vector":
            raise Rejected(f"field [{field}] is not a knn_vector field")
        method = spec.get("method", {})
        space = method.get("space_type", spec.get("space_type", "l2"))
        query = np.asarray(clause.get("vector"), dtype=np.float32)
        if query.ndim != 1 or query.size != spec["dimension"] or not np.isfinite(query).all():
            raise Rejected(
                f"query vector has invalid dimension or values; the field's dimension is {spec['dimension']}"
            )

        sort = self.sort_keys(body.get("sort", ["_score"]))
        filters = [{"exists": {"field": field}}] + ([clause["filter"]] if "filter" in clause else [])
        status, found_docs = self.upstream_json(
            "POST",
            f"/{index}/_search",
            {
                "size": MAX_K,
                "query": {"bool": {"filter": filters}},
                "_source": [field, *(name for name, _ in sort if name != "_score")],
                "track_total_hits": True,
            },
        )
        if status != 200:
            return status, found_docs
        candidates = found_docs["hits"]["hits"]
        if found_docs["hits"]["total"]["value"] > len(candidates):
            raise Rejected(f"the knn double evaluates at most {MAX_K} filtered documents")
        scores = (
            _score(
                space,
                method.get("engine", "faiss"),
                np.array([h["_source"][field] for h in candidates], np.float32),
                query,
            )
            if candidates
            else np.zeros(0, np.float32)
        )
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])[:k]  # stable: ties keep osmem's order
        matched = [(candidates[i], float(scores[i])) for i in order]
        for name, descending in reversed(sort):  # the request's sort, last key first (stable sorts)
            matched.sort(key=_sort_key(name, descending), reverse=descending)
        start = body.get("from", 0)
        page = matched[start : start + body.get("size", 10)]
        sources = self.sources(index, [hit["_id"] for hit, _ in page], body.get("_source", True))
        hits = []
        for hit, score in page:
            out: dict[str, Any] = {"_index": index_name, "_id": hit["_id"], "_score": score}
            if hit["_id"] in sources:
                out["_source"] = sources[hit["_id"]]
            if "sort" in body:
                out["sort"] = [score if name == "_score" else _field(hit, name, d) for name, d in sort]
            hits.append(out)
        result: dict[str, Any] = {"max_score": max((s for _, s in matched), default=None), "hits": hits}
        if body.get("track_total_hits", True) is not False:
            result["total"] = {"value": len(matched), "relation": "eq"}
        shards = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
        return 200, {"took": 0, "timed_out": False, "_shards": shards, "hits": result}

    def sort_keys(self, sort: Any) -> list[tuple[str, bool]]:
        """[(field, descending)] of a request's `sort` ("_score" sorts descending by default)."""
        keys: list[tuple[str, bool]] = []
        for entry in sort if isinstance(sort, list) else [sort]:
            if isinstance(entry, dict) and len(entry) == 1:
                ((name, spec),) = entry.items()
            else:
                name, spec = entry, {}
            order = spec if isinstance(spec, str) else spec.get("order") if isinstance(spec, dict) else None
            if not isinstance(name, str) or "." in name or (isinstance(spec, dict) and set(spec) - {"order"}):
                raise Rejected(f"the knn double does not model the sort {entry!r}")
            keys.append((name, (order or ("desc" if name == "_score" else "asc")) == "desc"))
        return keys

    def sources(self, index: str, ids: list[str], source: Any) -> dict[str, Any]:
        """The page's `_source`s, with the request's includes/excludes applied by osmem."""
        if source is False or not ids:
            return {}
        body = {"size": len(ids), "query": {"ids": {"values": ids}}, "_source": source}
        status, response = self.upstream_json("POST", f"/{index}/_search", body)
        if status != 200:
            raise Rejected(f"reading _source failed: {response}")
        return {h["_id"]: h.get("_source", {}) for h in response["hits"]["hits"]}


def _knn_clause(body: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
    """The searched field, its [knn] clause and k, as OpenSearch would accept them (else Rejected)."""
    unknown = set(body) - _BODY_KEYS
    if unknown:
        raise Rejected(f"the knn double does not model {sorted(unknown)} in a knn search")
    fields = body["query"]["knn"]
    if not isinstance(fields, dict) or len(fields) != 1 or not isinstance(next(iter(fields.values())), dict):
        raise Rejected("[knn] query takes exactly one field")
    ((field, clause),) = fields.items()
    if set(clause) - {"vector", "k", "filter"}:
        raise Rejected(f"the knn double does not model {sorted(set(clause) - {'vector', 'k', 'filter'})} in [knn]")
    k = clause.get("k")
    if not isinstance(k, int) or isinstance(k, bool) or not 0 < k <= MAX_K:
        raise Rejected(f"[knn] requires k between 1 and {MAX_K}, not {k!r}")
    return field, clause, k


def _field(hit: dict[str, Any], name: str, descending: bool) -> Any:
    value = hit.get("_source", {}).get(name)
    if isinstance(value, list):  # a multi-valued field sorts by its min (asc) or max (desc)
        value = (max if descending else min)(value) if value else None
    return value


def _sort_key(name: str, descending: bool) -> Callable[[tuple[dict[str, Any], float]], tuple[bool, Any]]:
    def key(match: tuple[dict[str, Any], float]) -> tuple[bool, Any]:
        hit, score = match
        value = score if name == "_score" else _field(hit, name, descending)
        return (value is not None) == descending, value if value is not None else 0  # missing values sort last

    return key


def _handler(proxy: KnnProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def handle_one(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            match = _SEARCH.match(self.path)
            try:
                parsed = json.loads(body) if match and self.command in ("GET", "POST") and body else None
            except ValueError:
                parsed = None  # osmem answers a malformed body
            query = parsed.get("query") if isinstance(parsed, dict) else None
            if match and isinstance(query, dict) and list(query) == ["knn"]:
                try:
                    status, answer = proxy.knn_search(match.group(1), parsed)  # type: ignore[arg-type]
                except Rejected as exc:
                    error = {"type": "illegal_argument_exception", "reason": str(exc)}
                    status, answer = 400, {"error": {**error, "root_cause": [error]}, "status": 400}
                data = json.dumps(answer).encode()
                self.send(status, {"Content-Type": "application/json; charset=UTF-8"}, data)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            self.send(*proxy.forward(self.command, self.path, body, headers))

        def send(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_one

    return Handler
