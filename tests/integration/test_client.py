"""The Python SDK (`mneme_sdk`, clients/python) against the local server (typed answers, error classes),
in-process (the embedded transport) and against a stub server (retries), sync and async."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mneme import cli
from mneme_sdk import AsyncClient
from mneme_sdk import Client as MnemeClient
from mneme_sdk._flow import parse_retry_after as _retry_after
from mneme_sdk.errors import (
    Conflict,
    ConnectionFailed,
    Forbidden,
    InvalidInput,
    MemoryNotFound,
    MnemeError,
    ScopeNotFound,
    ServiceUnavailable,
    Throttled,
    Unauthorized,
)
from mneme_sdk.models import Bundle, MemoryPage, MemoryRecord, RecallResponse, Remembered

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture
def admin(server: str, home: Path) -> MnemeClient:
    key_file, _ = cli.ensure_first_run()
    return MnemeClient(server, key_file.read_text().strip())


def test_round_trip_with_typed_answers(admin: MnemeClient) -> None:
    assert admin.health().status == "ok"
    assert admin.put_layers({1: "clients", 2: "services"}) == {1: "clients", 2: "services"}
    assert admin.get_layers() == {1: "clients", 2: "services"}
    created = admin.create_scope("root.acme.vat", parents=True)
    assert (created.path, created.depth) == ("root.acme.vat", 2)
    assert [s.path for s in admin.list_scopes()] == ["root", "root.acme", "root.acme.vat"]

    one = admin.remember("root.acme", "Acme moved its year end to 31 March.", metadata={"source": "call"})
    assert isinstance(one, Remembered) and one.created and one.indexed
    again = admin.remember("root.acme", "Acme moved its year end to 31 March.", metadata={"source": "call"})
    assert again.episode_id != one.episode_id  # no key and no occurred_at: a new observation
    keyed = [{"scope": "root.acme.vat", "content": f"VAT note {i}", "idempotency_key": f"n{i}"} for i in range(3)]
    batch = admin.remember_batch(keyed)
    assert [r.created for r in batch] == [True, True, True]
    assert [r.created for r in admin.remember_batch(keyed)] == [False, False, False]  # retries write nothing

    hits = admin.recall("when is the year end?", scope="root.acme", limit=3)
    assert isinstance(hits, RecallResponse) and hits.results[0].content.startswith("Acme moved")
    assert hits.results[0].metadata == {"source": "call"}
    assert hits.results[0].scope == "root.acme"
    fetched = admin.recall(ids=[one.episode_id])
    assert [r.id for r in fetched.results] == [one.episode_id]

    memory = admin.create_memory("vat-policy", "Acme uses the flat-rate scheme.", scope="root.acme.vat", tags=["vat"])
    assert isinstance(memory, MemoryRecord) and memory.status == "published" and memory.tags == ["vat"]
    assert memory.target == "root.acme.vat" and memory.body == "Acme uses the flat-rate scheme."
    markdown = admin.retrieve("root.acme.vat")
    assert "<!-- scoped: root.acme.vat | priority: 9 | key: vat-policy -->" in markdown
    bundle = admin.retrieve_json("root.acme.vat")
    assert isinstance(bundle, Bundle) and [b.key for b in bundle.blocks] == ["vat-policy"]
    assert bundle.markdown == markdown
    edited = admin.edit_memory(memory.memory_id, body="Acme left the flat-rate scheme.", version=1)
    assert edited.version == 2 and edited.body == "Acme left the flat-rate scheme."
    assert admin.archive_memory(memory.memory_id).status == "archived"
    assert "vat-policy" not in admin.retrieve("root.acme.vat")

    renamed = admin.rename_scope("root.acme", "root.acme-ltd")
    assert (renamed.path, renamed.alias) == ("root.acme-ltd", "root.acme")

    started = admin.consolidate(["root.acme-ltd"])
    seen: list[str] = []
    run = admin.wait_run(started.run_id, timeout=60, interval=0.05, on_update=lambda r: seen.append(r.status))
    assert run.finished and run.status == "succeeded" and seen[-1] == "succeeded"
    assert run.run_id == started.run_id and "collect" in run.stages


def test_keys_and_roles(admin: MnemeClient, server: str) -> None:
    created = admin.create_key("bot", ["writer"])
    assert created.api_key.startswith("mnk_") and created.roles == ["writer"]
    writer = MnemeClient(server, created.api_key)
    admin.create_scope("root.acme")
    # A writer's memory is pending and visible to its author
    proposal = writer.create_memory("tone", "Be brief.", scope="root.acme")
    assert proposal.status == "pending"
    assert "| pending -->" in writer.retrieve("root.acme")
    assert "tone" not in admin.retrieve("root.acme")  # approvers see published content in bundles
    with pytest.raises(Forbidden) as forbidden:
        writer.create_scope("root.other")
    assert forbidden.value.status == 403 and forbidden.value.code == "forbidden"
    assert {k.principal for k in admin.list_keys()} == {"local-admin", "bot"}
    admin.revoke_key(created.key_id)
    with pytest.raises(MnemeError) as revoked:
        writer.list_scopes()
    assert (revoked.value.status, revoked.value.code) == (401, "key_revoked")


def test_errors_are_mneme_errors_built_from_the_api_error_shape(admin: MnemeClient, server: str) -> None:
    with pytest.raises(ScopeNotFound) as missing:
        admin.retrieve("root.nowhere")
    assert (missing.value.status, missing.value.code) == (404, "scope_not_found")
    assert missing.value.details == {"path": "root.nowhere"} and "root.nowhere" in missing.value.message
    with pytest.raises(Unauthorized) as unknown:
        MnemeClient(server, "mnk_not-a-key").recall("anything")
    assert unknown.value.status == 401
    with pytest.raises(InvalidInput) as invalid:
        admin.retrieve("Root.Acme")
    assert (invalid.value.status, invalid.value.code) == (400, "invalid_path")
    admin.create_scope("root.acme")
    memory = admin.create_memory("k", "body", scope="root.acme")
    with pytest.raises(Conflict) as conflict:
        admin.edit_memory(memory.memory_id, body="new", version=7)
    assert conflict.value.code == "version_conflict" and conflict.value.details == {"current_version": 1}
    # Validated before sending, with the same models: no request is made
    with pytest.raises(InvalidInput) as local:
        admin.recall("x", limit=500)
    assert local.value.status == 400 and local.value.details[0]["loc"] == ["limit"]
    with pytest.raises(InvalidInput):
        admin.remember_batch([])


def test_embedded_client_has_the_same_behaviour(home: Path) -> None:
    from mneme.local.embedded import embedded_client
    from mneme.models import Principal, Role

    writer = embedded_client(Principal(tenant="t1", principal="agent", roles=frozenset({Role.writer})))
    writer.remember("root.notes", "The build uses Python 3.11.", create_scope=True)
    assert writer.recall("python version", scope="root.notes").results[0].content == "The build uses Python 3.11."
    with pytest.raises(Forbidden):  # the route table's roles apply in-process too
        writer.put_layers({1: "clients"})
    with pytest.raises(ScopeNotFound):
        writer.retrieve("root.elsewhere")


# -- retries against a stub server -------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Stub:
    url: str
    replies: list[Reply]
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def stub() -> Iterator[Stub]:
    """A local HTTP server answering with scripted replies, in order, and recording each request."""
    state = Stub("", [])

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            state.requests.append((self.command, self.path, dict(self.headers.items()), self.rfile.read(length)))
            reply = state.replies.pop(0) if state.replies else Reply(500, {"error": {"code": "x", "message": "x"}})
            time.sleep(reply.delay)
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            content_type = "text/html" if isinstance(reply.body, bytes) else "application/json"
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        do_GET = do_POST = do_PUT = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


THROTTLED = {"error": {"code": "throttled", "message": "slow down"}}
UNAVAILABLE = {"error": {"code": "store_unavailable", "message": "try again"}}
BROKEN = {"error": {"code": "internal_error", "message": "internal error"}}
RECALL_OK = {"results": [], "retrieval_path": "hybrid", "context": "# recall"}


class Sleeps(list[float]):
    """Records the client's waits and really waits (so Retry-After is observable end to end)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


