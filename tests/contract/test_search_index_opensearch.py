"""The `SearchIndex` contract suite against `OpenSearchIndex`, plus OpenSearch-specific checks.

Every contract test of `tests/contract/test_search_index.py` (bar the SQLite-specific ones) is
collected here again, against two backends:

- `osmem`: osmem-server, an in-memory OpenSearch-compatible server (a fresh clone per test), behind
  `tests.support.knn_proxy.KnnProxy`, a test double answering the `knn` query osmem lacks (exact
  search with OpenSearch's cosinesimil score and efficient filtering; its docstring lists what it does
  not model, such as HNSW's approximation).
- `real`: a real OpenSearch at `OPENSEARCH_URL` (e.g. http://localhost:9200, security disabled), a fresh
  index per test; skipped unless the variable is set. Every test must pass there.

and in two modes:

- `managed`: a managed domain (custom `_id`s, `refresh=True`);
- `serverless`: `ServerlessOpenSearchIndex`, the VECTORSEARCH collection model (server-generated ids, copies,
  de-duplicating reads; `mneme.adapters.opensearch.serverless`). osmem makes writes searchable at once,
  which stands in for a refresh; on a real OpenSearch the client refreshes after every `_bulk`
  (`VisibleWrites`). A copy the adapter could not see yet is simulated by indexing it directly
  (`put_copies`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from opensearchpy import NotFoundError, OpenSearch, RequestError

from mneme.adapters.opensearch.copies import content_digest
from mneme.adapters.opensearch.index import OpenSearchIndex
from mneme.adapters.opensearch.lifecycle import index_body
from mneme.adapters.opensearch.queries import document_id, document_source
from mneme.adapters.opensearch.serverless import ServerlessOpenSearchIndex
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.search_models import IndexDocument
from tests.contract import test_search_index as suite
from tests.contract.test_search_index import DIM, MODEL, doc, flt, ids, search
from tests.support.osmem import KnnOsmem, started_osmem

# Re-collect the contract tests here; the `index` fixture below replaces the suite's adapters.
globals().update(
    {
        name: test
        for name, test in vars(suite).items()
        if name.startswith("test_") and not name.startswith("test_sqlite_") and callable(test)
    }
)


@pytest.fixture(scope="module")
def osmem() -> Iterator[KnnOsmem]:
    yield from started_osmem()


@pytest.fixture
def osmem_client(osmem: KnnOsmem) -> Iterator[OpenSearch]:
    clone = osmem.clone()
    client = OpenSearch(hosts=[clone.url])
    yield client
    client.close()
    clone.close()


@pytest.fixture
def real_client() -> Iterator[OpenSearch]:
    url = os.environ.get("OPENSEARCH_URL")
    if not url:
        pytest.skip("set OPENSEARCH_URL to run against a real OpenSearch")
    client = OpenSearch(hosts=[url], verify_certs=False, ssl_show_warn=False, timeout=60)
    yield client
    client.close()


@pytest.fixture(params=["osmem", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, OpenSearch, str]]:
    """(backend name, client, a fresh index name); the index is dropped afterwards."""
    client: OpenSearch = request.getfixturevalue(f"{request.param}_client")
    name = f"mneme-test-{uuid.uuid4().hex[:12]}"
    yield request.param, client, name
    client.indices.delete(index=name, ignore_unavailable=True)


class VisibleWrites:
    """A client that refreshes the index after every `_bulk`: Serverless' refresh interval, shrunk to zero."""

    def __init__(self, client: OpenSearch) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def bulk(self, **kwargs: Any) -> Any:
        response = self.client.bulk(**kwargs)
        self.client.indices.refresh(index=kwargs["index"])
        return response


def make_index(backend: tuple[str, OpenSearch, str], mode: str, **kwargs: Any) -> OpenSearchIndex:
    """An OpenSearchIndex of the backend's fresh index: read-after-write (managed) or serverless."""
    name, client, index_name = backend
    if mode == "managed":
        return OpenSearchIndex(client, index_name, dimension=DIM, refresh=True, **kwargs)
    if name == "real":
        client = VisibleWrites(client)  # type: ignore[assignment]
    return ServerlessOpenSearchIndex(client, index_name, dimension=DIM, **kwargs)


