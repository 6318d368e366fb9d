"""How the embedded store writes: writers of every process take turns on a file lock, and only the
commits that acknowledge a record wait for the disk (`SqliteBase._tx`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mneme.adapters import sqlite_base
from mneme.adapters.sqlite_index import SqliteSearchIndex
from mneme.adapters.sqlite_store import SqliteRecordStore
from mneme.errors import Conflict, StoreUnavailable
from mneme.models import Episode
from mneme.search_models import IndexDocument

T = datetime(2025, 6, 15, 18, 0, tzinfo=UTC)


def episode(n: int) -> Episode:
    return Episode.model_validate(
        {"tenant": "acme", "episode_id": f"e{n}", "scope_id": "s", "content": f"note {n}", "content_hash": f"h{n}",
         "occurred_at": T + timedelta(minutes=n), "created_at": T, "author": "bot"}
    )  # fmt: skip


def statements(store: SqliteRecordStore) -> list[str]:
    """Every statement the store's (single, pooled) connection runs from now on."""
    seen: list[str] = []
    with store._connection() as conn:
        conn.set_trace_callback(seen.append)
    return seen


def test_hints_commit_without_a_sync_and_records_with_one(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    store.put_episodes([episode(0)])
    seen = statements(store)

    store.mark_dirty("acme", ["s"], T)
    hints = list(seen)
    seen.clear()
    store.put_episodes([episode(1)])
    records = list(seen)
    seen.clear()
    store.mark_indexed("acme", ["e1"])

    assert hints[0] == "PRAGMA synchronous=NORMAL" and hints[-1] == "PRAGMA synchronous=FULL"
    assert seen[0] == "PRAGMA synchronous=NORMAL" and seen[-1] == "PRAGMA synchronous=FULL"
    assert not any("synchronous" in s for s in records) and records[0] == "BEGIN IMMEDIATE"
    with store._connection() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again for the next writer
    assert store.get_episodes("acme", ["e1"])["e1"].indexed


def test_a_failed_hint_leaves_the_connection_syncing(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    try:
        with store._tx(durable=False) as conn:
            conn.execute("INSERT INTO no_such_table VALUES (1)")
    except sqlite3.OperationalError:
        pass
    with store._connection() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert not conn.in_transaction


def waited_while_held(lock: sqlite_base.WriterLock, write: Callable[[], object], written: Callable[[], bool]) -> bool:
    """Hold `lock` on another thread, start `write` on a third: whether, half a second on, the write is
    still waiting and not visible. Then let go and wait for the write to finish."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.held():
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.5)
    waited = writer.is_alive() and not written()
    release.set()
    holder.join(30)
    writer.join(30)
    return waited


def test_a_writer_waits_for_the_file_lock_another_holds(tmp_path: Path) -> None:
    """Two stores on one file stand for two processes (each has its own descriptor): the second
    writer queues on the lock instead of writing (or polling SQLite) while the first holds it."""
    path = tmp_path / "mneme.db"
    first, second = SqliteRecordStore(path), SqliteRecordStore(path)
    second.put_episodes([episode(0)])  # the file exists, with its schema

    assert waited_while_held(
        first._writer,
        lambda: second.put_episodes([episode(1)]),
        lambda: second.get_episodes("acme", ["e1"]) != {},
    )
    assert "e1" in second.get_episodes("acme", ["e1"])


def test_index_writers_take_turns_on_the_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    first, second = SqliteSearchIndex(path, snapshots=False), SqliteSearchIndex(path, snapshots=False)
    doc = IndexDocument(tenant="acme", doc_id="d1", kind="episode", scope_id="s", ancestor_ids=["s"], text="hello",
                        occurred_at=T)  # fmt: skip
    assert first._writer is not None

    assert waited_while_held(first._writer, lambda: second.upsert([doc]), lambda: second.count("acme") != 0)
    assert second.count("acme") == 1


def test_a_writer_gives_up_with_a_retryable_error_when_the_holder_never_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped or stuck holder (another process) makes a write fail with 503 after the busy
    timeout, as SQLite's own lock would, instead of hanging the request; nothing half-written."""
    monkeypatch.setattr(sqlite_base, "BUSY_TIMEOUT", 0.2)
    path = tmp_path / "mneme.db"
    first, second = SqliteRecordStore(path), SqliteRecordStore(path)
    second.put_episodes([episode(0)])
    with first._writer.held(), pytest.raises(StoreUnavailable, match="busy"):
        second.put_episodes([episode(1)])
    second.put_episodes([episode(2)])  # the lock is free again: the next write goes through
    assert set(second.get_episodes("acme", ["e1", "e2"])) == {"e2"}


# -- atomic: many writes, one transaction --------------------------------------------------------------------


def test_writes_inside_atomic_commit_together_or_not_at_all(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    # Given writes inside atomic() that then fail
    with pytest.raises(RuntimeError), store.atomic():
        store.put_episodes([episode(1)])
        store.put_episodes([episode(2)])
        assert set(store.get_episodes("acme", ["e1", "e2"])) == {"e1", "e2"}  # a read inside sees them
        raise RuntimeError("the import failed")
    # Then none of them was kept, and another process sees nothing either
    assert store.get_episodes("acme", ["e1", "e2"]) == {}
    assert SqliteRecordStore(tmp_path / "mneme.db").get_episodes("acme", ["e1", "e2"]) == {}
    # When they succeed, they commit at the block's end
    with store.atomic():
        store.put_episodes([episode(1)])
        store.put_episodes([episode(2)])
    assert set(SqliteRecordStore(tmp_path / "mneme.db").get_episodes("acme", ["e1", "e2"])) == {"e1", "e2"}


def test_a_write_that_fails_inside_atomic_is_undone_alone(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    reused = episode(2).model_copy(update={"episode_id": "e1", "content_hash": "other"})
    with store.atomic():
        store.put_episodes([episode(1)])
        with pytest.raises(Conflict):  # e1 again, with other content: refused, in its own savepoint
            store.put_episodes([episode(3), reused])
        store.put_episodes([episode(4)])
    assert set(store.get_episodes("acme", ["e1", "e3", "e4"])) == {"e1", "e4"}