def test_429_with_retry_after_is_waited_for_then_the_call_succeeds(stub: Stub) -> None:
    stub.replies = [Reply(429, THROTTLED, {"Retry-After": "1"}), Reply(200, RECALL_OK)]
    sleeps = Sleeps()
    client = MnemeClient(stub.url, "mnk_test", sleep=sleeps)
    answer = client.recall("anything")
    assert answer.retrieval_path == "hybrid" and answer.results == []
    assert sleeps == [1.0]
    assert len(stub.requests) == 2
    method, path, headers, body = stub.requests[1]
    assert (method, path) == ("POST", "/v1/recall")
    assert headers["Authorization"] == "Bearer mnk_test" and json.loads(body) == {"query": "anything"}


def test_retry_after_as_an_http_date_and_exhausted_retries(stub: Stub) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (_retry_after(later) or 0) <= 30
    assert _retry_after("0.5") == 0.5 and _retry_after("soon") is None and _retry_after(None) is None
    stub.replies = [Reply(429, THROTTLED, {"Retry-After": "0"}) for _ in range(3)]
    sleeps = Sleeps()
    with pytest.raises(Throttled) as throttled:
        MnemeClient(stub.url, "k", max_retries=2, sleep=sleeps).list_scopes()
    assert throttled.value.status == 429 and len(stub.requests) == 3 and sleeps == [0.0, 0.0]


