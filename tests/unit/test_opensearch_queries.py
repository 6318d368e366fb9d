"""OpenSearchIndex without a server: request bodies (reviewed snapshots), scores, errors, refresh, SigV4.

Snapshots live in tests/unit/snapshots/opensearch/*.json and are compared as parsed JSON. After an
intended change, regenerate them with MNEME_UPDATE_SNAPSHOTS=1 and review the diff.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from opensearchpy import (
    AuthorizationException,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    RequestError,
    RequestsHttpConnection,
    TransportError,
)

from mneme.adapters.opensearch import index as opensearch_index
from mneme.adapters.opensearch.copies import WriteClock, content_digest
from mneme.adapters.opensearch.errors import bulk_failure, translate_error
from mneme.adapters.opensearch.index import OpenSearchIndex
from mneme.adapters.opensearch.lifecycle import index_body
from mneme.adapters.opensearch.queries import document_id, document_source, es_time, score_to_cosine
from mneme.adapters.opensearch.serverless import ServerlessOpenSearchIndex
from mneme.bootstrap import build_opensearch_index
from mneme.errors import InvalidInput, StoreUnavailable, Throttled
from mneme.search_models import IndexDocument, SearchFilter
from mneme.settings import OpenSearchIndex as OpenSearchSettings

SNAPSHOTS = Path(__file__).parent / "snapshots" / "opensearch"
UPDATE = os.environ.get("MNEME_UPDATE_SNAPSHOTS") == "1"
INDEX = "mneme"


def check_snapshot(name: str, value: Any) -> None:
    path = SNAPSHOTS / f"{name}.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"no snapshot {path.name}; run with MNEME_UPDATE_SNAPSHOTS=1 and review it"
    assert json.loads(json.dumps(value)) == json.loads(path.read_text())


# -- a client that records requests ------------------------------------------------------------
class FakeIndices:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def exists(self, **kwargs: Any) -> bool:
        self.client.record("indices.exists", kwargs)
        return self.client.index_exists

    def create(self, **kwargs: Any) -> dict[str, Any]:
        self.client.record("indices.create", kwargs)
        self.client.index_exists = True
        return {"acknowledged": True}

    def get_mapping(self, **kwargs: Any) -> dict[str, Any]:
        self.client.record("indices.get_mapping", kwargs)
        if not self.client.index_exists:
            raise NotFoundError(404, "index_not_found_exception", {})
        return {INDEX: {"mappings": {"properties": {"vector": {"type": "knn_vector", "dimension": 4}}}}}

    def refresh(self, **kwargs: Any) -> None:
        self.client.record("indices.refresh", kwargs)

    def put_mapping(self, **kwargs: Any) -> dict[str, Any]:
        self.client.record("indices.put_mapping", kwargs)
        return {"acknowledged": True}


class FakeClient:
    def __init__(self, *, index_exists: bool = True) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.index_exists = index_exists
        self.indices = FakeIndices(self)
        self.hits: list[dict[str, Any]] = []
        self.bulk_response: dict[str, Any] = {"errors": False, "items": []}
        self.error: Exception | None = None
        self.responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # search body -> response
        self.generate_items = False  # answer `_bulk` item by item, with server ids srv-0, srv-1, ...
        self.generated = 0

    def record(self, name: str, kwargs: dict[str, Any]) -> None:
        self.calls.append((name, kwargs))
        if self.error is not None:
            raise self.error

    def search(self, **kwargs: Any) -> dict[str, Any]:
        self.record("search", kwargs)
        body = kwargs["body"]
        if self.responder is not None:
            return self.responder(body)
        return {"hits": {"hits": [] if "search_after" in body else self.hits}}

    def bulk(self, **kwargs: Any) -> dict[str, Any]:
        self.record("bulk", kwargs)
        if not self.generate_items:
            return self.bulk_response
        items: list[dict[str, Any]] = []
        lines = iter(json.loads(line) for line in kwargs["body"].splitlines())
        for line in lines:
            action, meta = next(iter(line.items()))
            if action == "delete":
                items.append({"delete": {"_id": meta["_id"], "status": 200, "result": "deleted"}})
                continue
            next(lines)
            items.append({action: {"_id": f"srv-{self.generated}", "status": 201, "result": "created"}})
            self.generated += 1
        return {"errors": False, "items": items}

    def bulk_lines(self) -> list[list[dict[str, Any]]]:
        return [[json.loads(line) for line in call["body"].splitlines()] for call in self.named("bulk")]

    def count(self, **kwargs: Any) -> dict[str, Any]:
        self.record("count", kwargs)
        return {"count": 2}

    def delete_by_query(self, **kwargs: Any) -> dict[str, Any]:
        self.record("delete_by_query", kwargs)
        return {"deleted": 2}

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for call, kwargs in self.calls if call == name]


def adapter(client: FakeClient, **kwargs: Any) -> OpenSearchIndex:
    return OpenSearchIndex(client, INDEX, **kwargs)  # type: ignore[arg-type]


NOW = 1_800_000_000.0  # the serverless write clock in these tests (epoch seconds)


def serverless(client: FakeClient, **kwargs: Any) -> ServerlessOpenSearchIndex:
    """A serverless adapter with a fixed clock."""
    return ServerlessOpenSearchIndex(client, INDEX, clock=WriteClock(lambda: NOW), **kwargs)  # type: ignore[arg-type]


EVERY_FILTER = SearchFilter(
    tenant="acme",
    ancestor_id="scope-team",
    kinds=frozenset({"fact", "episode"}),
    tiers=frozenset({"summary", "raw"}),
    since=datetime(2026, 3, 1, 9, 30, 0, 123456, tzinfo=timezone(timedelta(hours=1))),
    until=datetime(2026, 4, 1, tzinfo=UTC),
    session_id="sess-1",
    principal="alice",
)


def document(doc_id: str, **fields: Any) -> IndexDocument:
    return IndexDocument(
        **{
            "tenant": "acme",
            "doc_id": doc_id,
            "kind": "episode",
            "scope_id": "scope-team",
            "ancestor_ids": ["scope-root", "scope-team"],
            "text": "Alice's team met in Leeds",
            "occurred_at": datetime(2026, 3, 14, 10, 0, 0, 987654, tzinfo=UTC),
            **fields,
        }
    )


# -- request bodies ----------------------------------------------------------------------------
def test_search_text_body_with_every_filter() -> None:
    client = FakeClient()
    adapter(client).search_text(EVERY_FILTER, "  Where did Alice's team\tmeet? ", 7)
    (call,) = client.named("search")
    assert call["index"] == INDEX
    check_snapshot("search_text", call["body"])


def test_search_text_body_without_optional_filters() -> None:
    client = FakeClient()
    adapter(client).search_text(SearchFilter(tenant="acme", ancestor_id="scope-root"), "leeds", 20_000)
    check_snapshot("search_text_minimal", client.named("search")[0]["body"])


def test_search_vector_body_with_every_filter() -> None:
    client = FakeClient()  # the index's vector dimension is 4: the 2-d query is normalised and padded
    adapter(client).search_vector(EVERY_FILTER, np.array([3.0, 4.0], np.float32), "test-hash@2", 5)
    (call,) = client.named("search")
    check_snapshot("search_vector", call["body"])
    assert client.named("indices.get_mapping") == [{"index": INDEX}]


def test_upsert_bulk_body() -> None:
    client = FakeClient()
    docs = [
        document("ep-1", vector=[1.0, 2.0, 2.0], model_id="test-hash@3", session_id="sess-1"),
        document("mem-1", kind="memory", visible_to="alice", tier="summary"),
        document("ep-1", vector=[0.0, 0.0, 3.0], model_id="test-hash@3", session_id="sess-1"),  # wins
    ]
    adapter(client).upsert(docs)
    (call,) = client.named("bulk")
    lines = [json.loads(line) for line in call["body"].splitlines()]
    check_snapshot("upsert_bulk", lines)


def test_index_body() -> None:
    check_snapshot("index_body", index_body(1024))


def test_update_ancestors_and_delete_bodies() -> None:
    client = FakeClient()
    client.hits = [{"_id": "acme:ep-1", "sort": ["ep-1"]}, {"_id": "acme:ep-2", "sort": ["ep-2"]}]
    index = adapter(client, page_size=2)
    index.update_ancestors("acme", "scope-team", ["scope-root", "scope-new", "scope-team"])
    index.delete("acme", ["ep-1", "ep-1", "ep-3"])
    searches = client.named("search")
    assert searches[0]["body"]["query"] == {
        "bool": {"filter": [{"term": {"tenant": "acme"}}, {"term": {"scope_id": "scope-team"}}]}
    }
    assert searches[1]["body"]["search_after"] == ["ep-2"]
    moved, deleted = ([json.loads(line) for line in call["body"].splitlines()] for call in client.named("bulk"))
    assert moved == [
        {"update": {"_id": "acme:ep-1", "retry_on_conflict": 3}},
        {"doc": {"ancestor_ids": ["scope-root", "scope-new", "scope-team"]}},
        {"update": {"_id": "acme:ep-2", "retry_on_conflict": 3}},
        {"doc": {"ancestor_ids": ["scope-root", "scope-new", "scope-team"]}},
    ]
    assert deleted == [{"delete": {"_id": "acme:ep-1"}}, {"delete": {"_id": "acme:ep-3"}}]


def test_queries_that_cannot_match_send_nothing() -> None:
    client = FakeClient()
    index = adapter(client)
    f = SearchFilter(tenant="acme", ancestor_id="r")
    assert index.search_text(f, "!!! ...", 5) == []
    assert index.search_text(f, "words", 0) == []
    assert index.search_text(f.model_copy(update={"kinds": frozenset()}), "words", 5) == []
    assert index.search_vector(f.model_copy(update={"tiers": frozenset()}), np.ones(4, np.float32), "m", 5) == []
    assert index.search_vector(f, np.zeros(4, np.float32), "m", 5) == []
    assert index.search_vector(f, np.ones(4, np.float32), "m", -1) == []
    index.upsert([])
    index.delete("acme", [])
    assert client.calls == []


def test_hits_are_read_from_the_sort_values() -> None:
    client = FakeClient()
    client.hits = [{"_id": "acme:b", "_score": None, "sort": [1.5, "b"]}, {"_id": "acme:a", "sort": [0.8, "a"]}]
    index = adapter(client)
    f = SearchFilter(tenant="acme", ancestor_id="r")
    assert [(h.doc_id, h.score) for h in index.search_vector(f, np.ones(4, np.float32), "m", 2)] == [
        ("b", 0.5),
        ("a", pytest.approx(-0.25)),
    ]
    assert [(h.doc_id, h.score) for h in index.search_text(f, "x", 2)] == [("b", 1.5), ("a", 0.8)]


# -- scores, ids, times ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("score", "cosine"), [(1.0, 1.0), (0.5, 0.0), (0.0, -1.0), (0.75, 0.5), (1.0000001, 1.0), (-0.0000001, -1.0)]
)
def test_score_to_cosine_of_an_index_created_with_cosinesimil(score: float, cosine: float) -> None:
    assert score_to_cosine(score, "cosinesimil") == pytest.approx(cosine)


@pytest.mark.parametrize(
    ("score", "cosine"), [(2.0, 1.0), (1.5, 0.5), (1.0, 0.0), (0.8, -0.25), (0.5, -1.0), (2.0000001, 1.0), (0.4, -1.0)]
)
def test_score_to_cosine_of_inner_product_on_normalised_vectors(score: float, cosine: float) -> None:
    """faiss innerproduct: d = -x.y, score 1 / (1 + d) when d >= 0, else 1 - d (OpenSearch "Spaces")."""
    assert score_to_cosine(score) == pytest.approx(cosine)


def test_the_vector_field_is_faiss_hnsw_with_inner_product_which_serverless_supports() -> None:
    """Vectors are L2-normalised where written and queried, so inner product ranks as cosine does."""
    method = index_body(1024)["mappings"]["properties"]["vector"]["method"]
    assert (method["name"], method["engine"], method["space_type"]) == ("hnsw", "faiss", "innerproduct")


def test_document_ids_cannot_collide_across_tenants() -> None:
    assert document_id("acme", "ep-1") == "acme:ep-1"
    assert document_id("a:b", "c") != document_id("a", "b:c")
    assert document_id("a%3Ab", "c") != document_id("a:b", "c")


def test_times_are_utc_milliseconds() -> None:
    assert es_time(datetime(2026, 3, 1, 9, 30, 0, 123999, tzinfo=timezone(timedelta(hours=1)))) == (
        "2026-03-01T08:30:00.123Z"
    )
    assert es_time(datetime(2026, 3, 1)) == "2026-03-01T00:00:00.000Z"  # naive is UTC
    assert es_time(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000Z"


# -- refresh -----------------------------------------------------------------------------------
def exercise(index: OpenSearchIndex, client: FakeClient) -> None:
    source = document_source(document("ep-1"), 4)  # sort: [doc_id] (managed), [doc_id, written_at] (serverless)
    client.hits = [{"_id": "acme:ep-1", "_source": source, "sort": ["ep-1", 5]}]
    index.upsert([document("ep-1", vector=[1.0, 0.0], model_id="m@2")])
    index.delete("acme", ["ep-1"])
    index.update_ancestors("acme", "scope-team", ["scope-root", "scope-team"])
    index.clear_tenant("acme")


def test_managed_domain_writes_wait_for_refresh() -> None:
    client = FakeClient()
    exercise(adapter(client, refresh=True), client)
    assert {call["refresh"] for call in client.named("bulk")} == {"wait_for"}
    assert client.named("delete_by_query") == [
        {"index": INDEX, "body": {"query": {"term": {"tenant": "acme"}}}, "conflicts": "proceed", "refresh": True}
    ]


def test_serverless_never_refreshes_nor_deletes_by_query() -> None:
    client = FakeClient()
    client.generate_items = True
    index = ServerlessOpenSearchIndex(client, INDEX)  # type: ignore[arg-type]
    exercise(index, client)
    client.hits = [{"_id": "srv-old", "_source": document_source(document("ep-1"), 4), "sort": ["ep-1", 5]}]
    index.update_ancestors("acme", "scope-team", ["scope-root", "scope-new", "scope-team"])
    index.clear_tenant("acme")
    assert index.compact("acme") == 0
    assert all("refresh" not in kwargs for _, kwargs in client.calls)
    assert {name for name, _ in client.calls} == {"indices.exists", "indices.get_mapping", "bulk", "search"}
    moved, deleted, cleared, cleared_recent = client.bulk_lines()[-4:]
    assert [line.get("index") for line in moved] == [{}, None]  # a move re-indexes, without an `_id`
    assert deleted == cleared == [{"delete": {"_id": "srv-old"}}]
    assert cleared_recent == [{"delete": {"_id": "srv-1"}}]  # the moved copy, which a search may not see yet


def test_no_refresh_unless_asked_and_no_io_in_the_constructor() -> None:
    client = FakeClient()
    index = adapter(client)
    assert client.calls == []
    exercise(index, client)
    assert all("refresh" not in kwargs for _, kwargs in client.calls)


def test_a_missing_index_is_created_once_with_the_mapping() -> None:
    client = FakeClient(index_exists=False)
    index = adapter(client, dimension=4)
    index.upsert([document("ep-1", vector=[1.0, 0.0], model_id="m@2")])
    index.upsert([document("ep-2")])
    assert client.named("indices.create") == [{"index": INDEX, "body": index_body(4)}]
    assert [name for name, _ in client.calls] == ["indices.exists", "indices.create", "bulk", "bulk"]


def test_bad_vectors_are_rejected_before_any_request() -> None:
    client = FakeClient()
    index = adapter(client)
    with pytest.raises(InvalidInput, match="does not fit"):
        index.upsert([document("ok", vector=[1.0], model_id="m@1"), document("big", vector=[1.0] * 5, model_id="m@5")])
    with pytest.raises(InvalidInput, match="no model_id"):
        index.upsert([document("x", vector=[1.0])])
    assert client.named("bulk") == []


# -- errors ------------------------------------------------------------------------------------
REJECTED = {
    "error": {
        "type": "search_phase_execution_exception",
        "reason": "all shards failed",
        "caused_by": {"type": "illegal_argument_exception", "reason": "field [x] is not a knn_vector"},
        "root_cause": [{"type": "illegal_argument_exception", "reason": "field [x] is not a knn_vector"}],
    },
    "status": 400,
}


@pytest.mark.parametrize(
    ("exc", "expected", "text"),
    [
        (ConnectionError("N/A", "connection refused", OSError()), StoreUnavailable, "unreachable"),
        (ConnectionTimeout("TIMEOUT", "read timed out", OSError()), StoreUnavailable, "read timed out"),
        (TransportError(429, "too_many_requests", {}), Throttled, "429"),
        (TransportError(503, "unavailable", {}), StoreUnavailable, "503"),
        (TransportError(500, "internal", {}), StoreUnavailable, "500"),
        (RequestError(400, "search_phase_execution_exception", REJECTED), StoreUnavailable, "is not a knn_vector"),
        (AuthorizationException(403, "security_exception", {}), StoreUnavailable, "403"),
    ],
)
def test_errors_are_translated(exc: Exception, expected: type[Exception], text: str) -> None:
    client = FakeClient()
    client.error = exc
    with pytest.raises(expected, match=text) as caught:
        adapter(client).count("acme")
    assert caught.value.__cause__ is exc
    assert type(translate_error(exc, "x")) is expected


def test_a_missing_index_reads_as_empty() -> None:
    client = FakeClient()
    client.error = NotFoundError(404, "index_not_found_exception", {})
    index = adapter(client)
    f = SearchFilter(tenant="acme", ancestor_id="r")
    assert index.count("acme") == 0
    assert index.search_text(f, "x", 3) == []
    assert index.doc_ids("acme") == set()


def item(action: str, status: int, error: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"_id": "x", "status": status}
    if error is not None:
        result["error"] = {"type": error, "reason": f"{error} happened"}
    return {action: result}


def test_bulk_item_failures() -> None:
    ok = item("update", 200)
    assert bulk_failure({"errors": False, "items": [ok]}, "x") is None
    bad = bulk_failure({"errors": True, "items": [ok, item("update", 400, "mapper_parsing_exception")]}, "indexing")
    assert isinstance(bad, StoreUnavailable)
    assert "1 of 2 documents failed while indexing (400): mapper_parsing_exception" in bad.message
    busy = [item("index", 400, "mapper_parsing_exception"), item("index", 429, "es_rejected_execution_exception")]
    assert isinstance(bulk_failure({"errors": True, "items": busy}, "x"), Throttled)
    broken = [item("index", 503, "unavailable_shards_exception"), item("index", 400, "mapper_parsing_exception")]
    failure = bulk_failure({"errors": True, "items": broken}, "x")
    assert isinstance(failure, StoreUnavailable)
    assert failure.details == {"status": 503}
    missing = [item("update", 404, "document_missing_exception")]
    assert bulk_failure({"errors": True, "items": missing}, "x", ignore=frozenset({404})) is None


def test_upsert_raises_on_item_errors() -> None:
    client = FakeClient()
    client.bulk_response = {"errors": True, "items": [item("index", 429, "es_rejected_execution_exception")]}
    with pytest.raises(Throttled):
        adapter(client).upsert([document("ep-1")])


# -- build_opensearch_index and SigV4 -------------------------------------------------------------------
class Recorder(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append((self.command, self.path, dict(self.headers.items())))
        buckets = [{"key": {"doc_id": d}, "doc_count": 1} for d in "abc"]  # serverless counts doc_ids
        body = json.dumps(
            {"count": 3, "hits": {"hits": []}, "aggregations": {"doc_ids": {"buckets": buckets}}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str]]]]]:
    Recorder.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Recorder.requests
    server.shutdown()
    server.server_close()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("service", ["aoss", "es"])
@pytest.mark.usefixtures("aws_env")
def test_build_opensearch_index_signs_with_sigv4(
    service: str, recorder: tuple[str, list[tuple[str, str, dict[str, str]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, requests = recorder
    sessions: list[boto3.Session] = []
    real_session = boto3.Session

    def counting_session(*args: Any, **kwargs: Any) -> boto3.Session:
        sessions.append(real_session(*args, **kwargs))
        return sessions[-1]

    monkeypatch.setattr(boto3, "Session", counting_session)
    settings = OpenSearchSettings.model_validate(
        {"kind": "opensearch", "endpoint": url, "index_name": "mem", "region": "eu-west-1", "service": service}
    )
    index = build_opensearch_index(settings)
    assert sessions == [] and requests == []  # credentials are looked up on first use, not before
    assert (index.serverless, index.refresh) == ((True, False) if service == "aoss" else (False, True))
    assert index.visibility_lag == (settings.fresh_window_seconds if service == "aoss" else 0.0)
    assert isinstance(index, ServerlessOpenSearchIndex) == (service == "aoss")
    assert index.count("t1") == 3
    assert index.count("t1") == 3
    assert len(sessions) == 1
    (method, path, headers), _ = requests
    assert (method, path) == ("POST", "/mem/_search" if service == "aoss" else "/mem/_count")
    auth = headers["Authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{datetime.now(UTC):%Y%m%d}/eu-west-1/{service}/")
    assert f"/eu-west-1/{service}/aws4_request" in auth
    assert "x-amz-content-sha256" in auth.split("SignedHeaders=")[1]
    assert headers["X-Amz-Content-SHA256"] and headers["X-Amz-Date"]


def test_build_opensearch_index_uses_tls_for_https_endpoints() -> None:
    settings = OpenSearchSettings(kind="opensearch", endpoint="abc123.eu-west-1.aoss.amazonaws.com")
    index = build_opensearch_index(settings, dimension=1024)
    assert index.client.transport.hosts == [
        {"host": "abc123.eu-west-1.aoss.amazonaws.com", "port": 443, "use_ssl": True}
    ]
    connection = index.client.transport.get_connection()
    assert connection.host == "https://abc123.eu-west-1.aoss.amazonaws.com:443"
    assert isinstance(connection, RequestsHttpConnection)
    assert connection.session.verify not in (False, None)  # certificates are verified (a CA bundle path)
    assert index.index_name == "mneme"


class NoCredentials:
    region_name = "eu-west-1"

    def get_credentials(self) -> None:
        return None


class NoRegion:
    region_name = None

    def get_credentials(self) -> object:
        return object()


@pytest.mark.parametrize(("session", "text"), [(NoCredentials, "no AWS credentials"), (NoRegion, "no AWS region")])
def test_missing_credentials_or_region(
    session: type, text: str, recorder: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boto3, "Session", session)
    settings = OpenSearchSettings(kind="opensearch", endpoint=recorder[0], service="aoss")
    with pytest.raises(StoreUnavailable, match=text):
        build_opensearch_index(settings).count("t1")
    assert recorder[1] == []


def test_nothing_above_adapters_imports_opensearch() -> None:
    root = Path(opensearch_index.__file__).resolve().parents[1]
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "adapters" not in path.parts and "opensearchpy" in path.read_text()
    ]
    assert offenders == []


# -- serverless: copies with server-generated ids ------------------------------------------------
def copy_hit(server_id: str, doc_id: str, written_at: int, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """A lookup hit: a copy of `doc_id` (sort = [doc_id, written_at]) with `source`."""
    return {"_id": server_id, "_source": source or {}, "sort": [doc_id, written_at]}


def test_managed_compact_sends_nothing() -> None:
    client = FakeClient()
    assert adapter(client).compact("acme") == 0
    assert client.calls == []


def test_serverless_upsert_bodies() -> None:
    client = FakeClient()
    client.generate_items = True
    future = 1_900_000_000_000  # a copy written by a writer whose clock is ahead of ours
    client.hits = [copy_hit("old-1", "ep-1", future, {"digest": "other"}), copy_hit("old-2", "ep-1", 5)]
    index = serverless(client)
    docs = [
        document("ep-1", vector=[1.0, 2.0, 2.0], model_id="test-hash@3", session_id="sess-1"),
        document("mem-1", kind="memory", visible_to="alice", tier="summary"),
        document("ep-1", vector=[0.0, 0.0, 3.0], model_id="test-hash@3", session_id="sess-1"),  # wins
    ]
    index.upsert(docs)
    (lookup,) = client.named("search")
    written, deleted = client.bulk_lines()
    check_snapshot("serverless_upsert", {"lookup": lookup["body"], "index": written, "delete": deleted})
    assert written[0] == written[2] == {"index": {}}  # no `_id`: the server assigns it
    assert written[1]["written_at"] == future + 1  # newer than every copy seen
    assert written[3]["written_at"] == int(NOW * 1000)
    assert written[1]["digest"] == content_digest(document_source(docs[2], 4))
    assert deleted == [{"delete": {"_id": "old-1"}}, {"delete": {"_id": "old-2"}}]


def test_serverless_unchanged_reupsert_writes_nothing() -> None:
    client = FakeClient()
    client.generate_items = True
    index = serverless(client)
    ep = document("ep-1", vector=[1.0, 0.0], model_id="m@2")
    digest = content_digest(document_source(ep, 4))
    index.upsert([ep])  # nothing visible yet: srv-0
    client.hits = [copy_hit("srv-0", "ep-1", 7, {"digest": digest})]
    index.upsert([ep])  # the newest visible copy has this content: no write
    assert len(client.named("bulk")) == 1
    client.hits = [copy_hit("srv-0", "ep-1", 7, {"digest": digest}), copy_hit("dup", "ep-1", 3, {"digest": "x"})]
    index.upsert([ep])  # ... but an older duplicate goes
    assert client.bulk_lines()[-1] == [{"delete": {"_id": "dup"}}]
    client.hits = [copy_hit("older", "ep-1", 3, {"digest": digest})]
    index.upsert([ep])  # srv-0 is newer and not visible yet: it is replaced, not trusted to be equal
    *_, written, deleted = client.bulk_lines()
    assert written[0] == {"index": {}}
    assert deleted == [{"delete": {"_id": "older"}}, {"delete": {"_id": "srv-0"}}]


def test_serverless_writes_remember_their_copies_until_visible() -> None:
    client = FakeClient()  # searches find nothing: every copy written is still invisible
    client.generate_items = True
    index = serverless(client)
    index.upsert([document("ep-1", text="first")])
    index.upsert([document("ep-1", text="second")])
    assert client.bulk_lines()[-1] == [{"delete": {"_id": "srv-0"}}]
    index.delete("acme", ["ep-1", "ep-2"])
    assert client.bulk_lines()[-1] == [{"delete": {"_id": "srv-1"}}]
    index.upsert([document("ep-3"), document("other", tenant="beta")])
    index.clear_tenant("acme")
    assert client.bulk_lines()[-1] == [{"delete": {"_id": "srv-2"}}]
    assert index.recent.ids([("beta", "other")]) == ["srv-3"]
    calls = len(client.calls)
    index.clear_tenant("acme")
    index.delete("acme", ["ep-3"])
    assert client.named("bulk")[-1] is client.calls[calls - 1][1]  # nothing left to delete: no bulk


def test_recent_writes_expire_and_are_bounded() -> None:
    from mneme.adapters.opensearch.copies import RecentWrites

    now = [0.0]
    recent = RecentWrites(ttl=10.0, limit=3, clock=lambda: now[0])
    for i in range(4):
        recent.remember(("t", f"d{i % 2}"), f"s{i}")
    assert len(recent) == 3  # the oldest went
    assert recent.ids([("t", "d0"), ("t", "d1")]) == ["s2", "s1", "s3"]
    recent.forget(["s1"])
    assert recent.tenant_ids("t") == ["s2", "s3"]
    now[0] = 10.5
    assert recent.ids([("t", "d0")]) == [] and len(recent) == 0


def test_write_clock_is_strictly_increasing() -> None:
    clock = WriteClock(lambda: 1.0)
    assert [clock(), clock(), clock()] == [1000, 1001, 1002]
    clock.observe(5000)
    assert clock() == 5001


def test_serverless_search_bodies() -> None:
    client = FakeClient()
    index = serverless(client)
    index.search_text(EVERY_FILTER, "  Where did Alice's team\tmeet? ", 7)
    index.search_vector(EVERY_FILTER, np.array([3.0, 4.0], np.float32), "test-hash@2", 5)
    text, vector = (call["body"] for call in client.named("search"))
    check_snapshot("serverless_search_text", text)
    check_snapshot("serverless_search_vector", vector)
    assert (text["size"], vector["size"], vector["query"]["knn"]["vector"]["k"]) == (30, 26, 42)


def test_serverless_search_deduplicates_and_widens() -> None:
    client = FakeClient()
    stored = (
        [{"_id": f"a{i}", "sort": [0.75, "a"]} for i in range(20)]
        + [{"_id": f"b{i}", "sort": [0.5 - i / 100, "b"]} for i in range(20)]  # b's copies score differently
        + [{"_id": "c", "sort": [0.25, "c"]}]
    )
    sizes: list[int] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        sizes.append(body["size"])
        return {"hits": {"hits": stored[: body["size"]]}}

    client.responder = respond
    index = serverless(client)
    f = SearchFilter(tenant="acme", ancestor_id="r")
    assert [(h.doc_id, h.score) for h in index.search_text(f, "x", 2)] == [("a", 0.75), ("b", 0.5)]
    assert sizes == [20, 40]  # 20 copies of a: too few distinct documents, ask for twice as many
    sizes.clear()
    hits = index.search_vector(f, np.ones(4, np.float32), "m", 3)
    # innerproduct scores below 1 are negative cosines: 1 - 1 / score, clamped to -1
    assert [(h.doc_id, h.score) for h in hits] == [("a", pytest.approx(-1 / 3)), ("b", -1.0), ("c", -1.0)]
    assert sizes == [22, 44]
    sizes.clear()
    assert [h.doc_id for h in index.search_text(f, "x", 50)] == ["a", "b", "c"]
    assert sizes == [116]  # fewer hits than asked for: all there is


def test_serverless_counts_and_compaction() -> None:
    client = FakeClient()
    client.generate_items = True
    pages = {
        None: [{"key": {"doc_id": "a"}, "doc_count": 1}, {"key": {"doc_id": "b"}, "doc_count": 3}],
        "b": [{"key": {"doc_id": "c"}, "doc_count": 2}],
    }
    copies = {"b": ["b-new", "b-old", "b-older"], "c": ["c-new", "c-old"]}
    stored = {d: SortedCopies([(sid, d, 9 - i) for i, sid in enumerate(sids)]) for d, sids in copies.items()}

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if "aggs" in body:
            after = body["aggs"]["doc_ids"]["composite"].get("after", {}).get("doc_id")
            buckets = pages[after]
            return {
                "hits": {"hits": []},
                "aggregations": {"doc_ids": {"buckets": buckets, "after_key": buckets[-1]["key"]}},
            }
        (wanted,) = body["query"]["bool"]["filter"][1]["terms"]["doc_id"]
        return stored[wanted](body)

    client.responder = respond
    index = serverless(client, page_size=2)
    assert index.count("acme") == 3
    assert index.doc_ids("acme") == {"a", "b", "c"}
    check_snapshot("serverless_doc_ids", client.named("search")[1]["body"])
    client.calls.clear()
    assert index.compact("acme") == 3
    lookups = [call["body"] for call in client.named("search") if "aggs" not in call["body"]]
    check_snapshot("serverless_copies", lookups[0])
    assert client.bulk_lines() == [
        [{"delete": {"_id": "b-old"}}, {"delete": {"_id": "b-older"}}],
        [{"delete": {"_id": "c-old"}}],
    ]


def test_serverless_windowed_compaction_reads_only_the_documents_written_in_the_window() -> None:
    """The scheduled compaction aggregates the copies written since the window (less the visibility lag),
    of every tenant, and looks up only those documents' copies: not every document of the tenants."""
    client = FakeClient()
    client.generate_items = True
    touched = [
        {"key": {"tenant": "acme", "doc_id": "b"}, "doc_count": 1},  # its older copies lie before the window
        {"key": {"tenant": "beta", "doc_id": "x"}, "doc_count": 2},
    ]
    stored = {
        ("acme", "b"): SortedCopies([("b-new", "b", 9), ("b-old", "b", 2), ("b-older", "b", 1)]),
        ("beta", "x"): SortedCopies([("x-new", "x", 9), ("x-old", "x", 8)]),
    }

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if "aggs" in body:
            return {"hits": {"hits": []}, "aggregations": {"doc_ids": {"buckets": touched, "after_key": None}}}
        tenant, doc_ids = body["query"]["bool"]["filter"]
        (wanted,) = doc_ids["terms"]["doc_id"]
        return stored[(tenant["term"]["tenant"], wanted)](body)

    client.responder = respond
    index = serverless(client, visibility_lag=120.0)
    since = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    assert index.compact_recent(since) == {"acme": 2, "beta": 1}
    aggregations = [call["body"] for call in client.named("search") if "aggs" in call["body"]]
    (window,) = aggregations  # one page of touched documents; no aggregation over a whole tenant
    assert window["query"] == {"range": {"written_at": {"gte": int(since.timestamp() * 1000) - 120_000}}}
    assert window["aggs"]["doc_ids"]["composite"]["sources"] == [
        {"tenant": {"terms": {"field": "tenant"}}},
        {"doc_id": {"terms": {"field": "doc_id"}}},
    ]
    lookups = [call["body"]["query"] for call in client.named("search") if "aggs" not in call["body"]]
    assert [q["bool"]["filter"][1]["terms"]["doc_id"] for q in lookups] == [["b"], ["x"]]
    assert client.bulk_lines() == [
        [{"delete": {"_id": "b-old"}}, {"delete": {"_id": "b-older"}}],
        [{"delete": {"_id": "x-old"}}],
    ]
    assert adapter(FakeClient()).compact_recent(since) == {}  # a managed domain holds one copy: no request


