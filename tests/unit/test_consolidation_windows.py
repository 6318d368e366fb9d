"""A conversation is the unit of work: one reasoner call reads a window (a session, or a day without
sessions, in the order it was said, one partition, up to a token budget), and an LLM's answer for it is
checked proposal by proposal (recorded Bedrock answers through botocore's Stubber)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from mneme.adapters.reasoners import BedrockReasoner
from mneme.bootstrap import Services
from mneme.consolidation.windows import windows
from mneme.models import Episode
from mneme.records import Reading, Turn
from mneme.services.remember import RememberItem
from tests.unit.test_consolidation import WRITER, _scope, settle


def say(services: Services, session: str | None, *turns: tuple[str, str], **fields: Any) -> list[str]:
    """A conversation as `messages` would give it: one episode a turn, in order, the speaker in metadata."""
    items = [
        RememberItem.model_validate({"scope": "root.acme", "content": text, "create_scope": True, "session_id": session,
                                     **fields, "metadata": {"speaker": who, **fields.get("metadata", {})}})
        for who, text in turns
    ]  # fmt: skip
    return [r.episode_id for r in services.remember.remember(WRITER, items)]


class Counting:
    """The extractive reasoner, counting its calls and the windows it read."""

    name, generative = "counting", False

    def __init__(self) -> None:
        from mneme.consolidation.reasoning import ExtractiveReasoner

        self.inner = ExtractiveReasoner()
        self.windows: list[list[Turn]] = []

    def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
        self.windows.append(list(turns))
        return self.inner.propose(turns, known, feedback)


def test_one_call_reads_a_whole_session_in_the_order_it_was_said(services: Services, clock: Any) -> None:
    # Given two sessions of 30 turns each, given as one conversation per session (one time for all its turns)
    chat = [turn for n in range(10) for turn in (("Maya", f"I moved to Berlin. Move {n}."), ("Tom", f"Nice {n}!"),
                                                  ("Maya", f"Kreuzberg {n}."))]  # fmt: skip
    say(services, "s1", *chat, occurred_at=clock.now())
    say(services, "s2", *[("Tom", f"Turn {n} of the second talk.") for n in range(30)], occurred_at=clock.now())
    settle(services, clock)
    reasoner = services.consolidation.deps.reasoner = Counting()
    # When consolidation runs
    run = services.consolidation.start(WRITER, None)
    # Then one call reads each session, every turn in order with its speaker: 2 calls for 60 turns
    assert run.counter("extract", "reasoner_calls") == 2 and run.counter("cluster", "clusters") == 2
    first = next(w for w in reasoner.windows if w[0].speaker == "Maya")
    assert [(t.number, t.speaker, t.text) for t in first[:3]] == [(1, "Maya", chat[0][1]), (2, "Tom", chat[1][1]),
                                                                   (3, "Maya", chat[2][1])]  # fmt: skip
    assert len(first) == 30
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert fact.summary == "Maya lives in Berlin." and len(fact.source_episode_ids) == 10  # every turn stating it


def episode(n: int, text: str, *, session: str | None = "s", minutes: int = 0, **metadata: Any) -> Episode:
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC) + timedelta(minutes=minutes)
    return Episode(tenant="t", episode_id=f"ep{n:02d}", scope_id="s", content=text, content_hash="h", occurred_at=at,
                   created_at=at, author="a", session_id=session, sequence=n, metadata=metadata)  # fmt: skip


def test_windows_follow_sessions_days_partitions_and_the_token_budget() -> None:
    given = [
        episode(3, "third", minutes=2),
        episode(1, "first"),
        episode(2, "second", minutes=1),
        episode(4, "bob's", session=None, user="bob"),
        episode(5, "ines's", session=None, user="ines"),
        episode(6, "ines again", session=None, user="ines", minutes=5),
        episode(7, "next day", session=None, user="ines", minutes=24 * 60),
    ]
    found = [[e.episode_id for e in w] for w in windows(given, budget=3000, keys=["user"])]
    assert found == [["ep01", "ep02", "ep03"], ["ep04"], ["ep05", "ep06"], ["ep07"]]
    long = [episode(n, "word " * 100, minutes=n) for n in range(10)]  # 155 tokens each with its overhead
    assert [len(w) for w in windows(long, budget=470, keys=[])] == [3, 3, 3, 1]


def test_a_full_batch_ends_before_the_conversation_it_would_cut(services: Services, clock: Any) -> None:
    # Given a batch size of 25 and two sessions of 20 turns each
    services.consolidation.deps.settings = services.consolidation.deps.settings.model_copy(update={"batch_size": 25})
    for session in ("s1", "s2"):
        say(services, session, *[("Ana", f"{session} turn {n}.") for n in range(20)], occurred_at=clock.now())
        clock.advance(minutes=1)
    settle(services, clock)
    reasoner = services.consolidation.deps.reasoner = Counting()
    # When one run consolidates them
    run = services.consolidation.start(WRITER, None)
    # Then each session is read whole in one call: the first batch stopped before the second session
    assert [len(w) for w in reasoner.windows] == [20, 20]
    assert run.counter("cluster", "held_back") == 5 and run.counter("checkpoint", "advanced") == 40
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 40


# -- an LLM's answers, recorded ------------------------------------------------------------------------
def tool(answer: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    use = {"toolUseId": "t1", "name": "record_facts", "input": answer}
    usage = {"inputTokens": 900, "outputTokens": 120, "totalTokens": 1020}
    return {"output": {"message": {"role": "assistant", "content": [{"toolUse": use}]}}, "stopReason": stop,
            "usage": usage, "metrics": {"latencyMs": 1}}  # fmt: skip


def fact(entity: str, prop: str, value: str, summary: str, *sources: int, supersedes: str | None = None) -> Any:
    return {"entity": entity, "property": prop, "value": value, "summary": summary, "sources": list(sources),
            "supersedes": supersedes}  # fmt: skip


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    requests: list[dict[str, Any]] = []
    event = "before-parameter-build.bedrock-runtime.Converse"
    client.meta.events.register(event, lambda params, **_: requests.append(json.loads(json.dumps(params))))
    stubber = Stubber(client)
    with stubber:
        yield client, stubber, requests
        stubber.assert_no_pending_responses()


def test_an_llm_reads_a_window_its_facts_are_checked_one_by_one_and_it_supersedes_by_key(
    services: Services, clock: Any, bedrock: Any
) -> None:
    client, stubber, requests = bedrock
    expected = {"modelId": "m", "system": ANY, "messages": ANY, "inferenceConfig": ANY, "toolConfig": ANY}
    services.consolidation.deps.reasoner = BedrockReasoner("m", client=client)
    # Given a first conversation, read by the model into one fact
    say(services, "s1", ("Ines", "I live in Leeds, in Headingley."), ("Sam", "Lovely area."), occurred_at=clock.now())
    settle(services, clock)
    stubber.add_response("converse", tool({"summary": "Ines said she lives in Leeds.", "facts": [
        fact("Ines", "lives in", "Leeds", "Ines lives in Leeds.", 1)]}), expected)  # fmt: skip
    first = services.consolidation.start(WRITER, None)
    # And weeks later a second one, answered with an update by key, a good fact, and two the turns do not hold
    clock.advance(days=30)
    ids = say(services, "s2", ("Ines", "Big news: we moved to York last week."),
              ("Sam", "Pennine Joinery's VAT scheme is flat rate now."), occurred_at=clock.now())  # fmt: skip
    settle(services, clock)
    stubber.add_response("converse", tool({"summary": "Ines moved to York; Sam gave Pennine Joinery's VAT scheme.",
        "facts": [fact("Ines", "lives in", "York", "Ines lives in York.", 1, supersedes="F1"),
                  fact("Pennine Joinery", "VAT scheme", "flat rate", "Pennine Joinery pays flat-rate VAT.", 2),
                  fact("Sam", "works at", "Pennine Joinery", "Sam works at Pennine Joinery.", 7),  # no turn 7
                  fact("Ines", "partner", "Olu", "Ines's partner is Olu.", 1)]}), expected)  # fmt: skip
    # When consolidation runs
    second = services.consolidation.start(WRITER, None)
    # Then the model was given the window and the current fact on its subject, by key
    text = requests[-1]["messages"][0]["content"][0]["text"]
    assert "F1: Ines lives in Leeds." in text and "1. [" in text and "] Ines: Big news: we moved to York" in text
    # And the two facts its turns hold are kept, the other two refused, and the update supersedes by key
    assert second.counter("extract", "rejected") == 2 and second.counter("reconcile", "create") == 2  # and its account
    assert second.counter("reconcile", "supersede") == 1 and second.status == "succeeded"
    facts = {f.value: f for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity}
    assert set(facts) == {"Leeds", "York", "flat rate"}
    assert facts["Leeds"].status == "superseded" and facts["Leeds"].superseded_by == facts["York"].fact_id
    assert facts["York"].source_episode_ids == [ids[0]] and facts["flat rate"].source_episode_ids == [ids[1]]
    # And every call's tokens are counted in the run record
    assert (first.counter("extract", "input_tokens"), second.counter("extract", "output_tokens")) == (900, 120)
    # And its account of each conversation is a summary of it (roll-ups say it), citing every turn
    accounts = [f for f in services.store.list_facts("acme") if f.tier == "raw" and not f.entity]
    assert sorted(f.summary for f in accounts) == ["Ines moved to York; Sam gave Pennine Joinery's VAT scheme.",
                                                    "Ines said she lives in Leeds."]  # fmt: skip
    daily = [f for f in services.store.list_facts("acme") if f.tier == "daily"]
    assert any("Ines moved to York; Sam gave" in f.summary and "Leeds" not in f.summary for f in daily)


def test_an_answer_cut_short_keeps_its_complete_facts(services: Services, clock: Any, bedrock: Any) -> None:
    client, stubber, _ = bedrock
    services.consolidation.deps.reasoner = BedrockReasoner("m", client=client)
    say(services, "s1", ("Noor", "I live in Oslo now."), ("Noor", "My dog is called Tupp."), occurred_at=clock.now())
    settle(services, clock)
    whole = json.dumps({"summary": "Noor's home and dog.", "facts": [
        fact("Noor", "lives in", "Oslo", "Noor lives in Oslo.", 1),
        fact("Noor", "dog's name", "Tupp", "Noor's dog is called Tupp.", 2)]})  # fmt: skip
    stubber.add_response("converse", tool(whole[:-30], stop="max_tokens"))  # type: ignore[arg-type]
    run = services.consolidation.start(WRITER, None)
    assert [f.value for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity] == ["Oslo"]
    assert run.counter("extract", "invalid") == 1 and run.status == "succeeded"