def test_a_retry_after_beyond_the_limit_is_not_waited_for(stub: Stub) -> None:
    stub.replies = [Reply(429, THROTTLED, {"Retry-After": "3600"})]
    sleeps = Sleeps()
    with pytest.raises(Throttled):
        MnemeClient(stub.url, "k", sleep=sleeps, max_retry_after=60).health()
    assert sleeps == [] and len(stub.requests) == 1


def test_5xx_is_retried_with_backoff_for_safe_calls_only(stub: Stub) -> None:
    sleeps = Sleeps()
    client = MnemeClient(stub.url, "k", sleep=sleeps, backoff=0.01)
    stub.replies = [Reply(500, BROKEN), Reply(502, b"<html>bad gateway</html>"), Reply(200, RECALL_OK)]
    assert client.recall("q").context == "# recall"  # recall is a read: retried
    assert len(stub.requests) == 3 and len(sleeps) == 2 and sleeps[1] <= 0.02
    # Creating a memory is not idempotent: a 500 may have written it, so it is not resent
    stub.requests.clear()
    stub.replies = [Reply(500, BROKEN)]
    with pytest.raises(MnemeError) as broken:
        client.create_memory("k", "body", scope="root")
    assert broken.value.status == 500 and broken.value.code == "internal_error" and len(stub.requests) == 1
    # ... but a 503 (refused before any work) is
    stub.requests.clear()
    memory = {
        "memory_id": "m1",
        "kind": "scoped",
        "target": "root",
        "key": "k",
        "status": "published",
        "version": 1,
        "author": "a",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "body": "body",
    }
    stub.replies = [Reply(503, UNAVAILABLE), Reply(201, memory)]
    assert client.create_memory("k", "body", scope="root").memory_id == "m1"
    assert len(stub.requests) == 2


def test_an_answer_without_the_error_shape_keeps_its_status(stub: Stub) -> None:
    stub.replies = [Reply(502, b"<html>bad gateway</html>")]
    with pytest.raises(MnemeError) as error:
        MnemeClient(stub.url, "k", max_retries=0).health()
    assert (error.value.status, error.value.code) == (502, "http_502") and "bad gateway" in error.value.message


def test_connection_failures_are_retried_then_raised(stub: Stub) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps = Sleeps()
    with pytest.raises(ConnectionFailed) as refused:
        MnemeClient(f"http://127.0.0.1:{port}", "k", max_retries=2, backoff=0.01, sleep=sleeps).health()
    assert isinstance(refused.value, ServiceUnavailable) and refused.value.code == "connection_failed"
    assert len(sleeps) == 2
    # A read timeout is retried for a read, and the next attempt's answer is used
    stub.replies = [Reply(200, {"status": "ok"}, delay=0.5), Reply(200, {"status": "ok", "version": "x"})]
    client = MnemeClient(stub.url, "k", timeout=0.2, backoff=0.01, sleep=Sleeps())
    assert client.health().model_dump(exclude_none=True) == {"status": "ok", "version": "x"}


def test_a_degraded_health_is_read_with_what_is_degraded(stub: Stub) -> None:
    why = "/srv/mneme/cursor.key is a directory"
    stub.replies = [Reply(200, {"status": "degraded", "version": "x", "cursor_key": why})]
    health = MnemeClient(stub.url, "k", sleep=Sleeps()).health()
    assert health.status == "degraded" and health.model_dump()["cursor_key"] == why


