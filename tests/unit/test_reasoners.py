"""BedrockReasoner against a real bedrock-runtime client stubbed with botocore's Stubber, or with its HTTP
layer scripted where botocore's own retries must run (no AWS)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import ANY, Stubber

from mneme.adapters.reasoners import BedrockReasoner, ReasonerOutputInvalid
from mneme.consolidation.reasoning import Reasoner
from mneme.errors import MnemeError, ReasonerRefused, StoreUnavailable, Throttled
from mneme.records import KnownFact, Proposal, Reading, Turn
from tests.support.bedrock import ScriptedBedrock

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
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
ANSWER = {"summary": "Sam confirmed Pennine Joinery's VAT scheme; Ines said she moved to York.", "facts": [GOOD, MOVED]}
# Written out here, not imported: the test pins the wire contract.
FACT_SCHEMA = {
    "type": "object",
    "properties": {
        "entity": {"type": ["string", "null"]},
        "property": {"type": ["string", "null"]},
        "value": {"type": ["string", "null"]},
        "summary": {"type": "string"},
        "sources": {"type": "array", "items": {"type": "integer"}},
        "supersedes": {"type": ["string", "null"]},
    },
    "required": ["entity", "property", "value", "summary", "sources", "supersedes"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": ["string", "null"], "description": ANY},
        "facts": {"type": "array", "items": FACT_SCHEMA},
    },
    "required": ["summary", "facts"],
    "additionalProperties": False,
}
EXPECTED = {
    "modelId": MODEL,
    "system": [{"text": ANY}],
    "messages": [{"role": "user", "content": [{"text": ANY}]}],
    "inferenceConfig": {"maxTokens": 2048, "temperature": 0.0},
    "toolConfig": {
        "tools": [{"toolSpec": {"name": "record_facts", "description": ANY, "inputSchema": {"json": SCHEMA}}}],
        "toolChoice": {"tool": {"name": "record_facts"}},
    },
}


@pytest.fixture(autouse=True)
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")


class Recorder:
    """A stubbed bedrock-runtime client that records each Converse request's parameters."""

    def __init__(self) -> None:
        self.client = boto3.client("bedrock-runtime", region_name="us-east-1")
        self.stubber = Stubber(self.client)
        self.requests: list[dict[str, Any]] = []
        self.client.meta.events.register("before-parameter-build.bedrock-runtime.Converse", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(json.loads(json.dumps(params)))

    def reasoner(self, **kwargs: Any) -> BedrockReasoner:
        return BedrockReasoner(MODEL, client=self.client, **kwargs)

    def answer(self, *content: dict[str, Any], stop: str = "tool_use", expected: dict[str, Any] = EXPECTED) -> None:
        response = {
            "output": {"message": {"role": "assistant", "content": list(content)}},
            "stopReason": stop,
            "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
            "metrics": {"latencyMs": 12},
        }
        self.stubber.add_response("converse", response, expected)

    def tool(self, data: Any, name: str = "record_facts", stop: str = "tool_use") -> None:
        self.answer({"toolUse": {**_use(data), "name": name}}, stop=stop)

    def error(self, code: str, status: int = 400) -> None:
        self.stubber.add_client_error(
            "converse", service_error_code=code, service_message=f"{code} from stub", http_status_code=status
        )

    def user_text(self, i: int = 0) -> str:
        return str(self.requests[i]["messages"][0]["content"][0]["text"])


@pytest.fixture
def bedrock() -> Iterator[Recorder]:
    recorder = Recorder()
    with recorder.stubber:
        yield recorder
        recorder.stubber.assert_no_pending_responses()


def test_identity_and_port() -> None:
    reasoner: Reasoner = BedrockReasoner(MODEL, client=object())
    assert reasoner.name == f"bedrock:{MODEL}"
    assert reasoner.generative is True


def test_request_shape_and_a_good_answer_of_several_facts(bedrock: Recorder) -> None:
    bedrock.tool(ANSWER)
    reading = bedrock.reasoner().propose(TURNS, KNOWN)
    assert reading == Reading(facts=[Proposal(**GOOD), Proposal(**MOVED)], summary=ANSWER["summary"],
                              input_tokens=10, output_tokens=5)  # fmt: skip
    (request,) = bedrock.requests
    assert request["modelId"] == MODEL
    system = request["system"][0]["text"]
    assert "atomic" in system and "true as written" in system and "supersedes" in system and "sources" in system
    text = bedrock.user_text()
    assert "1. [2026-03-02 09:30] Sam: Pennine Joinery's VAT scheme is flat rate." in text
    assert "2. [2026-03-02 09:30] Ines: Good. And I moved to York last week, by the way." in text
    assert "F1: Ines lives in Leeds. (since 2025-06-01)" in text
    assert text.index("Known facts:") < text.index("Turns:") and "refused" not in text


def test_feedback_is_appended_on_retry(bedrock: Recorder) -> None:
    bedrock.tool(ANSWER)
    bedrock.reasoner().propose(TURNS, feedback="fact 1: the value 'quarterly' does not appear in the turns it cites")
    text = bedrock.user_text()
    assert text.index(TURNS[1].text) < text.index("Your previous answer was refused:")
    assert text.rstrip().splitlines()[-2].endswith("the value 'quarterly' does not appear in the turns it cites")


def _use(data: Any) -> dict[str, Any]:
    return {"toolUseId": "tooluse_1", "name": "record_facts", "input": data}


def test_options_reach_the_request(bedrock: Recorder) -> None:
    expected = {**EXPECTED, "inferenceConfig": {"maxTokens": 256, "temperature": 0.2}}
    bedrock.answer({"toolUse": _use(ANSWER)}, expected=expected)
    bedrock.reasoner(max_tokens=256, temperature=0.2).propose(TURNS)


def test_summary_only_and_blank_fields_become_null(bedrock: Recorder) -> None:
    fact = {"entity": " ", "property": "", "value": None, "summary": "  The team deploys on Tuesdays. ", "sources": [1],
            "supersedes": ""}  # fmt: skip
    bedrock.tool({"summary": " ", "facts": [fact]})
    assert bedrock.reasoner().propose(TURNS).facts == [Proposal(summary="The team deploys on Tuesdays.", sources=[1])]


def test_text_before_the_tool_call_is_ignored(bedrock: Recorder) -> None:
    bedrock.answer({"text": "Let me record that."}, {"toolUse": _use(ANSWER)})
    assert [f.value for f in bedrock.reasoner().propose(TURNS).facts] == ["flat rate", "York"]


def test_stringified_tool_input_is_accepted(bedrock: Recorder) -> None:
    bedrock.tool(json.dumps(ANSWER))
    assert bedrock.reasoner().propose(TURNS).facts == [Proposal(**GOOD), Proposal(**MOVED)]


def test_a_partly_malformed_answer_keeps_its_valid_facts(bedrock: Recorder) -> None:
    bad = [{**GOOD, "value": 20}, {"entity": "Ines", "summary": None, "sources": [2]}, "a sentence", {**GOOD,
           "summary": "x" * 401}]  # fmt: skip
    bedrock.tool({"summary": None, "facts": [*bad, MOVED]})
    reading = bedrock.reasoner().propose(TURNS)
    assert reading.facts == [Proposal(**MOVED)]
    assert [p.split(" is not valid")[0] for p in reading.problems] == ["fact 1", "fact 2", "fact 3", "fact 4"]


def test_an_answer_cut_at_max_tokens_keeps_the_facts_before_the_cut(bedrock: Recorder) -> None:
    cut = json.dumps(ANSWER)[:-40]  # the second fact is cut off
    bedrock.tool(cut, stop="max_tokens")
    reading = bedrock.reasoner().propose(TURNS)
    assert reading.facts == [Proposal(**GOOD)] and reading.summary == ANSWER["summary"]
    assert reading.problems and "cut short" in reading.problems[0]


def converse_reply(data: Any) -> dict[str, Any]:
    use = {"toolUseId": "t1", "name": "record_facts", "input": data}
    message = {"role": "assistant", "content": [{"toolUse": use}]}
    return {"output": {"message": message}, "stopReason": "tool_use", "usage": {}, "metrics": {"latencyMs": 1}}


def test_throttled_twice_then_success_backs_off_without_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=4)
    scripted.error("ThrottlingException", 429)
    scripted.error("ThrottlingException", 429)
    scripted.ok(converse_reply(ANSWER))
    reading = BedrockReasoner(MODEL, client=scripted.client).propose(TURNS)
    assert reading.facts == [Proposal(**GOOD), Proposal(**MOVED)]
    assert reading.input_tokens > 100 and reading.output_tokens == 0  # no usage given: the prompt's size, estimated
    assert scripted.sent == 3
    assert len(scripted.delays) == 2  # botocore's backoff, recorded instead of slept


