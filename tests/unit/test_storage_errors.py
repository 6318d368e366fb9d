"""Which failures of the disk under the store answer what: full → 507 storage_full, read-only → 503
store_read_only, anything else → None (a 500 internal_error, logged)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from mneme.http.api import StorageFull, StoreReadOnly, storage_error, unexpected


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
        answer = unexpected(wrapped, "req-1")
    assert answer.status == 507 and answer.code == "storage_full"
    assert answer.to_body()["error"]["details"] == {"request_id": "req-1"}