@pytest.fixture(params=["managed", "serverless"])
def index(request: pytest.FixtureRequest, backend: tuple[str, OpenSearch, str]) -> OpenSearchIndex:
    """A fresh, empty OpenSearchIndex (the contract suite's fixture name), in both modes."""
    return make_index(backend, request.param)


@pytest.fixture
def managed_index(backend: tuple[str, OpenSearch, str]) -> OpenSearchIndex:
    return make_index(backend, "managed")


@pytest.fixture
def serverless_index(backend: tuple[str, OpenSearch, str]) -> OpenSearchIndex:
    return make_index(backend, "serverless")


# -- OpenSearch specifics ----------------------------------------------------------------------
def test_update_ancestors_text(index: OpenSearchIndex) -> None:
    index.upsert(
        [doc("d1", path=("root", "a", "s")), doc("d2", path=("root", "a", "s")), doc("d3", path=("root", "a"))]
    )
    index.update_ancestors("t1", "s", ["root", "b", "deeper", "s"])
    assert ids(search(index, "text", flt("a"))) == ["d3"]
    assert ids(search(index, "text", flt("deeper"))) == ["d1", "d2"]
    assert ids(search(index, "text", flt("s"))) == ["d1", "d2"]
    index.update_ancestors("t2", "s", ["x"])  # another tenant's scope of the same id: no effect
    index.update_ancestors("t1", "no-such-scope", ["x"])
    assert ids(search(index, "text", flt("b"))) == ["d1", "d2"]


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_update_ancestors_pages_through_big_scopes(backend: tuple[str, OpenSearch, str], mode: str) -> None:
    index = make_index(backend, mode, page_size=7)
    index.upsert([doc(f"d{i:02d}", path=("root", "s")) for i in range(30)])
    index.update_ancestors("t1", "s", ["root", "moved", "s"])
    assert len(search(index, "text", flt("moved"))) == 30
    assert index.doc_ids("t1") == {f"d{i:02d}" for i in range(30)}


def test_creates_the_index_with_the_mapping(backend: tuple[str, OpenSearch, str]) -> None:
    _, client, name = backend
    index = OpenSearchIndex(client, name, dimension=DIM, refresh=True)
    assert not client.indices.exists(index=name)  # no I/O until first use
    assert index.ensure_index(DIM) is True
    assert index.ensure_index(DIM) is False  # idempotent
    mapping = client.indices.get_mapping(index=name)[name]["mappings"]
    expected = index_body(DIM)["mappings"]
    assert str(mapping["dynamic"]) == expected["dynamic"]
    for field, spec in expected["properties"].items():
        stored = mapping["properties"][field]
        assert {key: stored[key] for key in spec} == spec, field
    settings = client.indices.get_settings(index=name)[name]["settings"]["index"]
    assert str(settings["knn"]).lower() == "true"
    assert settings["analysis"]["analyzer"]["mneme_english"]["filter"] == [
        "apostrophe",
        "lowercase",
        "asciifolding",
        "porter_stem",
    ]


def test_documents_are_keyed_by_tenant_and_doc_id(managed_index: OpenSearchIndex) -> None:
    index = managed_index
    index.upsert([doc("d1", tenant="a", session_id="s", visible_to="alice"), doc("d1", tenant="b:x")])
    stored = index.client.get(index=index.index_name, id="a:d1")["_source"]
    assert stored["tenant"] == "a"
    assert stored["doc_id"] == "d1"
    assert stored["ancestor_ids"] == ["root", "s1"]
    assert stored["occurred_at"] == "2025-01-01T00:00:00.000Z"
    assert stored["model_id"] == MODEL
    assert len(stored["vector"]) == DIM
    assert np.linalg.norm(stored["vector"]) == pytest.approx(1.0)
    assert index.client.get(index=index.index_name, id=document_id("b:x", "d1"))["_source"]["tenant"] == "b:x"
    assert document_id("b:x", "d1") == "b%3Ax:d1"  # cannot collide with tenant "b", doc "x:d1"