def test_throttling_exhausted_is_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=4)
    for _ in range(4):
        scripted.error("ThrottlingException", 429)
    with pytest.raises(Throttled) as info:
        BedrockReasoner(MODEL, client=scripted.client).propose(TURNS)
    assert "4 attempts" in info.value.message
    assert scripted.sent == 4


@pytest.mark.parametrize(
    ("code", "status", "calls"),
    [("ServiceUnavailableException", 503, 2), ("InternalServerException", 500, 2), ("ModelTimeoutException", 408, 1)],
)
def test_transient_errors_are_retried_then_store_unavailable(
    monkeypatch: pytest.MonkeyPatch, code: str, status: int, calls: int
) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=2)
    for _ in range(2):
        scripted.error(code, status)
    with pytest.raises(StoreUnavailable) as info:
        BedrockReasoner(MODEL, client=scripted.client).propose(TURNS)
    assert code in info.value.message
    assert scripted.sent == calls  # botocore does not retry a model timeout


@pytest.mark.parametrize(
    ("code", "mapped"),
    [
        ("ValidationException", "reasoner_request_invalid"),
        ("AccessDeniedException", "reasoner_access_denied"),
        ("ResourceNotFoundException", "reasoner_model_not_found"),
    ],
)
def test_request_and_permission_faults_are_not_retried(bedrock: Recorder, code: str, mapped: str) -> None:
    bedrock.error(code, 403 if code == "AccessDeniedException" else 400)
    with pytest.raises(MnemeError) as info:
        bedrock.reasoner().propose(TURNS)
    assert type(info.value) is ReasonerRefused
    assert info.value.code == mapped
    assert MODEL in info.value.message


