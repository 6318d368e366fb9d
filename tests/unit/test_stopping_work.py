"""Work for a refused request stops, and a stopping process ends the work it holds in moments.

A remember refused because the store cannot write (a full disk: 507) never starts the embedding model (it
used to embed the whole batch in a background thread, for nothing); once the process is asked to stop, the
local model refuses the batches it has not started, and a remember in flight is stored without its vectors
for the index sweep to embed (201 with `embedding_deferred`), instead of holding the shutdown."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from mneme import bootstrap
from mneme.adapters.models.embedders import LocalEmbedder
from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import StorageFull, StoreUnavailable
from mneme.models import Role
from mneme.services.remember import RememberItem
from mneme.settings import Settings
from tests.conftest import FixedClock, principal
from tests.support.embedding import HashEmbedder

WRITER = principal("acme", "wendy", Role.writer)


class FullDisk(SqliteRecordStore):
    """The real store on a disk that has just filled up: its next write fails as SQLite reports it."""

    full = False

    def mark_dirty(self, tenant: str, scope_ids: Sequence[str], now: datetime) -> None:
        if self.full:
            with self._tx():  # the write fails inside its transaction, as SQLite reports a full disk
                error = sqlite3.OperationalError("database or disk is full")
                error.sqlite_errorcode = 13  # type: ignore[attr-defined]  # SQLITE_FULL
                raise error
        super().mark_dirty(tenant, scope_ids, now)


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:
            self.texts += len(texts)
        return super().embed(texts)


def test_a_remember_refused_by_a_full_disk_never_starts_the_model(tmp_path: Path) -> None:
    # Given a store whose disk is full
    store, embedder = FullDisk(tmp_path / "mneme.db"), CountingEmbedder()
    services = bootstrap.build(
        Settings(home=tmp_path), store=store, clock=FixedClock(), embedder=embedder,
        index=SqliteSearchIndex(tmp_path / "index.db"), background=False,
    )  # fmt: skip
    services.scopes.create("acme", "root.acme")
    store.full = True
    items = [RememberItem(scope="root.acme", content=f"note {n} about the boiler") for n in range(100)]
    # When a batch of 100 is remembered
    with pytest.raises(StorageFull) as refused:
        services.remember.remember(WRITER, items)
    # Then the store refuses it as a full disk (507), and no text was ever embedded for it, then or later
    assert refused.value.status == 507
    time.sleep(0.5)  # a background embedding would have started by now
    assert embedder.texts == 0


def test_a_closed_local_model_refuses_work_as_unavailable() -> None:
    model = LocalEmbedder(workers=2)
    assert model.embed(["the boiler was serviced"]).shape == (1, model.dimension)
    model.close()
    with pytest.raises(StoreUnavailable, match="shutting down"):
        model.embed([f"text {n}" for n in range(40)])  # several batches: none of them runs


def test_a_remember_in_flight_when_the_process_stops_is_stored_for_the_sweep(tmp_path: Path) -> None:
    # Given the engine with the real local model, and a process asked to stop
    services = bootstrap.build(
        Settings(home=tmp_path), store=SqliteRecordStore(tmp_path / "mneme.db"), clock=FixedClock(),
        index=SqliteSearchIndex(tmp_path / "index.db"), background=False,
    )  # fmt: skip
    services.scopes.create("acme", "root.acme")
    services.embedder.embed(["warm up"])  # a serving process has its model loaded
    services.interrupt()
    # When a remember arrives (or was already running)
    [answer] = services.remember.remember(WRITER, [RememberItem(scope="root.acme", content="Dale fixed the boiler.")])
    # Then it is stored at once, without its vector, and left for the index sweep to embed
    assert answer.created and not answer.indexed and answer.warnings == ["embedding_deferred"]
    assert services.store.get_episodes("acme", [answer.episode_id])[answer.episode_id].vector is None
    services.close()


def test_closing_the_services_leaves_the_store_whole_in_its_file(tmp_path: Path) -> None:
    # Given services that wrote episodes (the store and index in WAL mode)
    services = bootstrap.build(
        Settings(home=tmp_path), store=SqliteRecordStore(tmp_path / "mneme.db"), clock=FixedClock(),
        embedder=HashEmbedder(), index=SqliteSearchIndex(tmp_path / "index.db"), background=False,
    )  # fmt: skip
    services.scopes.create("acme", "root.acme")
    services.remember.remember(WRITER, [RememberItem(scope="root.acme", content=f"note {n}") for n in range(20)])
    assert (tmp_path / "mneme.db-wal").exists()
    # When they are closed
    services.close()
    # Then no -wal or -shm is left, and each file alone holds every write
    assert not list(tmp_path.glob("*-wal")) and not list(tmp_path.glob("*-shm"))
    with sqlite3.connect(f"file:{tmp_path / 'mneme.db'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT count(*) FROM episodes").fetchone()[0] == 20
    with sqlite3.connect(f"file:{tmp_path / 'index.db'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT count(*) FROM docs WHERE kind = 'episode'").fetchone()[0] == 20
