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
from tests.integration.helpers import Api, assert_error
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


def say(api: Api, content: str, speaker: str, at: datetime, session: str | None = "van-1", **fields: Any) -> str:
    """One turn, remembered alone (not in a batch with the turn before it); `session` None: no session id."""
    item = {
        "scope": "root.chat",
        "content": content,
        "occurred_at": at.isoformat(),
        "metadata": {"speaker": speaker, **fields.pop("metadata", {})},
        "create_scope": True,
        **({"session_id": session} if session is not None else {}),
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


def test_a_chat_log_with_one_time_per_session_gives_each_turn_the_turns_given_before_it(stack: Served) -> None:
    given = []
    for content, speaker in ((ASKED, "Ines"), (REPLY, "Tobias"), ("Gaston snored in the back all the way.", "Tobias")):
        given.append(say(stack.admin, content, speaker, T))  # an exported log: one time for a session's turns
        stack.clock.advance(seconds=1)  # each call after the one before
    _, reply, said_after = given

    results = found(stack.admin, QUESTION)

    assert reply in results and said_after in results
    assert stack.services.indexer.rebuild("acme").documents > 0  # a reindex keeps the order they were given in
    assert reply in found(stack.admin, QUESTION)


def test_a_chat_log_without_session_ids_keeps_a_session_by_its_one_time(stack: Served) -> None:
    given = []
    for content, speaker in ((ASKED, "Ines"), (REPLY, "Tobias")):
        given.append(say(stack.admin, content, speaker, T, session=None))  # times, and no session ids
        stack.clock.advance(seconds=1)
    elsewhere = say(stack.admin, REPLY, "Tobias", T + timedelta(minutes=5), session=None)  # another time
    _, reply = given

    results = found(stack.admin, QUESTION)

    assert reply in results and elsewhere not in results
    assert stack.services.indexer.rebuild("acme").documents > 0
    assert reply in found(stack.admin, QUESTION)
    stack.admin.ok("DELETE", f"/v1/episodes/{given[0]}")  # the question forgotten: the reply indexed without it
    assert reply not in found(stack.admin, QUESTION)


def test_turns_without_session_ids_of_other_metadata_share_no_context(stack: Served) -> None:
    say(stack.admin, ASKED, "Ines", T, session=None, metadata={"user": "ines"})
    stack.clock.advance(seconds=1)
    reply = say(stack.admin, REPLY, "Tobias", T, session=None, metadata={"user": "tobias"})
    note = {"scope": "root.chat", "content": ASKED, "occurred_at": T.isoformat()}  # no speaker: not a turn
    stack.admin.ok("POST", "/v1/remember", note, 201)
    stack.clock.advance(seconds=1)
    other = say(stack.admin, REPLY, "Tobias", T, session=None, metadata={"user": "maya"})

    results = found(stack.admin, QUESTION)

    assert reply not in results and other not in results


def test_a_turn_given_before_the_question_at_the_same_time_is_not_its_reply(stack: Served) -> None:
    reply = say(stack.admin, REPLY, "Tobias", T)  # given first: it cannot answer what is asked after it
    stack.clock.advance(seconds=1)
    say(stack.admin, ASKED, "Ines", T)

    assert reply not in found(stack.admin, QUESTION)


def conversation(api: Api, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    body = {"scope": "root.chat", "messages": messages, "session_id": "van-1", "create_scope": True, **fields}
    answer: dict[str, Any] = api.ok("POST", "/v1/remember", body, 201)
    return answer


def test_a_conversation_goes_in_as_messages_one_episode_each_in_the_order_given(stack: Served) -> None:
    messages = [
        {"role": "user", "name": "Ines", "content": ASKED},
        {"role": "assistant", "content": REPLY},
        {"role": "user", "name": "Ines", "content": "ok"},
        {"role": "user", "name": "Ines", "content": "ok"},  # said twice: two turns, not a retry
    ]

    answer = conversation(stack.admin, messages, occurred_at=T.isoformat(), metadata={"source": "import"})

    ids = answer["episode_ids"]
    assert len(set(ids)) == 4 and all(item["created"] for item in answer["items"])
    stored = stack.services.store.get_episodes("acme", ids)
    turns = [stored[i] for i in ids]
    assert [(e.sequence, e.session_id, e.occurred_at) for e in turns] == [(n, "van-1", T) for n in range(4)]
    assert [e.metadata for e in turns[:2]] == [
        {"source": "import", "speaker": "Ines", "role": "user"},
        {"source": "import", "speaker": "assistant", "role": "assistant"},
    ]
    results = stack.admin.ok("POST", "/v1/recall", {"query": QUESTION, "scope": "root.chat"})["results"]
    assert {"source": "import", "speaker": "assistant", "role": "assistant"} in [r["metadata"] for r in results]
    assert ids[1] in {r["id"] for r in results}  # the reply is found through the question given before it


def test_a_retried_conversation_writes_nothing_twice_even_without_times(stack: Served) -> None:
    messages = [{"name": "Ines", "content": ASKED}, {"name": "Tobias", "content": REPLY}]
    first = conversation(stack.admin, messages)

    again = conversation(stack.admin, messages)
    keyed = conversation(stack.admin, messages, idempotency_key="import-7")
    keyed_again = conversation(stack.admin, messages, idempotency_key="import-7")

    assert again["episode_ids"] == first["episode_ids"] and not any(i["created"] for i in again["items"])
    assert keyed_again["episode_ids"] == keyed["episode_ids"] != first["episode_ids"]
    assert [e.sequence for e in stack.services.store.get_episodes("acme", keyed["episode_ids"]).values()] == [0, 1]


def test_messages_each_keep_their_own_time_and_the_order_follows_time_first(stack: Served) -> None:
    messages = [
        {"name": "Tobias", "content": REPLY, "occurred_at": (T + timedelta(minutes=1)).isoformat()},
        {"name": "Ines", "content": ASKED, "occurred_at": T.isoformat()},  # said first, given second
    ]

    ids = conversation(stack.admin, messages)["episode_ids"]

    assert ids[0] in found(stack.admin, QUESTION)
    stored = stack.services.store.get_episodes("acme", ids)
    assert [stored[i].occurred_at for i in ids] == [T + timedelta(minutes=1), T]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"messages": [{"content": "no speaker"}]}, 400, "invalid_message"),
        ({"messages": []}, 400, None),
        ({"messages": [{"name": "Ines", "content": "x"}] * 101}, 400, None),
        ({"messages": [{"name": "Ines", "content": "x", "occurred_at": "2025-06-15T18:00:00"}]}, 400, None),
        ({"messages": [{"name": "Ines", "content": "   "}]}, 400, "invalid_content"),
        ({"messages": [{"name": "Ines", "content": "x"}], "content": "both"}, 400, None),
        ({"messages": [{"name": "Ines", "text": "x"}]}, 400, None),
        ({"messages": [{"name": "Ines", "content": "x"}], "scope": "root.nowhere", "create_scope": False}, 404, None),
    ],
)
def test_a_bad_conversation_writes_nothing(stack: Served, body: dict[str, Any], status: int, code: str | None) -> None:
    request = {"scope": "root.chat", "create_scope": True, **body}

    assert_error(stack.admin.post("/v1/remember", request), status, code)
    assert not stack.services.store.list_recent_episodes("acme", T - timedelta(days=10_000), 10)