def test_short_vectors_are_padded_and_long_ones_rejected(managed_index: OpenSearchIndex) -> None:
    index = managed_index
    index.upsert([doc("d1", vector=[3.0, 4.0, 0.0], model_id="small@3")])
    stored = index.client.get(index=index.index_name, id="t1:d1")["_source"]["vector"]
    assert stored == pytest.approx([0.6, 0.8] + [0.0] * (DIM - 2))
    with pytest.raises(InvalidInput):
        index.upsert([doc("d2", vector=[1.0] * (DIM + 1), model_id="big@17")])
    with pytest.raises(InvalidInput):
        index.upsert([doc("d3", vector=[float("nan")] * 3)])
    with pytest.raises(InvalidInput):
        index.upsert([doc("d4", vector=[1.0, 0.0], model_id=None)])
    with pytest.raises(InvalidInput):
        index.search_vector(flt(), np.ones(DIM + 1, np.float32), MODEL, 5)
    with pytest.raises(InvalidInput):
        index.search_vector(flt(), np.array([np.inf, 0.0], np.float32), MODEL, 5)
    assert index.search_vector(flt(), np.zeros(3, np.float32), MODEL, 5) == []
    assert index.doc_ids("t1") == {"d1"}  # the rejected batches sent nothing


def test_a_zero_vector_is_stored_without_a_vector(managed_index: OpenSearchIndex) -> None:
    index = managed_index
    index.upsert([doc("d1", "zero vector", vector=[0.0] * 4)])
    stored = index.client.get(index=index.index_name, id="t1:d1")["_source"]
    assert "vector" not in stored
    assert stored["model_id"] is None
    assert ids(index.search_text(flt(), "zero", 5)) == ["d1"]


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_a_missing_index_without_dimension(backend: tuple[str, OpenSearch, str], mode: str) -> None:
    _, client, name = backend
    index = (
        OpenSearchIndex(client, name, refresh=True) if mode == "managed" else ServerlessOpenSearchIndex(client, name)
    )
    assert index.search_text(flt(), "anything", 5) == []
    assert index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 5) == []
    assert index.count("t1") == 0
    assert index.doc_ids("t1") == set()
    assert index.compact("t1") == 0
    index.delete("t1", ["d1"])
    index.clear_tenant("t1")
    index.update_ancestors("t1", "s", ["root", "s"])
    with pytest.raises(StoreUnavailable, match="does not exist"):
        index.upsert([doc("d1")])
    assert not client.indices.exists(index=name)  # never auto-created with a dynamic mapping


def test_an_existing_index_gives_its_dimension(backend: tuple[str, OpenSearch, str]) -> None:
    _, client, name = backend
    OpenSearchIndex(client, name, dimension=DIM).ensure_index(DIM)
    index = OpenSearchIndex(client, name, refresh=True)  # no dimension: read from the mapping
    index.upsert([doc("d1", vector=[1.0, 0.0, 0.0])])
    assert len(client.get(index=name, id="t1:d1")["_source"]["vector"]) == DIM


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_item_errors_are_translated(backend: tuple[str, OpenSearch, str], mode: str) -> None:
    _, client, name = backend
    body = index_body(DIM)
    body["mappings"]["properties"]["occurred_at"] = {"type": "integer"}  # an index that rejects our dates
    client.indices.create(index=name, body=body)
    index = (
        OpenSearchIndex(client, name, refresh=True) if mode == "managed" else ServerlessOpenSearchIndex(client, name)
    )
    with pytest.raises(StoreUnavailable, match="2 of 2 documents failed") as caught:
        index.upsert([doc("d1"), doc("d2")])
    assert caught.value.details == {"status": 400}


