"""The turns indexed with a conversation's turn (`Indexer.session_context`), and the SQLite session listing."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.bootstrap import Services
from mneme.models import Episode, context_session
from mneme.services.indexing import episode_text
from tests.support.sessions import said_before

T = datetime(2025, 6, 15, 18, 0, tzinfo=UTC)


def turn(n: int, session: str | None = "s1", **fields: Any) -> Episode:
    return Episode.model_validate(
        {"tenant": "acme", "episode_id": f"t{n}", "scope_id": "chat", "content": f"turn {n}", "content_hash": f"h{n}",
         "occurred_at": T + timedelta(minutes=n), "created_at": T, "author": "bot", "session_id": session, **fields}
    )  # fmt: skip


def test_each_turn_gets_the_two_turns_said_just_before_it_in_its_session(services: Services) -> None:
    services.store.put_episodes([turn(n) for n in range(12)] + [turn(20, session="s2")])
    page = [turn(10), turn(1), turn(5), turn(0), turn(20, session="s2")]  # a reindex page: any order, any turns

    context = services.indexer.session_context(page)

    assert context == {"t10": ["turn 8", "turn 9"], "t5": ["turn 3", "turn 4"], "t1": ["turn 0"]}


def test_context_is_indexed_between_the_turn_and_its_date_and_never_alone() -> None:
    text = episode_text(turn(3, metadata={"speaker": "Tobias"}), ["turn 1", "turn 2"])

    assert text.startswith("Tobias: turn 3\nturn 1\nturn 2\n\n2025-06-15")
    assert episode_text(turn(3)) == episode_text(turn(3), [])


def test_a_store_file_from_before_the_session_listing_lists_its_sessions_on_open(tmp_path: Path) -> None:
    path = tmp_path / "mneme.db"
    SqliteRecordStore(path).put_episodes([turn(0), turn(1), turn(2, session=None)])
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE session_turns")
        conn.execute("CREATE TABLE episode_sessions (tenant, session_id, occurred_at, episode_id)")  # by time only

    reopened = SqliteRecordStore(path)

    found = reopened.session_episodes("acme", "chat", "s1", said_before(T + timedelta(hours=1)), 5)
    assert [e.episode_id for e in found] == ["t1", "t0"]
    with sqlite3.connect(path) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episode_sessions'").fetchall()


def test_turns_without_a_session_id_are_listed_by_their_one_time_on_open(tmp_path: Path) -> None:
    path = tmp_path / "mneme.db"
    log = [turn(n, session=None, occurred_at=T, sequence=n, metadata={"speaker": "Ines"}) for n in range(3)]
    SqliteRecordStore(path).put_episodes([*log, turn(9, session=None)])  # the last: a note, not a turn
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE session_turns")

    reopened = SqliteRecordStore(path)

    session = context_session(log[2])
    assert session is not None and session == context_session(log[0]) and context_session(turn(9, session=None)) is None
    found = reopened.session_episodes("acme", "chat", session, said_before(T + timedelta(hours=1)), 5)
    assert [e.episode_id for e in found] == ["t2", "t1", "t0"]
