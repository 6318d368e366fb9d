"""One SQLite file in WAL mode: a small pool of connections, and transactions.

A call borrows an idle connection (opening one when none is idle) and gives it back, so reads
never wait for another thread's read or write (WAL readers see the last commit) and a server
that starts a thread per request reuses connections instead of opening one per thread. Writes
go through `_tx`, which takes an in-process lock and then the file's writer lock (`WriterLock`): writers
of every process queue there, in turn, rather than poll SQLite's busy handler (which sleeps 1, 2, 5,
10… ms between tries, so a writer of one process waits tens of milliseconds for a commit of another
that took a few, while its own process's writers queue behind it).

Every process that has the file open holds a shared lock on `<file>-users` (`FileUsers`) until it closes
the store: whoever would replace the file (`mneme restore`) takes it exclusively, so it never swaps a file
from under a process that still writes to it. `backup` copies the file as of one moment while it serves.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mneme.adapters.sqlite.errors import storage_error
from mneme.errors import StoreUnavailable

BUSY_TIMEOUT = 10.0  # seconds a writer waits for another (SQLite's busy_timeout, below, is the same)
SYNCHRONOUS = "FULL"  # every durable commit is on disk before it is acknowledged (see `_tx`)
CLOSE_WAIT = 1.0  # seconds `close` waits for a write in progress on another thread

STORE_VERSION = 1  # `PRAGMA user_version` of the record store this code writes (`local.checks` reads it)

FEED_SCHEMA = """
CREATE TABLE IF NOT EXISTS feed (
    tenant TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (tenant, id));
CREATE UNIQUE INDEX IF NOT EXISTS feed_order ON feed (tenant, ts, id);
"""


@contextmanager
def translated() -> Iterator[None]:
    """Raise a storage failure inside the block as the domain's error (`sqlite.errors`: full, read-only,
    damaged), from the original; any other error passes unchanged."""
    try:
        yield
    except (sqlite3.Error, OSError) as error:
        found = storage_error(error)
        if found is None:
            raise
        raise found from error


class ConnectionPool:
    """Idle connections to one SQLite file, borrowed for one call and given back; at most `keep` stay open."""

    def __init__(self, open_connection: Callable[[], sqlite3.Connection], keep: int = 16) -> None:
        self._open, self._keep = open_connection, keep
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []

    @contextmanager
    def borrow(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # an interrupted call: never hand on an open transaction
                conn.execute("ROLLBACK")
            with self._lock:
                keep = len(self._idle) < self._keep
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def drain(self) -> list[sqlite3.Connection]:
        """Every idle connection, taken out of the pool (the caller closes them)."""
        with self._lock:
            idle, self._idle = self._idle, []
        return idle


class WriterLock:
    """The writer's turn on one SQLite file across processes: an exclusive `flock` on `<file>-lock`,
    taken before BEGIN IMMEDIATE and released after COMMIT. A waiter retries every 0.5-2 ms (a write
    holds it ~1-5 ms) and gives up after `BUSY_TIMEOUT` seconds, as SQLite's busy timeout would, with
    `StoreUnavailable` (503, retryable): a stopped or stuck holder makes writes fail, not hang. The
    kernel releases the lock of a process that dies. Callers serialise their own threads first
    (one descriptor per process and file: threads of one process would share its lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(f"{path}-lock")
        self._fd: int | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._acquire(self._fd)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _acquire(self, fd: int) -> None:
        deadline, pause = time.monotonic() + BUSY_TIMEOUT, 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(f"the store is busy: a writer held it for {BUSY_TIMEOUT:g} s") from None
                time.sleep(pause)
                pause = min(2 * pause, 0.002)

    def close(self) -> None:
        """Close the descriptor (the caller holds off its writers); the next write reopens it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class FileUsers:
    """The processes that have one SQLite file open: each holds a shared `flock` on `<file>-users` from
    its first connection until the store closes (the kernel drops it when a process dies). `exclusive`
    succeeds only when no other process has the file open: what a restore takes before it replaces it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(f"{path}-users")
        self._fd: int | None = None
        self._guard = threading.Lock()  # its own: a read that opens a connection never waits for a writer

    def share(self) -> None:
        """Join the file's users (idempotent). Refused (StoreUnavailable) while a restore replaces it."""
        with self._guard:
            if self._fd is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                store = self.path.with_name(self.path.name.removesuffix("-users"))
                raise StoreUnavailable(
                    f"{store} is being replaced (`mneme restore`): retry when it has finished",
                    code="store_being_restored",
                ) from None
            self._fd = fd

    def exclusive(self) -> bool:
        """Become the file's only user (non-blocking): False while another process has it open."""
        with self._guard:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
        self.release()
        return False

    def release(self) -> None:
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)  # closing the descriptor drops its lock
                self._fd = None


