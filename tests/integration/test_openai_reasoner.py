"""OpenAIReasoner against a fake OpenAI-compatible server on loopback that records requests and
replays scripted answers."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mneme.adapters.reasoners import OpenAIReasoner, ReasonerOutputInvalid
from mneme.consolidation.reasoning import Reasoner
from mneme.errors import MnemeError, StoreUnavailable, Throttled
from mneme.records import Proposal

TEXTS = ["Pennine Joinery's VAT scheme is flat rate.", "Sam confirmed Pennine Joinery uses the flat rate scheme."]
GOOD = {
    "entity": "Pennine Joinery",
    "property": "VAT scheme",
    "value": "flat rate",
    "summary": "Pennine Joinery is on the flat rate VAT scheme.",
}


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str | None, **message: Any) -> Reply:
    payload = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message}}],
    }
    return Reply(body=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})


@dataclass
class FakeOpenAI:
    url: str
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def reasoner(self, **kwargs: Any) -> OpenAIReasoner:
        kwargs.setdefault("sleep", lambda _: None)
        return OpenAIReasoner(self.url + "/v1/", "test-model", **kwargs)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    state = FakeOpenAI(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                reply = state.script.pop(0) if state.script else Reply(500, b'{"error": "script exhausted"}')
            time.sleep(reply.delay)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client may have timed out
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_good_json_is_a_proposal_and_the_request_is_chat_completions(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(GOOD)))
    reasoner: Reasoner = fake.reasoner()
    assert reasoner.name == "openai:test-model" and reasoner.generative is True
    assert reasoner.propose(TEXTS) == Proposal(**GOOD)
    (request,) = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Content-Type"] == "application/json"
    assert "Authorization" not in request["headers"]
    body = request["json"]
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "ONE durable fact" in body["messages"][0]["content"]
    assert f"1. {TEXTS[0]}" in body["messages"][1]["content"]
    assert f"2. {TEXTS[1]}" in body["messages"][1]["content"]
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]
    assert schema["name"] == "proposal" and schema["strict"] is True
    assert schema["schema"]["required"] == ["entity", "property", "value", "summary", "sources"]
    assert schema["schema"]["properties"]["sources"]["items"] == {"type": "integer"}  # strict mode wants items
    assert schema["schema"]["additionalProperties"] is False
    assert schema["schema"]["properties"]["entity"]["type"] == ["string", "null"]
    assert schema["schema"]["properties"]["summary"]["type"] == "string"


def test_bearer_header_is_sent_when_an_api_key_is_set(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(GOOD)))
    fake.reasoner(api_key="sk-test-123").propose(TEXTS)
    assert fake.requests[0]["headers"]["Authorization"] == "Bearer sk-test-123"


def test_feedback_is_appended_to_the_user_message(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(GOOD)))
    fake.reasoner().propose(TEXTS, feedback="reasoner_output_invalid: malformed JSON")
    user = fake.requests[0]["json"]["messages"][1]["content"]
    assert "Your previous answer was rejected: reasoner_output_invalid: malformed JSON" in user
    assert user.index(TEXTS[1]) < user.index("rejected")


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "```\n" + json.dumps(GOOD, indent=2) + "\n```",
        "Here is the fact:\n```JSON\n" + json.dumps(GOOD) + "\n```\n",
    ],
)
def test_fenced_json_is_tolerated(fake: FakeOpenAI, content: str) -> None:
    fake.script.append(completion(content))
    assert fake.reasoner().propose(TEXTS) == Proposal(**GOOD)


def test_plain_json_containing_a_fence_is_not_unwrapped(fake: FakeOpenAI) -> None:
    answer = {**GOOD, "summary": "Pennine Joinery's VAT note reads ```flat rate``` in the ledger."}
    fake.script.append(completion(json.dumps(answer)))
    assert fake.reasoner().propose(TEXTS).summary == answer["summary"]


def test_nulls_and_blanks_give_a_summary_only_proposal(fake: FakeOpenAI) -> None:
    answer = {"entity": None, "property": "", "value": None, "summary": "The team deploys on Tuesdays."}
    fake.script.append(completion(json.dumps(answer)))
    assert fake.reasoner().propose(TEXTS) == Proposal(summary="The team deploys on Tuesdays.")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (completion('{"entity": "Pennine Joinery", "summary": '), "malformed JSON"),
        (completion(json.dumps({"entity": "Pennine Joinery", "value": "flat rate"})), "summary"),
        (completion("[1, 2]"), "JSON object"),
        (completion(None, refusal="I can't help with that."), "refusal"),
        (Reply(200, b"<html>gateway</html>"), "no chat completion"),
        (Reply(200, b'{"choices": []}'), "no chat completion"),
    ],
)
def test_malformed_answers_are_invalid_output(fake: FakeOpenAI, reply: Reply, message: str) -> None:
    fake.script.append(reply)
    with pytest.raises(ReasonerOutputInvalid) as info:
        fake.reasoner().propose(TEXTS)
    assert info.value.code == "reasoner_output_invalid" and info.value.status == 502
    assert message in info.value.message
    assert len(fake.requests) == 1  # not retried here: the extract stage retries with feedback


def test_429_with_retry_after_then_good(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(429, b'{"error": "slow down"}', {"Retry-After": "0"}), completion(json.dumps(GOOD))]
    assert fake.reasoner(sleep=sleeps.append).propose(TEXTS) == Proposal(**GOOD)
    assert sleeps == [0.0]
    assert len(fake.requests) == 2


def test_retry_after_is_capped(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(503, b"busy", {"Retry-After": "3600"}), completion(json.dumps(GOOD))]
    fake.reasoner(sleep=sleeps.append, max_delay=5.0).propose(TEXTS)
    assert sleeps == [5.0]


def test_429_exhausted_is_throttled(fake: FakeOpenAI) -> None:
    fake.script += [Reply(429, b'{"error": "slow down"}')] * 3
    with pytest.raises(Throttled):
        fake.reasoner(max_attempts=3).propose(TEXTS)
    assert len(fake.requests) == 3


def test_500_exhausted_is_store_unavailable(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(500, b'{"error": "boom"}'), Reply(502, b"bad gateway"), Reply(500, b'{"error": "boom"}')]
    with pytest.raises(StoreUnavailable) as info:
        fake.reasoner(max_attempts=3, sleep=sleeps.append).propose(TEXTS)
    assert "HTTP 500" in info.value.message and "boom" in info.value.message
    assert len(fake.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize(("status", "code"), [(401, "reasoner_access_denied"), (400, "reasoner_request_invalid")])
def test_client_errors_are_not_retried(fake: FakeOpenAI, status: int, code: str) -> None:
    fake.script.append(Reply(status, b'{"error": {"message": "nope"}}'))
    with pytest.raises(MnemeError) as info:
        fake.reasoner().propose(TEXTS)
    assert info.value.code == code and "nope" in info.value.message
    assert len(fake.requests) == 1


def test_timeouts_are_store_unavailable(fake: FakeOpenAI) -> None:
    fake.script += [replace(completion(json.dumps(GOOD)), delay=1.0)] * 2
    with pytest.raises(StoreUnavailable) as info:
        fake.reasoner(timeout=0.2, max_attempts=2).propose(TEXTS)
    assert "unreachable after 2 attempts" in info.value.message
    assert len(fake.requests) == 2


def test_connection_refused_is_store_unavailable() -> None:
    reasoner = OpenAIReasoner("http://127.0.0.1:9", "test-model", max_attempts=2, sleep=lambda _: None)
    with pytest.raises(StoreUnavailable):
        reasoner.propose(TEXTS)


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError):
        OpenAIReasoner("localhost:8000", "test-model")


def test_a_truncated_answer_is_invalid_output_and_cited_sources_are_kept(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps({**GOOD, "sources": [2]})[:-20]))  # cut off mid-object
    with pytest.raises(ReasonerOutputInvalid):
        fake.reasoner().propose(TEXTS)
    fake.script.append(completion(json.dumps({**GOOD, "sources": [2]})))
    assert fake.reasoner().propose(TEXTS).sources == [2]
