"""The write path over HTTP, on both record stores: idempotency keys, `created`, and stale versions."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.integration.helpers import Api, assert_error
from tests.integration.stacks import STORES, Served, served
from tests.support.embedding import HashEmbedder


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def episodes_in_feed(api: Api) -> dict[str, Any]:
    changes = api.ok("GET", "/v1/changes?limit=200")["changes"]
    return {c["id"]: c["record"] for c in changes if c["kind"] == "episode"}


def test_a_batch_reusing_a_key_for_other_content_is_refused_naming_the_item_and_writes_nothing(
    stack: Served,
) -> None:
    writer = stack.key("w1", "writer")
    items = [
        {"scope": "root.idem", "content": "FIRST", "idempotency_key": "k3", "create_scope": True},
        {"scope": "root.idem", "content": "SECOND", "idempotency_key": "k3", "create_scope": True},
    ]

    error = assert_error(writer.post("/v1/remember", {"items": items}), 409, "idempotency_key_reused")

    assert error["details"]["item"] == 1
    assert episodes_in_feed(writer) == {}


def test_reusing_a_stored_key_for_other_content_names_the_item(stack: Served) -> None:
    writer = stack.key("w1", "writer")
    first = {"scope": "root.idem", "content": "FIRST", "idempotency_key": "k3", "create_scope": True}
    writer.ok("POST", "/v1/remember", first, 201)
    other = {"scope": "root.idem", "content": "OTHER", "idempotency_key": "k9"}

    response = writer.post("/v1/remember", {"items": [other, {**first, "content": "SECOND"}]})

    assert assert_error(response, 409, "idempotency_key_reused")["details"]["item"] == 1
    assert [e["content"] for e in episodes_in_feed(writer).values()] == ["FIRST"]


def test_the_same_item_twice_in_a_batch_is_one_episode_created_once(stack: Served) -> None:
    writer = stack.key("w1", "writer")
    item = {"scope": "root.idem", "content": "SAME", "idempotency_key": "k1", "create_scope": True}

    answer = writer.ok("POST", "/v1/remember", {"items": [item, item, {**item, "idempotency_key": None}]}, 201)

    results = answer["items"]
    assert [r["created"] for r in results] == [True, False, True]
    assert results[0]["episode_id"] == results[1]["episode_id"] != results[2]["episode_id"]
    assert len(episodes_in_feed(writer)) == 2


class GatedEmbedder(HashEmbedder):
    """Holds every embed call until `parties` callers are inside: all of them have read the store and
    found no episode, so only the conditional write can tell them apart."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.gate = threading.Barrier(parties, timeout=120)  # generous: a loaded CI machine, moto serialised

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.gate.wait()
        return super().embed(texts)


@pytest.mark.parametrize("kind", STORES)
def test_of_sixteen_concurrent_identical_remembers_exactly_one_learns_it_created_the_episode(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served(kind, tmp_path, monkeypatch, embedder=GatedEmbedder(16)) as stack:
        writer = stack.key("w1", "writer")
        stack.admin.ok("POST", "/v1/scopes", {"path": "root.race"}, 201)
        item = {"scope": "root.race", "content": "Only once.", "idempotency_key": "race-1"}

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: writer.ok("POST", "/v1/remember", item, 201), range(16)))

        assert sum(a["created"] for a in answers) == 1
        assert len({a["episode_id"] for a in answers}) == 1
        assert len(episodes_in_feed(writer)) == 1


def test_a_stale_version_is_a_conflict_for_every_role(stack: Served) -> None:
    approver, writer = stack.key("ann", "approver"), stack.key("wes", "writer")
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    memory = approver.create_memory("vat", "v1", scope="root.acme")
    for body in ("v2", "v3"):
        approver.ok("PATCH", f"/v1/memories/{memory['memory_id']}", {"body": body})
    own = writer.create_memory("mine", "draft", scope="root.acme")
    writer.ok("PATCH", f"/v1/memories/{own['memory_id']}", {"body": "draft 2"})

    for api, memory_id in ((writer, memory["memory_id"]), (approver, memory["memory_id"]), (writer, own["memory_id"])):
        response = api.patch(f"/v1/memories/{memory_id}", {"body": "stale edit", "version": 1})
        assert assert_error(response, 409, "version_conflict")["details"]["current_version"] > 1

    mine = writer.ok("GET", "/v1/reviews?mine=true")["mine"]
    assert [m for m in mine if m.get("kind", "revision") == "revision"] == []  # no revision was rebased
    current = approver.patch(f"/v1/memories/{memory['memory_id']}", {"body": "fresh", "version": 3})
    assert current.status_code == 200 and current.json()["version"] == 4


def test_an_empty_patch_does_not_bump_the_version(stack: Served) -> None:
    approver, writer = stack.key("ann", "approver"), stack.key("wes", "writer")
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    published = approver.create_memory("vat", "v1", scope="root.acme")
    pending = writer.create_memory("mine", "draft", scope="root.acme")

    for api, memory in ((approver, published), (writer, pending), (writer, published)):
        answer = api.ok("PATCH", f"/v1/memories/{memory['memory_id']}", {})
        assert answer["version"] == 1
        assert api.ok("PATCH", f"/v1/memories/{memory['memory_id']}", {"version": 1})["version"] == 1

    history = approver.ok("GET", f"/v1/memories/{published['memory_id']}/history")["history"]
    assert [h["action"] for h in history] == ["created"]
    assert "pending_revision" not in writer.ok("PATCH", f"/v1/memories/{published['memory_id']}", {})


