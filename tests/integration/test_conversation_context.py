"""A conversation's turn is found through the turns said just before it in its session (over both stores).

A short reply ('Sage green, trim white.') shares no word with a question about what was asked
before it; the turns before it in the same session are indexed with it (not returned with it), so the
question finds it. Only the same tenant, scope and session, and only turns said within the hour before.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mneme.models import Role
from tests.integration.helpers import Api
from tests.integration.stacks import STORES, Served, served
from tests.support.embedding import HashEmbedder
from tests.support.legacy import forget_sessions

T = datetime(2025, 6, 15, 18, 0, tzinfo=UTC)
ASKED = "Did you two ever agree on a colour for the camper?"
REPLY = "Sage green, trim white."  # no word in common with the question
QUESTION = "What colour is the camper?"


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch, embedder=HashEmbedder(1024)) as running:  # few collisions
        yield running


def say(api: Api, content: str, speaker: str, at: datetime, session: str = "van-1", **fields: Any) -> str:
    """One turn, remembered alone (not in a batch with the turn before it)."""
    item = {
        "scope": "root.chat",
        "content": content,
        "occurred_at": at.isoformat(),
        "session_id": session,
        "metadata": {"speaker": speaker},
        "create_scope": True,
        **fields,
    }
    return str(api.ok("POST", "/v1/remember", item, 201)["episode_id"])


def found(api: Api, query: str) -> dict[str, str]:
    results = api.ok("POST", "/v1/recall", {"query": query, "scope": "root.chat"})["results"]
    return {r["id"]: r["content"] for r in results}


def test_a_short_reply_is_found_by_a_question_about_what_was_asked_before_it(stack: Served) -> None:
    say(stack.admin, ASKED, "Ines", T)
    reply = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=1))
    later = say(stack.admin, "Gaston snored in the back all the way.", "Tobias", T + timedelta(minutes=2))

    results = found(stack.admin, QUESTION)

    assert results[reply] == REPLY  # the content comes back as it was given, without its context
    assert later in results  # two turns back still counts (the question, then the reply)
    assert stack.services.indexer.rebuild("acme").documents > 0  # `mneme reindex` keeps the context
    assert reply in found(stack.admin, QUESTION)


def test_reindex_gives_turns_written_before_the_session_index_their_context(stack: Served) -> None:
    asked = say(stack.admin, ASKED, "Ines", T)
    forget_sessions(stack.services.store, "acme", [asked])  # as written before the store kept sessions
    reply = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=1))
    assert reply not in found(stack.admin, QUESTION)  # the question was not found before it

    rebuilt = stack.services.indexer.rebuild("acme")  # `mneme reindex`

    assert rebuilt.sessions == 1
    assert reply in found(stack.admin, QUESTION)
    assert stack.services.indexer.rebuild("acme").sessions == 0


def test_a_turn_in_another_session_gives_no_context(stack: Served) -> None:
    say(stack.admin, ASKED, "Ines", T, session="van-1")
    reply = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=1), session="van-2")
    no_session = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=1), session=None)

    results = found(stack.admin, QUESTION)

    assert reply not in results and no_session not in results


def test_a_turn_of_another_tenant_gives_no_context(stack: Served) -> None:
    secret, _ = stack.services.keys.create("globex", "g-admin", [Role.admin])
    other = stack.admin.as_key(secret)
    say(other, ASKED, "Ines", T)  # same scope path, same session id, another tenant
    reply = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=1))

    assert reply not in found(stack.admin, QUESTION)
    assert list(found(other, QUESTION)) != [reply]


def test_a_turn_said_hours_later_is_a_new_exchange(stack: Served) -> None:
    say(stack.admin, ASKED, "Ines", T)
    reply = say(stack.admin, REPLY, "Tobias", T + timedelta(hours=3))

    assert reply not in found(stack.admin, QUESTION)


def test_a_batch_gives_its_own_turns_as_context_whatever_their_order(stack: Served) -> None:
    items = [
        {"scope": "root.chat", "content": c, "occurred_at": (T + timedelta(minutes=m)).isoformat(),
         "session_id": "van-1", "create_scope": True}
        for c, m in ((REPLY, 1), (ASKED, 0))
    ]  # fmt: skip
    reply = stack.admin.ok("POST", "/v1/remember", {"items": items}, 201)["episode_ids"][0]

    assert reply in found(stack.admin, QUESTION)


def test_turns_at_the_edges_of_time_are_remembered_and_found(stack: Served) -> None:
    first = datetime(1, 1, 1, tzinfo=UTC)
    say(stack.admin, ASKED, "Ines", first)
    reply = say(stack.admin, REPLY, "Tobias", first + timedelta(seconds=30))
    last = say(stack.admin, REPLY, "Tobias", datetime(9999, 12, 31, 23, 59, tzinfo=UTC), session="van-9")

    results = found(stack.admin, QUESTION)

    assert reply in results and last not in results