def test_change_feed_pages_resume_without_gaps_or_repeats(admin: MnemeClient) -> None:
    admin.remember_batch([{"scope": "root", "content": f"note {i}", "idempotency_key": f"k{i}"} for i in range(5)])
    everything = [(c.kind, c.id) for c in admin.iter_changes(page_size=100)]
    assert sum(1 for kind, _ in everything if kind == "episode") == 5
    pages = list(admin.iter_change_pages(page_size=2))
    assert [c.id for p in pages for c in p.changes] == [i for _, i in everything]
    assert all(p.has_more for p in pages[:-1]) and not pages[-1].has_more
    # A connector that stopped after the first page resumes from its cursor
    resumed = [c.id for c in admin.iter_changes(pages[0].next_cursor, page_size=3)]
    assert resumed == [i for _, i in everything][2:]
    episode = next(c for c in admin.changes(limit=100).changes if c.kind == "episode")
    assert episode.record is not None and episode.record["content"].startswith("note ")
    with pytest.raises(InvalidInput) as tampered:
        admin.changes(pages[0].next_cursor + "x")  # type: ignore[operator]
    assert tampered.value.code == "invalid_cursor"
    with pytest.raises(InvalidInput) as garbled:  # found by the fuzzer: a non-ASCII cursor was a 500
        admin.changes("vìÆ\x83.ªD")
    assert garbled.value.code == "invalid_cursor"


def test_review_drafts_erasure_and_sttp_through_the_typed_client(admin: MnemeClient) -> None:
    # Given a writer proposing two memories
    admin.create_scope("root.acme.vat", parents=True)
    writer = MnemeClient(admin.base_url, admin.create_key("proposer", ["writer"]).api_key)
    first = writer.create_memory("first", "Proposal one.", scope="root.acme")
    second = writer.create_memory("second", "Proposal two.", scope="root.acme")
    # When an approver works the queue
    queue = admin.reviews().queue or []
    assert {item["memory_id"] for item in queue} >= {first.memory_id, second.memory_id}
    assert admin.approve_memory(first.memory_id).status == "published"
    assert admin.reject_memory(second.memory_id, "not needed").memory_id == second.memory_id
    assert admin.memory_history(first.memory_id).history
    assert writer.reviews(mine=True).mine is not None
    # and moves a scope through a draft
    draft = admin.create_draft([{"op": "move", "path": "root.acme.vat", "new_parent": "root"}])
    assert admin.get_draft(draft.draft_id).preview.fingerprint == draft.preview.fingerprint
    assert admin.publish_draft(draft.draft_id, draft.preview.fingerprint).status == "published"
    # Then erasure counts before it deletes, and STTP validation answers with diagnostics
    assert admin.erase_scope("root.acme").dry_run is True
    checked = admin.validate_sttp("not a node", profile="tolerant")
    assert checked.profile == "tolerant" and checked.diagnostics
    assert admin.health().status == "ok"


# -- the async client, and the SDK against the API's own description --------------------------------


def test_the_async_client_has_the_same_methods_and_behaviour(admin: MnemeClient, server: str) -> None:
    import asyncio

    public = {name for name in dir(MnemeClient) if not name.startswith("_") and callable(getattr(MnemeClient, name))}
    assert public - {"close"} == {n for n in dir(AsyncClient) if not n.startswith("_")} - {"aclose", "http", "retry"}
    for name in public - {"close"}:  # both drive the same flow: one copy of each route's logic
        assert getattr(MnemeClient, name).__wrapped__ is getattr(AsyncClient, name).__wrapped__, name
    key = admin.create_key("async-bot", ["writer"]).api_key

    async def agent() -> tuple[list[str], int, str]:
        async with AsyncClient(server, key) as mneme:
            await mneme.remember("root.acme", "Acme's year end is 31 March.", create_scope=True)
            await mneme.remember_many([{"scope": "root.acme", "content": f"note {i}"} for i in range(3)], batch_size=2)
            hits = await mneme.recall("year end", scope="root.acme", limit=2)
            changes = [c async for c in mneme.iter_changes(page_size=2)]
            with pytest.raises(ScopeNotFound):
                await mneme.retrieve("root.nowhere")
            return [r.content for r in hits.results], len(changes), (await mneme.me()).principal

    contents, changed, principal = asyncio.run(agent())
    assert contents[0] == "Acme's year end is 31 March." and changed >= 4 and principal == "async-bot"