def utc_text(value: datetime) -> str:
    """Fixed-width UTC text, so it sorts as time."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SqliteBase:
    schema = ""
    version = 0  # written to `PRAGMA user_version` when the schema is created (0: left alone)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()  # writers, and the first open (which creates the schema)
        self._writer = WriterLock(self.path)  # writers of every process, after `_lock`
        self._users = FileUsers(self.path)  # held while this process has the file open
        self._pool = ConnectionPool(self._open)
        self._schema_ready = False
        self._writing = threading.local()  # the connection of this thread's open transaction

    def _open(self) -> sqlite3.Connection:
        self._users.share()
        if not self._schema_ready:
            with self._lock:
                if not self._schema_ready:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
                    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
                    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                    conn.executescript(self.schema)
                    self._upgrade(conn, tables)
                    if self.version and conn.execute("PRAGMA user_version").fetchone()[0] < self.version:
                        conn.execute(f"PRAGMA user_version={self.version}")
                    self._schema_ready = True
                    return conn
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
        return conn

    def _upgrade(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        """Fill what the schema just added to a file written before it (`tables`: those it had)."""

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """An idle connection (or a new one) for the duration of one call; inside this thread's
        transaction, that transaction's connection (so a read there sees its writes). A full, read-only or
        damaged disk leaves it as the domain's storage error (`sqlite.errors`)."""
        current: sqlite3.Connection | None = getattr(self._writing, "conn", None)
        with translated():
            if current is not None:
                yield current
                return
            with self._pool.borrow() as conn:
                yield conn

    def close(self) -> None:
        """Checkpoint the WAL and close the idle connections (the next call reopens). When no other
        connection is open (this process's last, and no other process's), SQLite's close of the last one
        also removes the `-wal` and `-shm` files: the file alone then holds every commit. It never waits
        long for a write in progress on another thread (a stopping process must end): that write keeps its
        connection and its turn, and the process's exit releases them."""
        for i, conn in enumerate(self._pool.drain()):
            if i == 0:
                with suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        if self._lock.acquire(timeout=CLOSE_WAIT):  # no write of this process is in progress
            try:
                self._writer.close()
            finally:
                self._lock.release()
        self._users.release()

    def backup(self, dest: Path) -> None:
        """Copy the file as of one moment into `dest` (a new file) with SQLite's online backup API, in one
        step: one read transaction on the source, which in WAL mode never blocks a writer of any process
        (they go on committing to the WAL meanwhile), and so never restarts because of one either. The copy
        is left in rollback-journal mode: one self-contained file (the next `_open` turns WAL on again)."""
        with self._connection() as conn, closing(sqlite3.connect(dest, isolation_level=None)) as copy:
            conn.backup(copy, pages=-1)
            copy.execute("PRAGMA journal_mode=DELETE")

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around every write this thread makes inside the block (`ports.Atomic`): committed
        together at its end, or rolled back together. It holds the writer for its length."""
        with self._tx():
            yield

    @contextmanager
    def _tx(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction. Its COMMIT syncs the WAL to disk (`synchronous=FULL`, ~4 ms here)
        unless `durable=False`: for a hint that costs at most a repeat if a power cut drops it (an
        application crash never does: the WAL is in the OS's cache), or whose sync rides on the
        durable commit that follows it (the WAL is one file, synced in order). Inside this thread's open
        transaction (`atomic`) it is a savepoint of it: a failed write is undone alone, the rest commits
        (or not) with the outer transaction. Its storage failures are the domain's errors, as `_connection`'s."""
        with translated(), self._write(durable=durable) as conn:
            yield conn

    @contextmanager
    def _write(self, *, durable: bool) -> Iterator[sqlite3.Connection]:
        outer: sqlite3.Connection | None = getattr(self._writing, "conn", None)
        if outer is not None:
            outer.execute("SAVEPOINT nested")
            try:
                yield outer
            except BaseException:
                outer.execute("ROLLBACK TO nested")
                outer.execute("RELEASE nested")
                raise
            outer.execute("RELEASE nested")
            return
        with self._lock, self._connection() as conn, self._writer.held():
            if not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._writing.conn = conn
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                finally:
                    self._writing.conn = None
                conn.execute("COMMIT")
            finally:
                if not durable:
                    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")

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

    def _rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            return conn.execute(sql, args).fetchall()

    def _docs(self, table: str, id_column: str, tenant: str, ids: Sequence[str]) -> list[str]:
        """The `doc` of each of the tenant's rows whose `id_column` is among `ids`, 500 ids a query."""
        distinct = list(dict.fromkeys(ids))
        docs: list[str] = []
        for start in range(0, len(distinct), 500):
            chunk = distinct[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT doc FROM {table} WHERE tenant=? AND {id_column} IN ({marks})"
            docs += [doc for (doc,) in self._rows(sql, tenant, *chunk)]
        return docs