def test_serverless_mode_clears_without_delete_by_query(backend: tuple[str, OpenSearch, str]) -> None:
    _, client, name = backend
    OpenSearchIndex(client, name, dimension=DIM).ensure_index(DIM)
    index = ServerlessOpenSearchIndex(client, name, page_size=4)
    index.upsert([doc(f"d{i}", tenant="a") for i in range(10)] + [doc("d0", tenant="b")])
    client.indices.refresh(index=name)  # the test's stand-in for Serverless' refresh interval
    index.clear_tenant("a")
    client.indices.refresh(index=name)
    assert index.count("a") == 0
    assert index.doc_ids("b") == {"d0"}


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_bulk_requests_are_chunked(
    backend: tuple[str, OpenSearch, str], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mneme.adapters.opensearch import queries as opensearch_queries

    monkeypatch.setattr(opensearch_queries, "_BULK_ACTIONS", 3)
    index = make_index(backend, mode)
    index.upsert([doc(f"d{i}") for i in range(10)])
    assert index.count("t1") == 10
    index.delete("t1", [f"d{i}" for i in range(7)])
    assert index.doc_ids("t1") == {"d7", "d8", "d9"}


# -- Serverless (VECTORSEARCH collections: server-generated ids, copies) -------------------------
def put_copies(index: OpenSearchIndex, document: IndexDocument, written_at: int, n: int = 1) -> None:
    """Index `n` copies of `document` behind the adapter's back: copies it could not see when it wrote."""
    index.ensure_index(DIM)
    source = document_source(document, DIM)
    source |= {"digest": content_digest(source), "written_at": written_at}
    body = "".join(f"{json.dumps({'index': {}})}\n{json.dumps(source)}\n" for _ in range(n))
    response = index.client.bulk(body=body, index=index.index_name)
    assert not response["errors"]


def copies(index: OpenSearchIndex, doc_id: str, tenant: str = "t1") -> list[dict[str, Any]]:
    """Every stored copy of a document (`_id`, `_source`), newest first."""
    query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"doc_id": doc_id}}]}}
    body = {"size": 1000, "query": query, "sort": [{"written_at": {"order": "desc"}}]}
    hits: list[dict[str, Any]] = index.client.search(index=index.index_name, body=body)["hits"]["hits"]
    return hits


def test_serverless_ids_are_generated_by_the_server(serverless_index: OpenSearchIndex) -> None:
    index = serverless_index
    index.upsert([doc("d1", session_id="s"), doc("d2")])
    (stored,) = copies(index, "d1")
    assert stored["_id"] not in ("t1:d1", "d1")
    assert stored["_source"]["doc_id"] == "d1"
    assert stored["_source"]["session_id"] == "s"
    assert isinstance(stored["_source"]["written_at"], int)
    assert len(stored["_source"]["vector"]) == DIM
    assert index.compact("t1") == 0


def test_serverless_reupsert_replaces_a_visible_copy(backend: tuple[str, OpenSearch, str]) -> None:
    writer = make_index(backend, "serverless")
    writer.upsert([doc("d1", "zebra stripes"), doc("d2", "zebra crossing")])
    (first,) = copies(writer, "d1")
    other = make_index(backend, "serverless")  # another process: it finds the copy by searching
    other.upsert([doc("d1", "penguin ice")])
    (second,) = copies(other, "d1")
    assert second["_id"] != first["_id"]
    assert second["_source"]["text"] == "penguin ice"
    assert second["_source"]["written_at"] > first["_source"]["written_at"]
    writer.upsert([doc("d1", "walrus tusks")])  # and again, through the first writer
    (third,) = copies(writer, "d1")
    assert third["_source"]["text"] == "walrus tusks"
    assert ids(writer.search_text(flt(), "zebra penguin walrus", 10)) == ["d1", "d2"]
    assert writer.count("t1") == 2


