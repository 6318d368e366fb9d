"""What the embedded engine checks in MNEME_HOME before it trusts it (`mneme serve`, `mneme status`).

The store (`mneme.db`, the truth) must be a regular, writable file that Mneme wrote: SQLite's header,
`PRAGMA quick_check` ok, Mneme's tables, a schema version this code reads. Anything else refuses to
start with one line (`StoreRefused`); an empty or missing store is a new one only in a home that holds
no key (with a key, the store was lost: starting afresh would lock its owner out).

The index (`index.db`) is derived: missing, empty, damaged, foreign or stale (the newest episodes the
store says are indexed are not in it) it is moved aside and rebuilt in the background (`rebuild`).
Until that ends a marker file beside it (`<index>.rebuilding`) says why: `/v1/health` reports
`degraded`, `mneme status` says so, and recall reads the episodes the index lacks from the records
(`SqliteSearchIndex.visibility_lag`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mneme.adapters.keyfiles import CURSOR_KEY_MINIMUM, MINIMUMS, key_problem
from mneme.adapters.sqlite.base import STORE_VERSION
from mneme.errors import MnemeError
from mneme.observability import logger

SQLITE_HEADER = b"SQLite format 3\x00"
STORE_TABLES = {"scopes", "slots", "memories", "episodes", "api_keys"}
INDEX_TABLES = {"docs", "docs_fts", "index_meta"}
KEY_FILES = tuple(MINIMUMS)  # admin.key, cursor.key
SAMPLE = 20  # newest indexed episodes per tenant looked up in the index to call it current


class StoreRefused(MnemeError):
    code = "store_damaged"
    status = 503


def marker(index: Path) -> Path:
    return index.with_name(index.name + ".rebuilding")


def check_store(path: Path, home: Path) -> None:
    """Raise StoreRefused (one line: what is wrong and what to do) unless `path` is a store to open."""
    keys = [name for name in KEY_FILES if (home / name).exists()]
    if not os.path.lexists(path) or (path.is_file() and path.stat().st_size == 0):
        if keys:
            what = "missing" if not os.path.lexists(path) else "empty (0 bytes)"
            raise StoreRefused(
                f"{path} is {what} but this home holds {' and '.join(keys)}: the store was lost or cut, and "
                "a new one would lock its keys out; restore it from a backup, or use another MNEME_HOME",
                code="store_missing",
            )
        return  # a new home
    kind = _file_kind(path)
    if kind != "file":
        raise StoreRefused(f"{path} is {kind}, not the store file Mneme writes; move it away or restore the store")
    with open(path, "rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise StoreRefused(f"{path} is not an SQLite database (damaged or foreign); restore it from a backup")
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise StoreRefused(f"{path} cannot be written (a read-only file or disk): Mneme needs to write its store",
                           code="store_read_only")  # fmt: skip
    problem = _sqlite_problem(path, STORE_TABLES)
    if problem == "no tables" and not keys:
        return  # created by an earlier start that stopped before its schema: a new home
    if problem:
        raise StoreRefused(f"{path} {problem}; restore it from a backup")
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > STORE_VERSION:
        raise StoreRefused(
            f"{path} was written by a newer Mneme (schema {version}; this one reads up to {STORE_VERSION}): upgrade",
            code="store_too_new",
        )


def index_problem(index: Path, store: Path) -> str | None:
    """Why the index must be rebuilt (missing, damaged, foreign, stale, an unfinished rebuild), or None."""
    if marker(index).exists():
        return _reason(index) or "an earlier rebuild did not finish"
    if not os.path.lexists(index):
        return f"{index.name} is missing" if _indexed_episodes(store) else None
    kind = _file_kind(index)
    if kind != "file":
        return f"{index.name} is {kind}"
    if index.stat().st_size == 0:
        return f"{index.name} is empty" if _indexed_episodes(store) else None
    with open(index, "rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            return f"{index.name} is not an SQLite database"
    problem = _sqlite_problem(index, INDEX_TABLES)
    if problem:
        return f"{index.name} {problem}"
    missing = _missing_from_index(index, store)
    return f"{index.name} lacks {missing} of the newest indexed episodes (stale)" if missing else None


def start_rebuild(index: Path, reason: str, rebuild: Callable[[], None]) -> threading.Thread:
    """Move a damaged index aside (kept as `<index>.damaged-<time>`), leave the marker, and run `rebuild`
    (which creates the index anew) in a background thread; the marker goes when it succeeds."""
    flag = marker(index)
    if not flag.exists():
        if os.path.lexists(index) and not reason.endswith("is missing"):
            aside = index.with_name(f"{index.name}.damaged-{int(time.time())}")
            os.replace(index, aside)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{index}{suffix}", f"{aside}{suffix}")
        flag.write_text(json.dumps({"reason": reason, "started": time.time()}))

    def run() -> None:
        try:
            rebuild()
            flag.unlink(missing_ok=True)
            logger.warning(f"index rebuilt ({reason})")
        except Exception:
            logger.exception("index rebuild failed; `mneme reindex` retries it")

    thread = threading.Thread(target=run, name="index-rebuild", daemon=True)
    thread.start()
    return thread


def rebuilding(index: Path) -> str | None:
    """Why the index is being rebuilt, while it is (else None)."""
    if not marker(index).exists():
        return None
    return _reason(index) or "rebuilding"


def components(store: Path, index: Path, cursor_key: Path | None = None) -> dict[str, str]:
    """What `/v1/health` reports as degraded: the index while it is rebuilt, a store that cannot be read, a
    cursor key that cannot be used (the routes that page answer 503 `key_file_damaged` meanwhile)."""
    found: dict[str, str] = {}
    if why := rebuilding(index):
        found["index"] = f"rebuilding: {why}"
    if cursor_key is not None and (why := key_problem(cursor_key, CURSOR_KEY_MINIMUM)):
        found["cursor_key"] = why
    if not os.path.lexists(store):
        return found  # a new home: the store is created by the first write
    try:
        with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        found["store"] = f"unreadable: {e}"
    return found


def tenants(store: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT DISTINCT tenant FROM scopes UNION SELECT DISTINCT tenant FROM episodes")
        return sorted(row[0] for row in rows)


def _reason(index: Path) -> str | None:
    try:
        return str(json.loads(marker(index).read_text())["reason"])
    except (OSError, ValueError, KeyError):
        return None


def _file_kind(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError as e:  # a dangling link, a permission
        return f"unreadable ({e.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
    return ("a directory" if stat.S_ISDIR(mode) else "a device or special file") + link


def _sqlite_problem(path: Path, tables: set[str]) -> str | None:
    """What is wrong with an SQLite file: damaged pages, or not the tables expected (None: fine)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            found = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}
            checked = [row[0] for row in db.execute("PRAGMA quick_check(1)")]
    except sqlite3.DatabaseError as e:
        return f"is damaged ({e})"
    if checked != ["ok"]:
        return f"is damaged (quick_check: {checked[0][:200] if checked else 'no answer'})"
    if not found:
        return "no tables"
    missing = sorted(tables - found)
    return f"is an SQLite file but not Mneme's (no {', '.join(missing)} table)" if missing else None


