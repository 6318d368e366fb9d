"""Roll-ups over HTTP, on both record stores: readable (the period's claims and its most informative sentences
with their speakers, never a word list), one per partition (a user's words never reach another through a
roll-up or a fact), and nothing forgotten or corrected can be read back through them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mneme.models import Role
from tests.integration.helpers import Api
from tests.integration.stacks import STORES, Served, served

T = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def remember(api: Api, scope: str, content: str, minutes: int = 0, **fields: Any) -> str:
    item = {"scope": scope, "create_scope": True, "content": content,
            "occurred_at": (T + timedelta(minutes=minutes)).isoformat(), **fields}  # fmt: skip
    return str(api.ok("POST", "/v1/remember", item, 201)["episode_id"])


def consolidate(stack: Served, status: str = "succeeded") -> dict[str, Any]:
    stack.clock.advance(minutes=5)  # past the settle window
    run = stack.admin.ok("POST", "/v1/consolidate", {}, 202)
    record = stack.admin.ok("GET", f"/v1/consolidations/{run['run_id']}")
    assert record["status"] == status, record
    return record


def rollups(api: Api, query: str = "") -> list[dict[str, Any]]:
    return [f for f in api.ok("GET", f"/v1/facts?scope=root{query}")["facts"] if f["tier"] != "raw"]


def test_a_users_roll_ups_hold_only_their_words_and_a_filter_finds_only_whole_records(stack: Served) -> None:
    # Given one scope for an app, each user's turns tagged with metadata.user (the README's pattern)
    writer = stack.key("agent", Role.writer)
    remember(writer, "root.users", "Bob: I booked the team offsite in Porto for the first week of June.", 0,
             metadata={"user": "bob"})  # fmt: skip
    remember(writer, "root.users", "Ines: No dairy for me, I am lactose intolerant since last year.", 1,
             metadata={"user": "ines"})  # fmt: skip
    remember(writer, "root.users", "Ines: My manager approved the dairy-free catering budget of 400 euros.", 2,
             metadata={"user": "ines"})  # fmt: skip
    # When the scope is consolidated
    consolidate(stack)
    # Then Bob's filter never reaches Ines's words, through recall or the list route
    asked = {"query": "dairy", "metadata": {"user": "bob"}, "tiers": ["daily", "weekly"], "limit": 50}
    found = writer.ok("POST", "/v1/recall", asked)["results"]
    assert all("dairy" not in r["content"] and "lactose" not in r["content"] for r in found)
    listed = writer.ok("GET", "/v1/facts?metadata.user=bob")["facts"]
    assert listed and all("dairy" not in f["summary"] for f in listed)
    # And each user has a roll-up of their own, per day (the week would repeat the one day: not written)
    written = rollups(writer)
    bobs = [r for r in written if "Porto" in r["summary"]]
    assert len(bobs) == 1 and "dairy" not in bobs[0]["summary"]
    assert [r["id"] for r in rollups(writer, "&metadata.user=bob")] == [bobs[0]["id"]]
    ines = writer.ok("POST", "/v1/recall", {**asked, "metadata": {"user": "ines"}})["results"]
    assert ines and all("Porto" not in r["content"] for r in ines)
    assert sorted(r["tier"] for r in written) == ["daily", "daily"]


def test_a_roll_up_reads_as_sentences_with_their_speakers(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    notes = [
        "Priya owns the billing migration; the deadline is 14 March 2026.",
        "We agreed to freeze database schema changes until the migration ships.",
        "Haha, fair enough.",
        "Deploys move to Tuesdays and Thursdays after the billing cutover.",
    ]
    for n, note in enumerate(notes):
        remember(writer, "root.team", note, n, session_id="standup", metadata={"speaker": "Omar"})
    consolidate(stack)
    daily = next(r for r in rollups(writer) if r["tier"] == "daily")
    lines = daily["summary"].split("\n")
    assert "Priya owns the billing migration" in daily["summary"] and "14 March 2026" in daily["summary"]
    assert "Omar: Deploys move to Tuesdays and Thursdays after the billing cutover." in lines  # with its speaker
    assert "Haha" not in daily["summary"]  # small talk is never quoted
    assert all(line.endswith((".", "!")) for line in lines)  # sentences, not a list of words
    assert [r["tier"] for r in rollups(writer)] == ["daily"]  # the week would repeat its one day: not written


def test_forgetting_or_correcting_a_fact_leaves_its_value_in_no_roll_up(stack: Served) -> None:
    # Given Noor's turns about where she lives, consolidated into a claim and roll-ups quoting her
    writer = stack.key("agent", Role.writer)
    chat = {"session_id": "move", "metadata": {"speaker": "Noor"}}
    remember(writer, "root.noor", "I live in Oslo now, right by the fjord.", 0, **chat)
    remember(writer, "root.noor", "My cat is called Tupp and she hates the ferry.", 1, **chat)
    consolidate(stack)
    claims = {f["value"]: f for f in writer.ok("GET", "/v1/facts?scope=root.noor")["facts"] if f["tier"] == "raw"}
    assert {"Oslo", "Tupp"} <= set(claims)
    daily = next(r for r in rollups(writer) if r["tier"] == "daily")
    assert "Oslo" in daily["summary"]
    approver = stack.key("lead", Role.approver)
    # When an approver forgets the claim
    forgot = approver.ok("DELETE", f"/v1/facts/{claims['Oslo']['id']}?reason=private")
    # Then the roll-up that carried it is rebuilt without it, listed in `settled`, and nothing reads it back
    found = writer.ok("POST", "/v1/recall", {"query": "Noor Oslo", "tiers": ["daily", "weekly"]})["results"]
    assert all("Oslo" not in r["content"] for r in found)
    assert all("Oslo" not in r["summary"] for r in rollups(writer))
    assert forgot["settled"] == [{"id": daily["id"], "action": "rebuilt"}]
    (rebuilt,) = rollups(writer)
    assert "Tupp" in rebuilt["summary"]
    # And a correction replaces the value in the roll-ups too
    cat = claims["Tupp"]
    corrected = approver.ok("PATCH", f"/v1/facts/{cat['id']}", {"version": cat["version"], "value": "Tuppen"})
    assert corrected["settled"] == [{"id": daily["id"], "action": "rebuilt"}]
    (again,) = rollups(writer)
    assert "Tuppen" in again["summary"] and "called Tupp " not in again["summary"] and "Oslo" not in again["summary"]
