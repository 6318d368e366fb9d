"""Which failures of the disk under the embedded engine's files are which of the domain's storage errors:
full → 507 storage_full, read-only → 503 store_read_only, damaged → 503 store_damaged, anything else →
unchanged (a 500 internal_error, logged). The adapters translate them; the HTTP layer maps the domain's
errors only."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from mneme.adapters.sqlite.errors import storage_error
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import StorageFull, StoreDamaged, StoreReadOnly
from mneme.http.api import unexpected


def test_a_write_to_a_read_only_sqlite_file_is_store_read_only(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as raised:
        reader.execute("INSERT INTO t VALUES (1)")
    found = storage_error(raised.value)
    assert isinstance(found, StoreReadOnly) and found.status == 503 and found.code == "store_read_only"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), StorageFull),
        (OSError(errno.EROFS, "Read-only file system"), StoreReadOnly),
        (RuntimeError("boom"), type(None)),
    ],
)
def test_os_errors_are_classified(error: Exception, expected: type) -> None:
    assert isinstance(storage_error(error), expected)


def test_a_wrapped_disk_full_is_found_through_its_cause() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise RuntimeError("index write failed") from e
    except RuntimeError as wrapped:
        answer = storage_error(wrapped)
    assert isinstance(answer, StorageFull) and answer.status == 507 and answer.code == "storage_full"


def test_the_store_on_a_read_only_file_refuses_a_write_as_store_read_only(tmp_path: Path) -> None:
    # Given a store with layers, then opened on a file SQLite may only read
    path = tmp_path / "mneme.db"
    store = SqliteRecordStore(path)
    store.put_layers("acme", {1: "client"})
    store.close()
    store = SqliteRecordStore(path)
    store._pool._open = lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    # When a write is made, Then the store itself raises the domain's error, from SQLite's, and wrote nothing
    with pytest.raises(StoreReadOnly) as refused:
        store.put_layers("acme", {1: "client", 2: "project"})
    assert isinstance(refused.value.__cause__, sqlite3.OperationalError)
    assert SqliteRecordStore(path).get_layers("acme") == {1: "client"}


def test_the_store_on_a_damaged_file_reads_as_store_damaged(tmp_path: Path) -> None:
    # Given a store whose file is overwritten in the middle after it was written
    path = tmp_path / "mneme.db"
    store = SqliteRecordStore(path)
    for n in range(200):
        store.put_layers(f"tenant-{n}", {1: "client " * 20})
    store.close()
    size = path.stat().st_size
    with open(path, "r+b") as damaged:
        damaged.seek(size // 2)
        damaged.write(os.urandom(size // 2))
    # When it is read, Then the answer is the domain's store_damaged (503), not a 500
    with pytest.raises(StoreDamaged) as refused:
        for n in range(200):
            SqliteRecordStore(path).get_layers(f"tenant-{n}")
    assert refused.value.status == 503 and refused.value.code == "store_damaged"


def test_an_error_no_adapter_translated_is_a_500_with_the_request_id() -> None:
    answer = unexpected(RuntimeError("boom"), "req-1")
    assert answer.status == 500 and answer.code == "internal_error"
    assert answer.to_body()["error"]["details"] == {"request_id": "req-1"}