def _indexed_episodes(store: Path) -> bool:
    if not store.exists() or store.stat().st_size == 0:
        return False
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        try:
            return db.execute("SELECT 1 FROM episodes WHERE indexed = 1 LIMIT 1").fetchone() is not None
        except sqlite3.OperationalError:  # a new store: no table yet
            return False


def _missing_from_index(index: Path, store: Path) -> int:
    """How many of each tenant's SAMPLE newest indexed, unarchived episodes the index does not hold."""
    if not store.exists() or store.stat().st_size == 0:
        return 0
    missing = 0
    with (
        contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as records,
        contextlib.closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as docs,
    ):
        for (tenant,) in records.execute("SELECT DISTINCT tenant FROM episodes").fetchall():
            newest = records.execute(
                "SELECT episode_id FROM episodes WHERE tenant = ? AND indexed = 1 "
                "AND coalesce(json_extract(doc, '$.archived'), 0) = 0 ORDER BY seq DESC LIMIT ?",
                (tenant, SAMPLE),
            ).fetchall()
            ids = [row[0] for row in newest]
            if not ids:
                continue
            marks = ",".join("?" * len(ids))
            held = docs.execute(f"SELECT count(*) FROM docs WHERE tenant = ? AND doc_id IN ({marks})", (tenant, *ids))
            missing += len(ids) - int(held.fetchone()[0])
    return missing
