"""One SQLite file in WAL mode: a lazily opened connection shared by threads, and transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

FEED_SCHEMA = """
CREATE TABLE IF NOT EXISTS feed (
    tenant TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (tenant, id));
CREATE UNIQUE INDEX IF NOT EXISTS feed_order ON feed (tenant, ts, id);
"""


def utc_text(value: datetime) -> str:
    """Fixed-width UTC text, so it sorts as time."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SqliteBase:
    schema = ""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            with self._lock:
                if self._conn is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA busy_timeout=10000")
                    conn.executescript(self.schema)
                    self._conn = conn
        return self._conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _feed(self, conn: sqlite3.Connection, tenant: str, kind: str, ids: Sequence[str]) -> None:
        """Move records to the head of the tenant's change feed, inside the writing transaction.

        Writers are serialised (BEGIN IMMEDIATE), so positions strictly increase in commit order: a
        reader paging by (ts, id) can never be overtaken by a commit behind its cursor.
        """
        if not ids:
            return
        last = conn.execute("SELECT MAX(ts) FROM feed WHERE tenant=?", (tenant,)).fetchone()[0]
        now = datetime.now(UTC)
        if last is not None:
            now = max(
                now, datetime.strptime(last, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) + timedelta(microseconds=1)
            )
        stamp = utc_text(now)
        conn.executemany(
            "INSERT INTO feed VALUES (?,?,?,?) ON CONFLICT DO UPDATE SET ts=excluded.ts, kind=excluded.kind",
            [(tenant, kind, record_id, stamp) for record_id in ids],
        )

    def list_changes(self, tenant: str, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str, str]]:
        """(ts, kind, id) strictly after `after` in (ts, id) order."""
        ts, record_id = after or ("", "")
        return [
            (row[0], row[1], row[2])
            for row in self._rows(
                "SELECT ts, kind, id FROM feed WHERE tenant=? AND (ts>? OR (ts=? AND id>?)) ORDER BY ts, id LIMIT ?",
                tenant, ts, ts, record_id, limit,
            )
        ]  # fmt: skip

    def _rows(self, sql: str, *args: object) -> list[tuple]:
        with self._lock:
            return self.conn.execute(sql, args).fetchall()