def test_text_only_answer_is_invalid_output(bedrock: Recorder) -> None:
    bedrock.answer({"text": "Pennine Joinery uses the flat rate scheme."}, stop="end_turn")
    with pytest.raises(ReasonerOutputInvalid) as info:
        bedrock.reasoner().propose(TURNS)
    assert info.value.code == "reasoner_output_invalid"
    assert info.value.status == 502
    assert "did not call record_facts" in info.value.message
    assert "end_turn" in info.value.message
    assert len(bedrock.requests) == 1  # not retried here: the extract stage retries with feedback


@pytest.mark.parametrize(
    "data",
    [
        {"summary": "s", "facts": [{**GOOD, "summary": None}]},  # its one fact has no summary
        {"summary": "s", "facts": "not a list"},
        ["not", "an", "object"],
        "{not json",
    ],
)
def test_an_answer_without_one_valid_fact_is_invalid_output(bedrock: Recorder, data: Any) -> None:
    bedrock.tool(data)
    with pytest.raises(ReasonerOutputInvalid):
        bedrock.reasoner().propose(TURNS)


def test_another_tool_is_not_an_answer(bedrock: Recorder) -> None:
    bedrock.tool(ANSWER, name="something_else")
    with pytest.raises(ReasonerOutputInvalid):
        bedrock.reasoner().propose(TURNS)


def test_network_failures_are_retried_then_store_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=3)
    scripted.raises(ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com"))
    scripted.unreachable()
    scripted.unreachable()
    with pytest.raises(StoreUnavailable, match="unreachable"):
        BedrockReasoner(MODEL, client=scripted.client).propose(TURNS)
    assert scripted.sent == 3 and len(scripted.delays) == 2


def test_client_is_created_lazily_with_botocore_standard_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[dict[str, Any]] = []
    stubbed = Recorder()

    def fake_client(service: str, **kwargs: Any) -> Any:
        created.append({"service": service, **kwargs})
        return stubbed.client

    monkeypatch.setattr(boto3, "client", fake_client)
    reasoner = BedrockReasoner(MODEL, region_name="eu-west-2")
    assert created == []
    stubbed.tool(ANSWER)
    stubbed.tool(ANSWER)
    with stubbed.stubber:
        reasoner.propose(TURNS)
        reasoner.propose(TURNS)
    assert len(created) == 1
    assert created[0]["service"] == "bedrock-runtime" and created[0]["region_name"] == "eu-west-2"
    assert created[0]["config"].retries == {"mode": "standard", "total_max_attempts": 4}


def test_long_windows_are_cut_to_the_prompt_budget(bedrock: Recorder) -> None:
    bedrock.tool(ANSWER)
    long = [Turn(number=1, speaker="Sam", text="word " * 1000, at=AT), Turn(number=2, text="short one", at=AT)]
    bedrock.reasoner(max_prompt_chars=2_000).propose(long)
    text = bedrock.user_text()
    assert len(text) < 2_000 and "[…]" in text and "2. [2026-03-02 09:30] short one" in text