def test_a_memory_is_found_by_scope_and_key_in_one_request_sync_and_async(admin: MnemeClient, server: str) -> None:
    import asyncio

    # Given a memory, and a writer's open edit of it
    admin.create_scope("root.acme", parents=True)
    created = admin.create_memory("year-end", "Acme's year end is 31 March.", scope="root.acme")
    writer_key = admin.create_key("sdk-writer", ["writer"]).api_key
    MnemeClient(server, writer_key).edit_memory(created.memory_id, body="Acme's year end is 30 April.")
    # When it is found by scope and key (sync)
    found = admin.find_memory("root.acme", "year-end")
    # Then it is the memory's record
    assert isinstance(found, MemoryRecord) and (found.memory_id, found.target) == (created.memory_id, "root.acme")
    assert found.body == "Acme's year end is 31 March." and found.pending_revision is None
    with pytest.raises(MemoryNotFound):
        admin.find_memory("root.acme", "year-start")
    with pytest.raises(InvalidInput):
        admin.find_memory("root.acme", "Year End")

    async def writer() -> MemoryRecord:  # and async: the writer's own open edit comes with it
        async with AsyncClient(server, writer_key) as mneme:
            return await mneme.find_memory("root.acme", "year-end")

    mine = asyncio.run(writer())
    assert mine.pending_revision is not None and mine.pending_revision["changes"] == {
        "body": "Acme's year end is 30 April."
    }


def test_a_subtree_s_memories_are_listed_a_page_at_a_time_sync_and_async(admin: MnemeClient, server: str) -> None:
    import asyncio

    # Given memories in a scope and a scope under it, and one beside them
    admin.create_scope("root.acme.payroll", parents=True)
    admin.create_scope("root.globex", parents=True)
    made = [admin.create_memory(k, f"Rule {k}.", scope=s) for s, k in
            [("root.acme", "b"), ("root.acme.payroll", "a"), ("root.acme", "a"), ("root.globex", "a")]]  # fmt: skip
    # When the subtree of root.acme is listed two at a time (sync), then the next page (async)
    first = admin.list_scope_memories("root.acme", limit=2)

    async def more() -> MemoryPage:
        async with AsyncClient(server, cli.ensure_first_run()[0].read_text().strip()) as mneme:
            return await mneme.list_scope_memories("root.acme", cursor=first.next_cursor, limit=2)

    second = asyncio.run(more())
    # Then the pages hold its three memories as records, by scope path and key
    assert first.has_more and first.next_cursor and not second.has_more and second.next_cursor is None
    listed = [*first.memories, *second.memories]
    assert all(isinstance(m, MemoryRecord) for m in listed)
    assert [(m.target, m.key) for m in listed] == [("root.acme", "a"), ("root.acme", "b"), ("root.acme.payroll", "a")]
    assert [m.memory_id for m in listed] == [made[2].memory_id, made[0].memory_id, made[1].memory_id]
    with pytest.raises(InvalidInput):
        admin.list_scope_memories("root.acme", cursor=first.next_cursor + "x")
    with pytest.raises(ScopeNotFound):
        admin.list_scope_memories("root.nowhere")


def test_the_async_client_retries_like_the_sync_one(stub: Stub) -> None:
    import asyncio

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def call() -> str:
        async with AsyncClient(stub.url, "k", sleep=sleep) as mneme:
            return (await mneme.recall("q")).context

    stub.replies = [Reply(429, THROTTLED, {"Retry-After": "2"}), Reply(503, UNAVAILABLE), Reply(200, RECALL_OK)]
    assert asyncio.run(call()) == "# recall"
    assert waits[0] == 2.0 and len(waits) == 2 and len(stub.requests) == 3


def test_the_sdk_models_are_the_openapi_documents_schemas() -> None:
    """Every schema of docs/openapi.json has an SDK model of the same name, fields and required fields."""
    from pydantic import BaseModel

    from mneme_sdk import models

    document = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    for name, schema in document["components"]["schemas"].items():
        if "properties" not in schema and schema.get("type") != "object":
            continue  # an enum (Role): a Literal in the SDK
        sdk = getattr(models, name, None)
        assert isinstance(sdk, type) and issubclass(sdk, BaseModel), f"no SDK model for {name}"
        assert set(sdk.model_fields) == set(schema.get("properties", {})), name
        required = {field for field, info in sdk.model_fields.items() if info.is_required()}
        assert required == set(schema.get("required", [])), name
