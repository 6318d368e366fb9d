"""Who holds a home: one server at a time (named when another is refused), every process that opens the store
shares it, and a restore only when nothing else has it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mneme.adapters.sqlite.base import FileUsers
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import StoreUnavailable
from mneme.local import home


def test_a_second_server_is_refused_with_who_holds_the_home(tmp_path: Path) -> None:
    first = home.hold_server(tmp_path, "mneme serve on http://127.0.0.1:8080")
    with pytest.raises(home.HomeInUse) as refused:
        home.hold_server(tmp_path, "mneme serve on http://127.0.0.1:9090")
    message = refused.value.message
    assert refused.value.code == "home_in_use" and "\n" not in message
    assert f"pid {os.getpid()}: mneme serve on http://127.0.0.1:8080" in message and "stop it first" in message
    first.release()
    home.hold_server(tmp_path, "mneme serve on http://127.0.0.1:9090").release()  # free again


def test_a_lock_left_by_a_dead_parent_is_named_as_its_workers(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / home.SERVE_LOCK).write_text(f"pid {dead.stdout.strip()}: mneme serve on http://x, since now\n")
    assert home.holder_of(tmp_path).startswith(f"the worker processes of pid {dead.stdout.strip()}")


def test_a_restore_is_refused_while_a_store_is_open_and_opens_wait_for_it(tmp_path: Path) -> None:
    store = SqliteRecordStore(tmp_path / "mneme.db")
    store.row_counts()  # opened: it shares the file's users lock
    with pytest.raises(home.HomeInUse, match="is open in"), home.held_for_restore(tmp_path, tmp_path / "mneme.db"):
        pass
    store.close()  # closed: the lock is given back
    with home.held_for_restore(tmp_path, tmp_path / "mneme.db"):
        with pytest.raises(StoreUnavailable, match="being replaced") as busy:
            SqliteRecordStore(tmp_path / "mneme.db").row_counts()
        assert busy.value.code == "store_being_restored"
        with pytest.raises(home.HomeInUse, match="mneme restore"):
            home.hold_server(tmp_path, "mneme serve")
    users = FileUsers(tmp_path / "mneme.db")
    users.share()  # free again
    users.release()
