"""Reasoner failures (malformed output, timeouts, throttling) never lose an episode.

The extract stage gives a window two attempts. A window the reasoner was unavailable for is a run error
naming its episodes, the checkpoint holds, and a later run with a healthy reasoner consolidates the same
episodes; a window whose answers were refused twice is set aside (listed in the run) and its episodes
stay episodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from mneme import bootstrap
from mneme.adapters.reasoners import BedrockReasoner, ReasonerOutputInvalid
from mneme.adapters.sqlite_index import SqliteSearchIndex
from mneme.adapters.sqlite_store import SqliteRecordStore
from mneme.errors import MnemeError, StoreUnavailable, Throttled
from mneme.models import Role
from mneme.records import Proposal, Reading, Turn
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.conftest import FixedClock, principal
from tests.support.embedding import HashEmbedder

WRITER = principal("acme", "wendy", Role.writer)
VAT = [
    "Acme's VAT scheme is flat rate.",
    "Acme's VAT scheme is flat rate, Sam confirmed.",
]
BOILER = [
    "The boiler in unit 4 was serviced by Dale.",
    "Dale serviced the boiler in unit 4 again.",
]
VAT_FACT = Proposal(
    entity="Acme",
    property="VAT scheme",
    value="flat rate",
    summary="Acme accounts for VAT on the flat rate scheme.",
    sources=[1, 2],
)
BOILER_FACT = Proposal(summary="Dale looks after servicing the boiler in unit 4.", sources=[1, 2])

Outcome = Proposal | MnemeError


class Scripted:
    """A generative reasoner that plays a script per topic (the first script whose keyword the window contains)."""

    name = "scripted"
    generative = True

    def __init__(self, **scripts: list[Outcome]) -> None:
        self.scripts = scripts
        self.calls: list[tuple[list[str], str | None]] = []

    def propose(self, turns: Sequence[Turn], known: Sequence[Any] = (), feedback: str | None = None) -> Reading:
        texts = [t.text for t in turns]
        self.calls.append((texts, feedback))
        topic = next(k for k in self.scripts if any(k in t.lower() for t in texts))
        outcome = self.scripts[topic].pop(0)
        if isinstance(outcome, MnemeError):
            raise outcome
        return Reading(facts=[outcome])


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def build(tmp_path: Path, clock: FixedClock) -> Callable[[Any], bootstrap.Services]:
    def services(reasoner: Any) -> bootstrap.Services:
        return bootstrap.build(
            store=SqliteRecordStore(tmp_path / "mneme.db"),
            index=SqliteSearchIndex(tmp_path / "index.db"),
            embedder=HashEmbedder(),
            clock=clock,
            reasoner=reasoner,
            background=False,
        )

    return services


def remember(services: bootstrap.Services, *texts: str) -> list[str]:
    """One conversation (a session of its own: a window)."""
    session = texts[0].split()[1]
    items = [RememberItem(scope="root.acme", content=text, create_scope=True, session_id=session) for text in texts]
    return [r.episode_id for r in services.remember.remember(WRITER, items)]


def settle(services: bootstrap.Services, clock: FixedClock) -> None:
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)


def scope_id(services: bootstrap.Services) -> str:
    return services.scopes.resolve("acme", "root.acme").scope.scope_id


def raw_facts(services: bootstrap.Services) -> list[Any]:
    return [f for f in services.store.list_facts("acme") if f.tier == "raw"]


UNAVAILABLE: dict[str, Callable[[], MnemeError]] = {
    "timeout": lambda: StoreUnavailable("scripted at http://127.0.0.1 unreachable after 4 attempts: timed out"),
    "throttling": lambda: Throttled("scripted is throttling requests (4 attempts)"),
}


@pytest.mark.parametrize("failure", sorted(UNAVAILABLE))
def test_an_unavailable_reasoner_holds_the_checkpoint_and_a_later_run_consolidates_the_same_episodes(
    build: Callable[[Any], bootstrap.Services], clock: FixedClock, failure: str
) -> None:
    broken = Scripted(vat=[UNAVAILABLE[failure](), UNAVAILABLE[failure]()])
    services = build(broken)
    ids = remember(services, *VAT)
    settle(services, clock)

    run = services.consolidation.start(WRITER, None)

    assert run.status == "failed" and run.set_aside == []
    assert run.stages["cluster"].counters["clusters"] == 1
    [error] = run.errors
    assert error["stage"] == "extract"
    assert sorted(error["episode_ids"]) == sorted(ids)
    assert error["message"].startswith("window not consolidated, the reasoner was unavailable")
    assert UNAVAILABLE[failure]().code in error["message"]
    assert run.stages["extract"].counters == {"reasoner_calls": 2, "reasoner_failures": 2, "proposals": 0, "errors": 1}
    (_, first), (_, second) = broken.calls
    assert first is None and second is None  # an outage is not blamed on the answer
    checkpoint = services.store.get_checkpoint("acme", scope_id(services))
    assert (checkpoint.processed, checkpoint.after_episode_id, checkpoint.held) == (0, "", 1)  # held once
    assert run.stages["checkpoint"].counters == {"held": 1}
    assert raw_facts(services) == []
    assert services.store.list_dirty("acme", 10) == [("acme", scope_id(services))]

    # A later run with a healthy reasoner consolidates the very same episodes.
    services.consolidation.deps.reasoner = Scripted(vat=[VAT_FACT])
    clock.advance(minutes=5)
    again = services.consolidation.start(WRITER, None)

    assert again.status == "succeeded" and again.errors == []
    assert again.stages["collect"].counters["episodes_read"] == 2
    [fact] = raw_facts(services)
    assert (fact.entity, fact.property, fact.value) == ("Acme", "VAT scheme", "flat rate")
    assert sorted(fact.source_episode_ids) == sorted(ids)
    assert services.store.get_checkpoint("acme", scope_id(services)).processed == 2
    assert services.store.list_dirty("acme", 10) == []


def test_answers_rejected_twice_set_the_cluster_aside_and_its_episodes_stay_searchable(
    build: Callable[[Any], bootstrap.Services], clock: FixedClock
) -> None:
    malformed = ReasonerOutputInvalid("scripted answered with malformed JSON: '{\"entity\": '")
    broken = Scripted(vat=[malformed, malformed])
    services = build(broken)
    ids = remember(services, *VAT)
    settle(services, clock)

    run = services.consolidation.start(WRITER, None)

    assert run.status == "partial" and run.errors == []  # done, and run.set_aside says what was given up on
    [entry] = run.set_aside
    assert sorted(entry["episode_ids"]) == sorted(ids)
    assert entry["reason"].startswith("not consolidated after 2 attempts: reasoner_output_invalid")
    (_, first), (_, second) = broken.calls
    assert first is None and second is not None and second.startswith("reasoner_output_invalid")  # told why
    assert services.store.get_checkpoint("acme", scope_id(services)).processed == 2
    assert raw_facts(services) == []
    hits = services.recall.recall(WRITER, RecallRequest(query="VAT scheme flat rate", scope="root.acme"))
    assert {h.id for h in hits.results} >= set(ids)


def test_a_reasoner_failing_once_then_succeeding_writes_the_fact(
    build: Callable[[Any], bootstrap.Services], clock: FixedClock
) -> None:
    flaky = Scripted(vat=[StoreUnavailable("read timed out"), VAT_FACT])
    services = build(flaky)
    ids = remember(services, *VAT)
    settle(services, clock)

    run = services.consolidation.start(WRITER, None)

    assert run.status == "succeeded" and run.errors == []
    assert run.stages["extract"].counters == {"reasoner_calls": 2, "reasoner_failures": 1, "proposals": 1}
    assert flaky.calls[1][1] is None  # a timeout is not blamed on the answer
    [fact] = raw_facts(services)
    assert fact.summary == VAT_FACT.summary and sorted(fact.source_episode_ids) == sorted(ids)
    assert services.store.get_checkpoint("acme", scope_id(services)).processed == 2


def test_one_failing_cluster_holds_the_batch_and_the_replay_writes_nothing_twice(
    build: Callable[[Any], bootstrap.Services], clock: FixedClock
) -> None:
    down = StoreUnavailable("read timed out")
    services = build(Scripted(vat=[VAT_FACT], boiler=[down, down]))
    vat_ids = remember(services, *VAT)
    boiler_ids = remember(services, *BOILER)
    settle(services, clock)

    run = services.consolidation.start(WRITER, None)

    assert run.stages["cluster"].counters["clusters"] == 2
    assert run.status == "partial"  # the healthy cluster's fact was committed; the run still reports the error
    [error] = run.errors
    assert sorted(error["episode_ids"]) == sorted(boiler_ids)  # only the failing cluster's episodes
    held = services.store.get_checkpoint("acme", scope_id(services))
    assert (held.processed, held.held) == (0, 1)
    [written] = raw_facts(services)  # the healthy cluster's fact is kept (Stash: retryable partial progress)
    assert sorted(written.source_episode_ids) == sorted(vat_ids)

    services.consolidation.deps.reasoner = Scripted(vat=[VAT_FACT], boiler=[BOILER_FACT])
    clock.advance(minutes=5)
    again = services.consolidation.start(WRITER, None)

    assert again.status == "succeeded"
    facts = {f.fact_id: f for f in raw_facts(services)}
    assert len(facts) == 2 and written.fact_id in facts
    assert sorted(facts[written.fact_id].source_episode_ids) == sorted(vat_ids)  # reinforced, not duplicated
    assert services.store.get_checkpoint("acme", scope_id(services)).processed == 4


def test_the_bedrock_adapter_end_to_end(
    build: Callable[[Any], bootstrap.Services], clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real BedrockReasoner (stubbed client): a text-only answer is retried, told why, and the tool call
    then writes the fact; a cluster answered twice in text only is set aside with Bedrock's reason."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    stubber = Stubber(client)
    meta = {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1}}
    text_only = {"output": {"message": {"role": "assistant", "content": [{"text": "Acme is on flat rate."}]}}}
    answer = {"summary": "Sam confirmed Acme's VAT scheme.", "facts": [VAT_FACT.model_dump()]}
    tool_use = {"toolUseId": "t1", "name": "record_facts", "input": answer}
    good = {"output": {"message": {"role": "assistant", "content": [{"toolUse": tool_use}]}}}
    expected = {"modelId": "m", "system": ANY, "messages": ANY, "inferenceConfig": ANY, "toolConfig": ANY}
    stubber.add_response("converse", {**text_only, "stopReason": "end_turn", **meta}, expected)
    stubber.add_response("converse", {**good, "stopReason": "tool_use", **meta}, expected)
    stubber.add_response("converse", {**text_only, "stopReason": "end_turn", **meta}, expected)
    stubber.add_response("converse", {**text_only, "stopReason": "end_turn", **meta}, expected)
    services = build(BedrockReasoner("m", client=client))
    remember(services, *VAT)
    settle(services, clock)

    with stubber:
        healed = services.consolidation.start(WRITER, None)
        boiler = remember(services, *BOILER)
        settle(services, clock)
        aside = services.consolidation.start(WRITER, None)
        stubber.assert_no_pending_responses()

    assert healed.status == "succeeded" and healed.stages["extract"].counters["reasoner_failures"] == 1
    assert [f.value for f in raw_facts(services)] == ["flat rate"]
    assert aside.status == "partial" and aside.errors == []
    [entry] = aside.set_aside
    assert sorted(entry["episode_ids"]) == sorted(boiler)
    assert "reasoner_output_invalid" in entry["reason"] and "did not call record_facts" in entry["reason"]
