"""OpenAIReasoner against a fake OpenAI-compatible server on loopback that records requests and
replays scripted answers."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mneme.adapters.reasoners import OpenAIReasoner, ReasonerOutputInvalid
from mneme.consolidation.reasoning import Reasoner
from mneme.errors import MnemeError, StoreUnavailable, Throttled
from mneme.records import KnownFact, Proposal, Reading, Turn

AT = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
TURNS = [
    Turn(number=1, speaker="Sam", text="Pennine Joinery's VAT scheme is flat rate.", at=AT),
    Turn(number=2, speaker="Ines", text="Good. And I moved to York last week, by the way.", at=AT),
]
KNOWN = [KnownFact(key="F1", fact_id="fa_1", summary="Ines lives in Leeds.", since=datetime(2025, 6, 1, tzinfo=UTC))]
GOOD = {
    "entity": "Pennine Joinery",
    "property": "VAT scheme",
    "value": "flat rate",
    "summary": "Pennine Joinery is on the flat rate VAT scheme.",
    "sources": [1],
    "supersedes": None,
}
MOVED = {"entity": "Ines", "property": "lives in", "value": "York", "summary": "Ines lives in York.", "sources": [2],
         "supersedes": "F1"}  # fmt: skip
ANSWER = {"summary": "Sam confirmed the VAT scheme; Ines moved to York.", "facts": [GOOD, MOVED]}
FACTS = [Proposal(**GOOD), Proposal(**MOVED)]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str | None, finish: str = "stop", usage: dict[str, int] | None = None, **message: Any) -> Reply:
    payload = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content, **message}, "finish_reason": finish}
        ],
        **({"usage": usage} if usage else {}),
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


def test_good_json_is_a_reading_and_the_request_is_chat_completions(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(ANSWER), usage={"prompt_tokens": 812, "completion_tokens": 95}))
    reasoner: Reasoner = fake.reasoner()
    assert reasoner.name == "openai:test-model" and reasoner.generative is True
    assert reasoner.propose(TURNS, KNOWN) == Reading(facts=FACTS, summary=ANSWER["summary"], input_tokens=812,
                                                     output_tokens=95)  # fmt: skip
    (request,) = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Content-Type"] == "application/json"
    assert "Authorization" not in request["headers"]
    body = request["json"]
    assert body["model"] == "test-model" and body["temperature"] == 0 and body["max_tokens"] == 2048
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "true as written" in body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    assert "1. [2026-03-02 09:30] Sam: Pennine Joinery's VAT scheme is flat rate." in user
    assert "2. [2026-03-02 09:30] Ines: Good. And I moved to York" in user and "F1: Ines lives in Leeds." in user
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]
    assert schema["name"] == "facts" and schema["strict"] is True
    assert schema["schema"]["required"] == ["summary", "facts"] and schema["schema"]["additionalProperties"] is False
    fact = schema["schema"]["properties"]["facts"]["items"]
    assert fact["required"] == ["entity", "property", "value", "summary", "sources", "supersedes"]
    assert fact["properties"]["sources"]["items"] == {"type": "integer"}  # strict mode wants items
    assert fact["additionalProperties"] is False
    assert fact["properties"]["entity"]["type"] == ["string", "null"]
    assert fact["properties"]["summary"]["type"] == "string"


def test_bearer_header_is_sent_when_an_api_key_is_set(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(ANSWER)))
    fake.reasoner(api_key="sk-test-123").propose(TURNS)
    assert fake.requests[0]["headers"]["Authorization"] == "Bearer sk-test-123"


def test_feedback_is_appended_to_the_user_message(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(ANSWER)))
    fake.reasoner().propose(TURNS, feedback="reasoner_output_invalid: malformed JSON")
    user = fake.requests[0]["json"]["messages"][1]["content"]
    assert "Your previous answer was refused: reasoner_output_invalid: malformed JSON" in user
    assert user.index(TURNS[1].text) < user.index("refused")


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps(ANSWER) + "\n```",
        "```\n" + json.dumps(ANSWER, indent=2) + "\n```",
        "Here are the facts:\n```JSON\n" + json.dumps(ANSWER) + "\n```\n",
    ],
)
def test_fenced_json_is_tolerated(fake: FakeOpenAI, content: str) -> None:
    fake.script.append(completion(content))
    assert fake.reasoner().propose(TURNS).facts == FACTS


def test_plain_json_containing_a_fence_is_not_unwrapped(fake: FakeOpenAI) -> None:
    answer = {"summary": None, "facts": [{**GOOD, "summary": "Pennine Joinery's VAT note reads ```flat rate```."}]}
    fake.script.append(completion(json.dumps(answer)))
    assert fake.reasoner().propose(TURNS).facts[0].summary == answer["facts"][0]["summary"]


def test_nulls_and_blanks_give_a_summary_only_proposal(fake: FakeOpenAI) -> None:
    fact = {"entity": None, "property": "", "value": None, "summary": "The team deploys on Tuesdays.", "sources": [1],
            "supersedes": None}  # fmt: skip
    fake.script.append(completion(json.dumps({"summary": "", "facts": [fact]})))
    reading = fake.reasoner().propose(TURNS)
    assert reading.facts == [Proposal(summary="The team deploys on Tuesdays.", sources=[1])] and reading.summary is None


def test_a_partly_malformed_answer_keeps_its_valid_facts(fake: FakeOpenAI) -> None:
    answer = {"summary": "s", "facts": [{**GOOD, "sources": "1"}, MOVED, {"entity": "Sam"}]}
    fake.script.append(completion(json.dumps(answer)))
    reading = fake.reasoner().propose(TURNS)
    assert reading.facts == [Proposal(**MOVED)] and len(reading.problems) == 2


def test_a_truncated_answer_keeps_the_complete_facts_before_the_cut(fake: FakeOpenAI) -> None:
    fake.script.append(completion(json.dumps(ANSWER)[:-30], finish="length"))  # the second fact cut off
    reading = fake.reasoner().propose(TURNS)
    assert reading.facts == [Proposal(**GOOD)] and reading.summary == ANSWER["summary"]
    assert "cut short" in reading.problems[-1]
    assert reading.input_tokens > 0 and reading.output_tokens > 0  # no usage given: estimated from the texts


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (completion('{"entity": "Pennine Joinery", "summary": '), "malformed JSON"),
        (completion(json.dumps({"summary": "s", "facts": [{"entity": "Pennine Joinery"}]})), "summary"),
        (completion("[1, 2]"), "list of facts"),
        (completion(None, refusal="I can't help with that."), "refusal"),
        (Reply(200, b"<html>gateway</html>"), "no chat completion"),
        (Reply(200, b'{"choices": []}'), "no chat completion"),
    ],
)
def test_malformed_answers_are_invalid_output(fake: FakeOpenAI, reply: Reply, message: str) -> None:
    fake.script.append(reply)
    with pytest.raises(ReasonerOutputInvalid) as info:
        fake.reasoner().propose(TURNS)
    assert info.value.code == "reasoner_output_invalid" and info.value.status == 502
    assert message in info.value.message
    assert len(fake.requests) == 1  # not retried here: the extract stage retries with feedback


def test_429_with_retry_after_then_good(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(429, b'{"error": "slow down"}', {"Retry-After": "0"}), completion(json.dumps(ANSWER))]
    assert fake.reasoner(sleep=sleeps.append).propose(TURNS).facts == FACTS
    assert sleeps == [0.0]
    assert len(fake.requests) == 2


def test_retry_after_is_capped(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(503, b"busy", {"Retry-After": "3600"}), completion(json.dumps(ANSWER))]
    fake.reasoner(sleep=sleeps.append, max_delay=5.0).propose(TURNS)
    assert sleeps == [5.0]


def test_429_exhausted_is_throttled(fake: FakeOpenAI) -> None:
    fake.script += [Reply(429, b'{"error": "slow down"}')] * 3
    with pytest.raises(Throttled):
        fake.reasoner(max_attempts=3).propose(TURNS)
    assert len(fake.requests) == 3


def test_500_exhausted_is_store_unavailable(fake: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake.script += [Reply(500, b'{"error": "boom"}'), Reply(502, b"bad gateway"), Reply(500, b'{"error": "boom"}')]
    with pytest.raises(StoreUnavailable) as info:
        fake.reasoner(max_attempts=3, sleep=sleeps.append).propose(TURNS)
    assert "HTTP 500" in info.value.message and "boom" in info.value.message
    assert len(fake.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize(("status", "code"), [(401, "reasoner_access_denied"), (400, "reasoner_request_invalid")])
def test_client_errors_are_not_retried(fake: FakeOpenAI, status: int, code: str) -> None:
    fake.script.append(Reply(status, b'{"error": {"message": "nope"}}'))
    with pytest.raises(MnemeError) as info:
        fake.reasoner().propose(TURNS)
    assert info.value.code == code and "nope" in info.value.message
    assert len(fake.requests) == 1


def test_timeouts_are_store_unavailable(fake: FakeOpenAI) -> None:
    fake.script += [replace(completion(json.dumps(ANSWER)), delay=1.0)] * 2
    with pytest.raises(StoreUnavailable) as info:
        fake.reasoner(timeout=0.2, max_attempts=2).propose(TURNS)
    assert "unreachable after 2 attempts" in info.value.message
    assert len(fake.requests) == 2


def test_connection_refused_is_store_unavailable() -> None:
    reasoner = OpenAIReasoner("http://127.0.0.1:9", "test-model", max_attempts=2, sleep=lambda _: None)
    with pytest.raises(StoreUnavailable):
        reasoner.propose(TURNS)


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError):
        OpenAIReasoner("localhost:8000", "test-model")