# -- the change feed: only what the reader may read; erasure leaves tombstones ------------------------
def feed(api: Api) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = api.ok("GET", f"/v1/changes?limit=3{'&cursor=' + cursor if cursor else ''}")
        changes += page["changes"]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            return changes


def test_the_feed_never_shows_another_authors_pending_or_rejected_work(stack: Served) -> None:
    approver, w1, w2 = stack.key("ann", "approver"), stack.key("w1", "writer"), stack.key("w2", "writer")
    reader = stack.key("rita", "reader")
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    rejected = w1.create_memory("aaa-new", "Pending new rule from w1.", scope="root.acme")
    pending = w1.create_memory("bbb-new", "Still pending from w1.", scope="root.acme")
    retired = approver.create_memory("ccc-old", "Published, then archived.", scope="root.acme")
    approver.ok("POST", f"/v1/memories/{rejected['memory_id']}/reject", {"reason": "Not agreed."})
    approver.ok("POST", f"/v1/memories/{retired['memory_id']}/archive", {})
    hidden = {rejected["memory_id"], pending["memory_id"]}

    for api in (approver, w2, reader, stack.admin):
        changes = feed(api)
        assert not {c["id"] for c in changes} & hidden
        assert "from w1" not in str(changes)
        [old] = [c for c in changes if c["id"] == retired["memory_id"]]
        assert old["record"]["status"] == "archived"
    own = {c["id"]: c["record"]["status"] for c in feed(w1) if c["kind"] == "memory"}
    assert own == {rejected["memory_id"]: "archived", pending["memory_id"]: "pending", retired["memory_id"]: "archived"}


def test_erasure_leaves_a_tombstone_per_erased_record_with_ids_only(stack: Served) -> None:
    reader = stack.key("rita", "reader")
    stack.admin.ok("POST", "/v1/remember", {"scope": "root.gone.deep", "content": "Secret.", "create_scope": True}, 201)
    memory = stack.admin.create_memory("note", "Secret note.", scope="root.gone")
    before = feed(reader)
    cursor = reader.ok("GET", "/v1/changes?limit=200")["next_cursor"]
    ids = {c["id"]: c["kind"] for c in before if c["record"].get("parent_id", "") is not None}  # not root

    erased = stack.admin.call("DELETE", "/v1/scopes?path=root.gone&dry_run=false")
    assert erased.status_code == 200, erased.text

    after = reader.ok("GET", f"/v1/changes?limit=200&cursor={cursor}")["changes"]
    assert sorted((c["id"], c["kind"]) for c in after) == sorted(ids.items()) and len(ids) == 4
    assert all(c["deleted"] is True and c["record"] is None for c in after)
    assert memory["memory_id"] in {c["id"] for c in after}
    assert "Secret" not in str(after)
    replayed = {c["id"] for c in feed(reader) if not c["deleted"]}
    assert not replayed & set(ids)


# -- the author's view of review, and who did what --------------------------------------------------
def test_mine_lists_the_writers_pending_creates_and_the_reasons_they_got(stack: Served) -> None:
    approver, writer = stack.key("ann", "approver"), stack.key("wes", "writer")
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    first = writer.create_memory("first", "One.", scope="root.acme")
    second = writer.create_memory("second", "Two.", scope="root.acme")
    approver.create_memory("theirs", "Not a proposal.", scope="root.acme")

    mine = {m["memory_id"]: m for m in writer.ok("GET", "/v1/reviews?mine=true")["mine"]}
    assert {k: (m["kind"], m["status"]) for k, m in mine.items()} == {
        first["memory_id"]: ("create", "open"),
        second["memory_id"]: ("create", "open"),
    }
    approver.ok("POST", f"/v1/memories/{first['memory_id']}/reject", {"reason": "Duplicate of vat."})
    approver.ok("POST", f"/v1/memories/{second['memory_id']}/approve", {})

    mine = {m["memory_id"]: m for m in writer.ok("GET", "/v1/reviews?mine=true")["mine"]}
    assert (mine[first["memory_id"]]["status"], mine[first["memory_id"]]["reason"]) == ("rejected", "Duplicate of vat.")
    assert (mine[second["memory_id"]]["status"], mine[second["memory_id"]]["decided_by"]) == ("approved", "ann")
    assert approver.ok("GET", "/v1/reviews?mine=true")["mine"] == []


def test_history_names_the_author_for_the_edit_and_the_approver_for_the_approval(stack: Served) -> None:
    approver, writer = stack.key("ann", "approver"), stack.key("wes", "writer")
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    proposed = writer.create_memory("vat", "Flat rate.", scope="root.acme")
    approver.ok("POST", f"/v1/memories/{proposed['memory_id']}/approve", {})
    writer.ok("PATCH", f"/v1/memories/{proposed['memory_id']}", {"body": "Standard rate.", "version": 2})
    approver.ok("POST", f"/v1/memories/{proposed['memory_id']}/approve", {"author": "wes"})

    history = approver.ok("GET", f"/v1/memories/{proposed['memory_id']}/history")["history"]

    assert [(h["action"], h["actor"], h["approved_by"]) for h in history] == [
        ("created", "wes", None),
        ("approved", "ann", "ann"),
        ("revision_approved", "wes", "ann"),
    ]
    assert history[-1]["changes"]["body"] == ["Flat rate.", "Standard rate."]