def test_serverless_update_ancestors_reindexes() -> None:
    client = FakeClient()
    client.generate_items = True
    path = ["scope-root", "scope-new", "scope-team"]
    old = {**document_source(document("ep-1"), 4), "written_at": 41, "digest": "d"}
    client.hits = [
        copy_hit("srv-a", "ep-1", 41, old),
        copy_hit("srv-b", "ep-2", 7, {**old, "doc_id": "ep-2", "ancestor_ids": path}),  # already moved
    ]
    index = serverless(client)
    index.update_ancestors("acme", "scope-team", path)
    (lookup,) = client.named("search")
    assert lookup["body"]["size"] == 200  # sources carry vectors: smaller pages
    assert lookup["body"]["_source"] is True
    written, deleted = client.bulk_lines()
    moved = {**old, "ancestor_ids": path}
    assert written == [{"index": {}}, {**moved, "written_at": 42, "digest": content_digest(moved)}]
    assert deleted == [{"delete": {"_id": "srv-a"}}]


def test_serverless_bad_vectors_are_rejected_before_any_search() -> None:
    client = FakeClient()
    index = serverless(client)
    with pytest.raises(InvalidInput, match="does not fit"):
        index.upsert([document("ok", vector=[1.0], model_id="m@1"), document("big", vector=[1.0] * 5, model_id="m@5")])
    assert client.named("search") == client.named("bulk") == []