def test_serverless_a_copy_newer_than_the_clock_stays_older_than_the_next_write(
    serverless_index: OpenSearchIndex,
) -> None:
    index = serverless_index
    future = 4_102_444_800_000  # 2100-01-01: another writer's clock far ahead of ours
    put_copies(index, doc("d1", "from the future"), future)
    index.upsert([doc("d1", "from now")])
    (stored,) = copies(index, "d1")
    assert stored["_source"]["text"] == "from now"
    assert stored["_source"]["written_at"] == future + 1


def test_serverless_duplicates_are_hidden_then_compacted(serverless_index: OpenSearchIndex) -> None:
    index = serverless_index
    index.upsert([doc("d1", "fresh apples"), doc("d2", "apples and pears"), doc("x", "apples", tenant="t2")])
    newest = copies(index, "d1")[0]["_source"]["written_at"]
    put_copies(index, doc("d1", "stale apples", path=("root", "old")), newest - 5_000)  # invisible at upsert time
    put_copies(index, doc("x", "apples", tenant="t2"), newest - 5_000, n=2)
    assert len(copies(index, "d1")) == 2
    assert index.count("t1") == 2
    assert index.doc_ids("t1") == {"d1", "d2"}
    assert ids(index.search_text(flt(), "apples", 10)) == ["d1", "d2"]  # one hit per document
    assert ids(index.search_text(flt(), "stale", 10)) == ["d1"]  # until compaction, the old copy still matches
    assert ids(index.search_text(flt("old"), "apples", 10)) == ["d1"]
    assert index.compact("t1") == 1
    (kept,) = copies(index, "d1")
    assert kept["_source"]["text"] == "fresh apples"
    assert kept["_source"]["written_at"] == newest
    assert index.search_text(flt(), "stale", 10) == []
    assert index.search_text(flt("old"), "apples", 10) == []
    assert index.compact("t1") == 0
    assert len(copies(index, "x", tenant="t2")) == 3  # another tenant is compacted on its own
    assert index.compact("t2") == 2
    assert len(copies(index, "x", tenant="t2")) == 1


def test_serverless_windowed_compaction_leaves_older_duplicates_to_the_full_pass(
    serverless_index: OpenSearchIndex,
) -> None:
    index = serverless_index
    assert isinstance(index, ServerlessOpenSearchIndex)
    index.upsert([doc("recent", "fresh pears"), doc("x", "pears", tenant="t2")])
    newest = copies(index, "recent")[0]["_source"]["written_at"]
    day = 86_400_000
    put_copies(index, doc("recent", "stale pears"), newest - 3 * day)  # a replaced copy whose delete failed
    put_copies(index, doc("x", "pears", tenant="t2"), newest - 3 * day, n=2)
    put_copies(index, doc("old", "old pears"), newest - 2 * day, n=3)  # duplicates no recent write touched
    window = datetime.fromtimestamp((newest - 60_000) / 1000, UTC)
    assert index.compact_recent(window) == {"t1": 1, "t2": 2}
    assert [c["_source"]["text"] for c in copies(index, "recent")] == ["fresh pears"]
    assert len(copies(index, "x", tenant="t2")) == 1
    assert len(copies(index, "old")) == 3  # outside the window: left for the full pass
    assert index.compact_recent(window) == {}
    assert index.compact("t1") == 2
    assert len(copies(index, "old")) == 1


def test_serverless_search_returns_k_distinct_documents(serverless_index: OpenSearchIndex) -> None:
    index = serverless_index
    docs = [doc(d, "tied words") for d in ["a", "b", "c", "d"]]
    index.upsert(docs)
    newest = copies(index, "a")[0]["_source"]["written_at"]
    for d in docs[:2]:
        put_copies(index, d, newest - 1, n=15)  # 16 equal-scoring copies each of a and b: 2k + 16 is not enough
    hits = index.search_text(flt(), "tied", 3)
    assert ids(hits) == ["a", "b", "c"]
    assert len({h.score for h in hits}) == 1
    assert ids(index.search_text(flt(), "tied", 10)) == ["a", "b", "c", "d"]
    assert index.count("t1") == 4
    assert index.compact("t1") == 30
    assert ids(index.search_text(flt(), "tied", 3)) == ["a", "b", "c"]


