"""The embedded store's episode rows (`sqlite_episodes`): the vector and the indexed flag live in their own
columns, and a file written before that layout (both inside the JSON document) reads and updates the same."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.models import Episode
from tests.support.sessions import said_before

T = datetime(2025, 6, 15, 18, 0, tzinfo=UTC)
OLD_EPISODES = """CREATE TABLE episodes (
    tenant TEXT NOT NULL, episode_id TEXT NOT NULL, seq INTEGER NOT NULL, indexed INTEGER NOT NULL,
    created_at TEXT NOT NULL, scope_id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant, episode_id))"""


def episode(n: int, vector: list[float] | None = None) -> Episode:
    return Episode(
        tenant="acme", episode_id=f"e{n}", scope_id="s", content=f"note {n}", content_hash=f"h{n}",
        occurred_at=T + timedelta(minutes=n), created_at=T, author="bot", session_id="chat",
        model_id="m@3" if vector else None, vector=vector,
    )  # fmt: skip


def old_file(path: Path, episodes: list[Episode]) -> None:
    """A file as the store wrote it before the vector column: the whole episode as JSON in `doc`."""
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_EPISODES)
        conn.executemany(
            "INSERT INTO episodes VALUES (?,?,?,?,?,?,?)",
            [(e.tenant, e.episode_id, n, int(e.indexed), e.created_at.isoformat(), e.scope_id, e.model_dump_json())
             for n, e in enumerate(episodes, start=1)],
        )  # fmt: skip


def test_a_new_row_keeps_its_vector_out_of_the_document_and_reads_it_back_exactly(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    written = episode(1, vector=[0.1, -2 / 3, 1e-300])  # not float32 values: the column keeps float64
    store.put_episodes([written, episode(2)])
    store.mark_indexed("acme", ["e1"])

    with store._connection() as conn:
        doc, blob = conn.execute("SELECT doc, vector FROM episodes WHERE episode_id='e1'").fetchone()
    assert '"vector"' not in doc and '"indexed"' not in doc and len(blob) == 3 * 8
    got = store.get_episodes("acme", ["e1", "e2"])
    assert got["e1"] == written.model_copy(update={"indexed": True})
    assert got["e2"] == episode(2)
    assert store.get_episodes("acme", ["e1"], vectors=False)["e1"].vector is None
    assert [e.episode_id for e in store.list_unindexed(10)] == ["e2"]


def test_a_file_from_before_the_vector_column_reads_the_same_and_takes_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "mneme.db"
    before = [episode(1, vector=[0.25, -0.5, 1.0]), episode(2)]
    old_file(path, before)
    store = SqliteRecordStore(path)

    assert store.get_episodes("acme", ["e1", "e2"]) == {e.episode_id: e for e in before}
    assert store.get_episodes("acme", ["e1"], vectors=False)["e1"].vector is None
    assert [e for batch in store.iter_episodes("acme") for e in batch] == before
    assert store.session_episodes("acme", "s", "chat", said_before(T + timedelta(hours=1)), 5) == before[::-1]

    store.mark_indexed("acme", ["e1"])  # the column is the flag: the old document still says false
    store.put_episodes([episode(3, vector=[1.0, 0.0, 0.0])])

    assert store.get_episodes("acme", ["e1"])["e1"] == before[0].model_copy(update={"indexed": True})
    assert [e.episode_id for e in store.list_unindexed(10)] == ["e2", "e3"]
    assert store.get_episodes("acme", ["e3"])["e3"].vector == [1.0, 0.0, 0.0]
    assert SqliteRecordStore(path).get_episodes("acme", ["e1", "e3"]).keys() == {"e1", "e3"}  # opens again