class SortedCopies:
    """A fake `_search` over copies with real [doc_id asc, written_at desc] sorting and `search_after`."""

    def __init__(self, copies: list[tuple[str, str, int]]) -> None:
        self.copies = sorted(copies, key=lambda c: (c[1], -c[2]))  # ties keep insertion order
        self.sizes: list[int] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.sizes.append(body["size"])
        rows = self.copies
        if "search_after" in body:
            d, w = body["search_after"]
            rows = [c for c in rows if c[1] > d or (c[1] == d and c[2] < w)]
        return {"hits": {"hits": [{"_id": sid, "sort": [d, w]} for sid, d, w in rows[: body["size"]]]}}


@pytest.mark.parametrize("page_size", [1, 2, 3, 5, 100])
def test_copy_paging_never_skips_nor_repeats_tied_copies(page_size: int) -> None:
    stored = [(f"x{i}", "x", 7) for i in range(7)] + [(f"y{i}", "y", 9 - i // 2) for i in range(6)] + [("z", "z", 1)]
    client = FakeClient()
    client.responder = SortedCopies(stored)
    index = serverless(client, page_size=page_size)
    seen = [hit["_id"] for hits in index.copies({"match_all": {}}, "testing") for hit in hits]
    assert sorted(seen) == sorted(sid for sid, _, _ in stored)
    assert len(seen) == len(stored)


def test_a_managed_domain_adds_new_fields_to_its_mapping_once_before_its_first_write() -> None:
    client = FakeClient()
    index = adapter(client)
    index.search_text(SearchFilter(tenant="acme", ancestor_id="scope-root"), "words", 5)
    assert client.named("indices.put_mapping") == []  # a reader never changes the mapping
    index.upsert([document("ep-1", metadata_terms=['["user","alice"]'])])
    index.upsert([document("ep-2")])
    assert client.named("indices.put_mapping") == [
        {"index": INDEX, "body": {"properties": {"metadata": {"type": "keyword"}}}}
    ]
    assert client.bulk_lines()[0][1]["metadata"] == ['["user","alice"]']


class IndexBeingBuilt(FakeClient):
    """A collection whose new index answers `_bulk` with 404 index_not_found for its first `missing` calls,
    as Serverless does while it builds an index asynchronously (per item or for the whole request)."""

    def __init__(self, missing: int, per_item: bool = False) -> None:
        super().__init__()
        self.generate_items = True
        self.missing = missing
        self.per_item = per_item

    def bulk(self, **kwargs: Any) -> dict[str, Any]:
        if self.missing > 0:
            self.missing -= 1
            self.record("bulk-refused", kwargs)
            if not self.per_item:
                raise NotFoundError(404, "index_not_found_exception", {"error": {"type": "index_not_found_exception"}})
            error = {"type": "index_not_found_exception", "reason": "no such index [mneme]"}
            return {"errors": True, "items": [{"index": {"status": 404, "error": error}}]}
        return super().bulk(**kwargs)


@pytest.mark.parametrize("per_item", [False, True])
def test_serverless_first_write_waits_for_a_new_index_instead_of_losing_it(per_item: bool) -> None:
    """The first remember after a deploy must land in the index, not wait 30 minutes for the repair."""
    client = IndexBeingBuilt(missing=2, per_item=per_item)
    slept: list[float] = []
    index = serverless(client, sleep=slept.append)
    index.upsert([document("ep-1", vector=[1.0, 0.0, 0.0], model_id="m")])
    assert len(client.named("bulk-refused")) == 2 and slept == [0.5, 1.0]
    (written,) = client.bulk_lines()
    assert written[1]["doc_id"] == "ep-1"


def test_serverless_wait_for_a_new_index_is_bounded() -> None:
    client = IndexBeingBuilt(missing=100)
    slept: list[float] = []
    index = serverless(client, sleep=slept.append)
    with pytest.raises(StoreUnavailable, match="index_not_found"):
        index.upsert([document("ep-1", vector=[1.0, 0.0, 0.0], model_id="m")])
    assert sum(slept) <= 8.0 and len(client.named("bulk-refused")) == len(slept) + 1