def test_serverless_delete_and_clear_remove_every_copy(backend: tuple[str, OpenSearch, str]) -> None:
    index = make_index(backend, "serverless", page_size=2)  # pages cut through groups of tied copies
    index.upsert([doc(d) for d in ["d1", "d2", "d3"]])
    put_copies(index, doc("d1"), 1_000, n=5)  # five copies with the same written_at
    put_copies(index, doc("d2"), 1_000, n=3)
    put_copies(index, doc("d3"), 2_000, n=1)
    assert index.count("t1") == 3
    index.delete("t1", ["d1", "d2"])
    assert copies(index, "d1") == [] and copies(index, "d2") == []
    assert len(copies(index, "d3")) == 2
    put_copies(index, doc("d4"), 1_000, n=5)
    index.clear_tenant("t1")
    assert index.client.count(index=index.index_name)["count"] == 0


def test_serverless_update_ancestors_reindexes(backend: tuple[str, OpenSearch, str]) -> None:
    index = make_index(backend, "serverless", page_size=3)
    index.upsert([doc(f"d{i}", f"text {i}", path=("root", "a", "s"), session_id="x") for i in range(5)])
    index.upsert([doc("other", path=("root", "a"))])
    before = {d: copies(index, d) for d in ["d0", "d1", "d2", "d3", "d4"]}
    put_copies(index, doc("d0", "older text", path=("root", "a", "s")), before["d0"][0]["_source"]["written_at"] - 1)
    index.update_ancestors("t1", "s", ["root", "b", "s"])
    for d, (old,) in before.items():
        new = copies(index, d)
        assert new[0]["_id"] != old["_id"]
        assert new[0]["_source"] == {
            **old["_source"],
            "ancestor_ids": ["root", "b", "s"],
            "written_at": old["_source"]["written_at"] + 1,
            "digest": content_digest({**old["_source"], "ancestor_ids": ["root", "b", "s"]}),
        }
        assert all(c["_source"]["ancestor_ids"] == ["root", "b", "s"] for c in new)  # the duplicate moved too
    assert [c["_source"]["text"] for c in copies(index, "d0")] == ["text 0", "older text"]  # order kept
    assert index.compact("t1") == 1
    assert ids(index.search_text(flt("b"), "text", 10)) == ["d0", "d1", "d2", "d3", "d4"]
    assert index.search_text(flt("a"), "text", 10) == []
    assert copies(index, "other")[0]["_source"]["ancestor_ids"] == ["root", "a"]
    moved = {d: copies(index, d)[0]["_id"] for d in before}
    index.update_ancestors("t1", "s", ["root", "b", "s"])  # already there: nothing is rewritten
    assert {d: copies(index, d)[0]["_id"] for d in before} == moved
    assert index.count("t1") == 6


# -- the knn double in front of osmem (tests/support/knn_proxy.py) -----------------------------------
def knn_index(client: OpenSearch, space: str = "cosinesimil") -> str:
    name = f"knn-{uuid.uuid4().hex[:8]}"
    body = index_body(3)
    body["mappings"]["properties"]["vector"]["method"]["space_type"] = space
    client.indices.create(index=name, body=body)
    for doc_id, tenant, vector in [("a", "t1", [1, 0, 0]), ("b", "t1", [1, 1, 0]), ("c", "t1", [0, 0, 1])]:
        client.index(index=name, id=doc_id, body={"tenant": tenant, "doc_id": doc_id, "vector": vector})
    client.index(index=name, id="x", body={"tenant": "t2", "doc_id": "x", "vector": [1, 0, 0]})
    client.index(index=name, id="novector", body={"tenant": "t1", "doc_id": "novector"})
    client.indices.refresh(index=name)
    return name


def knn_query(vector: list[float], k: int, **clause: Any) -> dict[str, Any]:
    return {"knn": {"vector": {"vector": vector, "k": k, **clause}}}


def test_the_knn_double_answers_as_opensearch_does(osmem_client: OpenSearch) -> None:
    client, name = osmem_client, knn_index(osmem_client)
    query = knn_query([2, 0, 0], 2, filter={"term": {"tenant": "t1"}})
    response = client.search(index=name, body={"query": query, "_source": ["doc_id"]})
    hits = response["hits"]
    assert response["hits"]["total"] == {"value": 2, "relation": "eq"}  # the k nearest of the filtered documents
    assert [(h["_id"], h["_source"]) for h in hits["hits"]] == [("a", {"doc_id": "a"}), ("b", {"doc_id": "b"})]
    assert [h["_score"] for h in hits["hits"]] == pytest.approx([1.0, (1 + 2**-0.5) / 2])  # (2 - (1 - cos)) / 2
    assert hits["max_score"] == pytest.approx(1.0)

    body = {
        "query": knn_query([0, 0, 1], 10),
        "size": 2,
        "sort": [{"_score": {"order": "desc"}}, {"doc_id": {"order": "asc"}}],
        "_source": False,
        "track_total_hits": False,
    }
    hits = client.search(index=name, body=body)["hits"]
    assert "total" not in hits
    assert [(h["_id"], h["sort"]) for h in hits["hits"]] == [("c", [1.0, "c"]), ("a", [0.5, "a"])]  # a, b, x tie
    assert all("_source" not in h for h in hits["hits"])
    full = client.search(index=name, body={"query": knn_query([0, 0, 1], 1)})["hits"]["hits"]
    assert full[0]["_source"] == {"tenant": "t1", "doc_id": "c", "vector": [0, 0, 1]}


@pytest.mark.parametrize(("space", "score"), [("l2", 1 / (1 + 1)), ("innerproduct", 1 + 1.0)])
def test_the_knn_double_scores_other_spaces_as_documented(osmem_client: OpenSearch, space: str, score: float) -> None:
    name = knn_index(osmem_client, space)
    body = {"query": knn_query([1, 1, 0], 1, filter={"term": {"doc_id": "a"}})}
    (hit,) = osmem_client.search(index=name, body=body)["hits"]["hits"]
    assert hit["_score"] == pytest.approx(score)  # l2: 1 / (1 + d), d = 1; faiss inner product 1: -d + 1 = 2


@pytest.mark.parametrize(
    "body",
    [
        {"query": {"bool": {"must": [knn_query([1, 0, 0], 2)]}}},  # not efficient filtering: osmem refuses it
        {"query": {"hybrid": {"queries": [knn_query([1, 0, 0], 2)]}}},
        {"query": knn_query([1, 0, 0], 2, min_score=0.5)},
        {"query": knn_query([1, 0, 0], 0)},
        {"query": knn_query([1, 0], 2)},
        {"query": knn_query([0, 0, 0], 2)},  # cosinesimil rejects a zero vector
        {"query": knn_query([1, 0, 0], 2), "aggs": {"n": {"value_count": {"field": "doc_id"}}}},
        {"query": knn_query([1, 0, 0], 2), "sort": [{"doc_id": {"order": "asc", "missing": "_first"}}]},
        {"query": {"knn": {"doc_id": {"vector": [1, 0, 0], "k": 2}}}},
    ],
)
def test_the_knn_double_refuses_what_it_does_not_model(osmem_client: OpenSearch, body: dict[str, Any]) -> None:
    name = knn_index(osmem_client)
    with pytest.raises(RequestError) as refused:
        osmem_client.search(index=name, body=body)
    assert refused.value.status_code == 400


def test_the_knn_double_reports_a_missing_index(osmem_client: OpenSearch) -> None:
    with pytest.raises(NotFoundError):
        osmem_client.search(index="no-such-index", body={"query": knn_query([1, 0, 0], 2)})
