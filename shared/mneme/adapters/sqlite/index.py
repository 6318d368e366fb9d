"""The embedded search index: one SQLite file (WAL) with FTS5 for text and numpy for vectors.

Schema:
- `docs`: one row per (tenant, doc_id) with the filter columns (occurred_at as fixed-width ISO
  UTC, so it sorts as text) and the L2-normalised vector as float32 bytes.
- `doc_ancestors` (tenant, ancestor_id, doc): the subtree mapping, a WITHOUT ROWID primary key.
- `docs_fts`: FTS5 (porter unicode61), rowid = docs.id, two columns: `text` and `dates` (an
  episode's date in words, see `IndexDocument.dates`). The query's stopwords are dropped; its
  words match `text`, and only a date-like phrase in it ("4 March 2026", "March 6, 2026",
  "2026-03-04", "May 2026", "March") also matches `dates`, so a month or a year in a query no
  longer matches most of the corpus. A file written before the split is migrated on open.
- `doc_meta` (tenant, term, doc): a document's top-level metadata pairs (`search_models.metadata_terms`), what a
  metadata filter selects, inside the search like every other filter (a file from before it holds none:
  `mneme reindex` fills it).
- `generations`: a per-tenant counter bumped by every write; it tells a vector cache whether it
  still reflects the file (another process may write too).

Text search lets FTS5 rank and cut first (`ORDER BY rank LIMIT n`) and applies the filters to
those n, in one statement (`CUT`); when fewer than k survive and more matches exist, it fetches
more (n x 8), and past a bound runs the full filtered join, so the top k is always the true
filtered top k. A small subtree walks its own documents instead. From `BIG_TEXT` documents on
(`approximate_text_from`), the plan is approximate (`_and_first`: every word first, then fewer;
each pass ranks only its newest `WINDOW` matches). The plan is `text.TextPlan`.
Vectors: see `vector_cache` (the boolean mask precedes the top k). Time windows are half-open:
since <= occurred_at < until; naive datetimes are UTC.

Vectors of a big tenant (`vector_cache.ANN_MIN_ROWS`) get an 8-bit copy scanned for candidates (faiss-cpu), built in
memory when the cache loads (or after a compaction; rows written later join it); `mneme reindex` rebuilds the
documents, and the index follows. `ann=False` keeps every search exact.

Connections come from a small pool (one per concurrent call), so reads never wait for other
reads or for a write transaction; writers queue on one in-process lock. The vector caches are
shared under a readers-writer lock: searches share it, a commit takes it only to apply its
change. SQLite operational errors (locked, I/O, cannot open) surface as `StoreUnavailable`.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from mneme.adapters.documents import normalised_vector
from mneme.adapters.sqlite import vector_snapshot
from mneme.adapters.sqlite import vectors as sqlite_vectors
from mneme.adapters.sqlite.base import CLOSE_WAIT, ConnectionPool, WriterLock
from mneme.adapters.sqlite.errors import storage_error
from mneme.adapters.sqlite.index_schema import META_SCHEMA, PUT, SCHEMA, migrate, split_dates
from mneme.adapters.sqlite.text import (
    BIG_TEXT,
    TextPlan,
    iso_utc,
    metadata_docs,
)
from mneme.adapters.sqlite.vector_cache import (
    CacheSet,
    VectorCache,
    ann_available,
    blas_on_calling_thread,
)
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.search_models import Hit, IndexDocument, SearchFilter

REBUILDING_LAG = 100 * 365 * 86400.0  # seconds: `visibility_lag` while the index is rebuilt

_LOG_KEEP = 2000  # generations of the change log kept per tenant
SNAPSHOT_MIN_ROWS = 5000  # caches smaller than this load from SQLite quickly enough; not saved


def _default_connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


class _SharedLock:
    """Readers-writer lock: any number of readers, or one writer (writers wait for readers to
    leave and hold off new ones)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class SqliteSearchIndex:
    """`mneme.ports.SearchIndex` over one SQLite file; safe to share between threads."""

    @property
    def visibility_lag(self) -> float:
        """0: a write is searchable when it returns. While the index is rebuilt (`local.checks`: a marker
        beside the file) no older write may be: the lag reaches back past every record."""
        return REBUILDING_LAG if self._snapshots and os.path.exists(self.path + ".rebuilding") else 0.0

    def __init__(
        self,
        path: str | Path,
        *,
        connect: Callable[[str], sqlite3.Connection] | None = None,
        subtree_first_max: int = 256,
        approximate_text_from: int = BIG_TEXT,
        ann: bool | None = None,
        snapshots: bool = True,
    ) -> None:
        self.path = str(path)
        # vector caches saved next to the file (`vector_snapshot`), so a new process's first search is fast
        self._snapshots = snapshots and self.path != ":memory:"
        self._epoch = ""  # the file's random id, read on first open
        # an approximate index for big caches (see `vector_cache`); False: always exact; None: if installed
        self._ann = ann_available() if ann is None else ann
        if self._ann and self._snapshots:
            import faiss  # noqa: F401  (imported now, ~0.1 s, rather than by the first search)
        blas_on_calling_thread()  # the exact vector scans (and rescoring) in this process
        self._connect = connect or _default_connect
        self._text = TextPlan(subtree_first_max, approximate_text_from)
        self._lock = threading.RLock()  # writers; also every call on ":memory:" (one connection)
        self._writer = None if str(path) == ":memory:" else WriterLock(path)  # writers of every process
        self._pool = ConnectionPool(self._open)
        self._ready = False  # schema created (and migrated) by the first connection
        self._memory: sqlite3.Connection | None = None
        self._caches = CacheSet()
        self._cache_lock = _SharedLock()
        self._load_lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------------
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            if self.path == ":memory:":
                with self._lock:
                    if self._memory is None:
                        self._memory = self._open()
                    yield self._memory
                return
            with self._pool.borrow() as conn:
                yield conn
        except (sqlite3.Error, OSError) as exc:
            found = storage_error(exc)  # a full, read-only or damaged disk says so
            if found is not None:
                raise found from exc
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreUnavailable(f"search index unavailable: {exc}") from exc
            raise

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(self.path)
        try:
            conn.isolation_level = None  # transactions are explicit
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA synchronous=NORMAL")  # the index can be rebuilt; skip fsync per commit
            if not self._ready:
                with self._lock:
                    if not self._ready:
                        conn.execute("PRAGMA journal_mode=WAL")
                        conn.executescript(SCHEMA + META_SCHEMA)
                        migrate(conn)
                        conn.execute("INSERT OR IGNORE INTO index_meta VALUES ('epoch', ?)", (secrets.token_hex(16),))
                        self._epoch = conn.execute("SELECT value FROM index_meta WHERE key = 'epoch'").fetchone()[0]
                        self._ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _tx(self, tenants: set[str]) -> Iterator[_Write]:
        """A write transaction that bumps the tenants' generations. The commit and the caller's
        cache update (`write.after`) run together under the caches' exclusive lock, so no search
        sees the new generation with a cache that lacks the write."""
        with self._lock, self._db() as conn, self._writer.held() if self._writer else nullcontext():
            conn.execute("BEGIN IMMEDIATE")
            write = _Write(conn)
            try:
                yield write
                gens = {
                    t: conn.execute(
                        "INSERT INTO generations VALUES (?, 1)"
                        " ON CONFLICT (tenant) DO UPDATE SET gen = gen + 1 RETURNING gen",
                        (t,),
                    ).fetchone()[0]
                    for t in tenants
                }
                for t, gen in gens.items():
                    changed = [(t, gen, d) for d in ["", *sorted(write.changed.get(t, ()))]]
                    conn.executemany("INSERT OR IGNORE INTO doc_changes VALUES (?, ?, ?)", changed)
                    conn.execute("DELETE FROM doc_changes WHERE tenant = ? AND gen <= ?", (t, gen - _LOG_KEEP))
                with self._cache_lock.exclusive():
                    conn.execute("COMMIT")
                    self._caches.committed(gens)
                    try:
                        if write.after is not None:
                            write.after()
                    finally:
                        self._caches.settled()
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def save_snapshots(self, behind: int = 0) -> None:
        """Save the vector caches more than `behind` writes ahead of their snapshot (a long-running
        server calls this now and then, so a restart finds a snapshot its change log still covers).
        Writes and searches go on meanwhile (`_save`)."""
        for (tenant, model_id), cache in self._caches.items():
            if cache.generation - (cache.saved_generation or 0) > behind:
                self._save(tenant, model_id, cache)

    def close(self) -> None:
        """Close the idle connections; then save the vector caches that moved since they were saved or
        loaded and let go of the rest. A write in progress on another thread is waited for up to
        `CLOSE_WAIT` seconds, then left to the process's exit (its connection and its turn go with it)."""
        for conn in self._pool.drain():
            conn.close()
        if not self._lock.acquire(timeout=CLOSE_WAIT):
            return
        try:
            self.save_snapshots()
            if self._memory is not None:
                self._memory.close()
                self._memory = None
            if self._writer is not None:
                self._writer.close()
            self._caches.drop()
        finally:
            self._lock.release()

    # -- writes -----------------------------------------------------------------------------
    def upsert(self, docs: Sequence[IndexDocument]) -> None:
        latest = {(d.tenant, d.doc_id): d for d in docs}  # the last version in a batch wins
        if not latest:
            return
        vectors = {key: vec for key, d in latest.items() if (vec := normalised_vector(d)) is not None}
        rows = []
        for key, d in latest.items():
            vec = vectors.get(key)
            rows.append((
                *key, d.kind, d.scope_id, json.dumps(d.ancestor_ids), iso_utc(d.occurred_at), d.tier,
                d.session_id, d.visible_to, d.model_id if vec is not None else None,
                vec.tobytes() if vec is not None else None,
            ))  # fmt: skip
        texts = [split_dates(d) for d in latest.values()]
        with self._tx({tenant for tenant, _ in latest}) as write:
            conn = write.conn
            self._check_dimensions(conn, latest, vectors)
            # One statement a table for the whole batch: ids first (the stored ones, then new ones in order).
            ids = self._ids(conn, list(latest))
            stored = list(ids.values())
            next_id = (conn.execute("SELECT max(id) FROM docs").fetchone()[0] or 0) + 1
            for key in latest:
                if key not in ids:
                    ids[key], next_id = next_id, next_id + 1
            conn.executemany("DELETE FROM docs_fts WHERE rowid = ?", [(doc,) for doc in stored])
            conn.executemany("DELETE FROM doc_ancestors WHERE doc = ?", [(doc,) for doc in stored])
            conn.executemany("DELETE FROM doc_meta WHERE doc = ?", [(doc,) for doc in stored])
            conn.executemany(
                "INSERT OR IGNORE INTO doc_meta VALUES (?, ?, ?)",
                [(d.tenant, term, ids[key]) for key, d in latest.items() for term in d.metadata_terms],
            )
            conn.executemany(PUT, [(ids[key], *row) for key, row in zip(latest, rows, strict=True)])
            conn.executemany(
                "INSERT INTO docs_fts (rowid, text, dates) VALUES (?, ?, ?)",
                [(ids[key], text, dates) for key, (text, dates) in zip(latest, texts, strict=True)],
            )
            conn.executemany(
                "INSERT INTO doc_ancestors VALUES (?, ?, ?)",
                [(d.tenant, anc, ids[key]) for key, d in latest.items() for anc in dict.fromkeys(d.ancestor_ids)],
            )
            for tenant, doc_id in latest:
                write.changed.setdefault(tenant, set()).add(doc_id)
            write.after = lambda: self._caches.upserted(latest, vectors)

    @staticmethod
    def _ids(conn: sqlite3.Connection, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The row ids of those (tenant, doc_id) already stored: one read per tenant and 500 ids."""
        by_tenant: dict[str, list[str]] = {}
        for tenant, doc_id in keys:
            by_tenant.setdefault(tenant, []).append(doc_id)
        found: dict[tuple[str, str], int] = {}
        for tenant, doc_ids in by_tenant.items():
            for start in range(0, len(doc_ids), 500):
                chunk = doc_ids[start : start + 500]
                sql = f"SELECT doc_id, id FROM docs WHERE tenant = ? AND doc_id IN ({','.join('?' * len(chunk))})"
                found.update(((tenant, doc_id), doc) for doc_id, doc in conn.execute(sql, (tenant, *chunk)))
        return found

    def _check_dimensions(
        self,
        conn: sqlite3.Connection,
        docs: dict[tuple[str, str], IndexDocument],
        vectors: dict[tuple[str, str], NDArray[np.float32]],
    ) -> None:
        dims: dict[tuple[str, str], int] = {}
        for key, vec in vectors.items():
            d = docs[key]
            if d.model_id is None:
                raise InvalidInput(f"document {d.doc_id} has a vector but no model_id")
            model = (d.tenant, d.model_id)
            if model not in dims:
                cache = self._caches.get(*model)
                if cache is not None and cache.dim is not None:
                    dims[model] = cache.dim
                else:
                    stored = conn.execute(
                        "SELECT length(vector) / 4 FROM docs WHERE tenant = ? AND model_id = ? LIMIT 1", model
                    ).fetchone()
                    dims[model] = int(stored[0]) if stored else len(vec)
            if len(vec) != dims[model]:
                raise InvalidInput(f"document {d.doc_id}: {d.model_id} vectors have {dims[model]} dimensions")

    @staticmethod
    def _write_ancestors(conn: sqlite3.Connection, tenant: str, docs: list[int], ancestor_ids: list[str]) -> None:
        conn.executemany("DELETE FROM doc_ancestors WHERE doc = ?", [(doc,) for doc in docs])
        conn.executemany(
            "INSERT INTO doc_ancestors VALUES (?, ?, ?)",
            [(tenant, anc, doc) for doc in docs for anc in dict.fromkeys(ancestor_ids)],
        )

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        with self._tx({tenant}) as write:
            conn = write.conn
            ids = [
                (row[0],)
                for doc_id in doc_ids
                for row in conn.execute("SELECT id FROM docs WHERE tenant = ? AND doc_id = ?", (tenant, doc_id))
            ]
            conn.executemany("DELETE FROM docs_fts WHERE rowid = ?", ids)
            conn.executemany("DELETE FROM doc_ancestors WHERE doc = ?", ids)
            conn.executemany("DELETE FROM doc_meta WHERE doc = ?", ids)
            conn.executemany("DELETE FROM docs WHERE id = ?", ids)
            write.changed[tenant] = set(doc_ids)
            write.after = lambda: self._caches.removed(tenant, doc_ids)

    def update_ancestors(self, tenant: str, scope_id: str, ancestor_ids: Sequence[str]) -> None:
        """Give every document of `scope_id` the new path (root first, the scope itself last)."""
        path = list(ancestor_ids)
        with self._tx({tenant}) as write:
            conn = write.conn
            rows = conn.execute(
                "SELECT id, doc_id FROM docs WHERE tenant = ? AND scope_id = ?", (tenant, scope_id)
            ).fetchall()
            conn.execute(
                "UPDATE docs SET ancestor_ids = ? WHERE tenant = ? AND scope_id = ?",
                (json.dumps(path), tenant, scope_id),
            )
            self._write_ancestors(conn, tenant, [row[0] for row in rows], path)
            write.changed[tenant] = {row[1] for row in rows}
            write.after = lambda: self._caches.moved(tenant, [row[1] for row in rows], path)

    def clear_tenant(self, tenant: str) -> None:
        with self._tx({tenant}) as write:
            conn = write.conn
            ids = conn.execute("SELECT id FROM docs WHERE tenant = ?", (tenant,)).fetchall()
            conn.executemany("DELETE FROM docs_fts WHERE rowid = ?", ids)
            conn.execute("DELETE FROM doc_ancestors WHERE tenant = ?", (tenant,))
            conn.execute("DELETE FROM doc_meta WHERE tenant = ?", (tenant,))
            conn.execute("DELETE FROM docs WHERE tenant = ?", (tenant,))
            write.changed[tenant] = {"*"}
            write.after = lambda: self._caches.drop(tenant)

    # -- reads ------------------------------------------------------------------------------
    def count(self, tenant: str) -> int:
        with self._db() as conn:
            return int(conn.execute("SELECT count(*) FROM docs WHERE tenant = ?", (tenant,)).fetchone()[0])

    def doc_ids(self, tenant: str) -> set[str]:
        with self._db() as conn:
            return {row[0] for row in conn.execute("SELECT doc_id FROM docs WHERE tenant = ?", (tenant,))}

    def search_text(self, flt: SearchFilter, query: str, k: int) -> list[Hit]:
        with self._db() as conn:
            return self._text.search(conn, flt, query, k)

    def get_vectors(self, tenant: str, model_id: str, doc_ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        ids = list(dict.fromkeys(doc_ids))
        found: dict[str, NDArray[np.float32]] = {}
        with self._db() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                found.update(
                    (doc_id, np.frombuffer(blob, np.float32))
                    for doc_id, blob in conn.execute(
                        f"SELECT doc_id, vector FROM docs WHERE tenant = ? AND doc_id IN ({','.join('?' * len(chunk))})"
                        " AND +model_id = ? AND vector IS NOT NULL",
                        (tenant, *chunk, model_id),
                    )
                )
        return found

    def search_vector(self, flt: SearchFilter, vector: NDArray[np.float32], model_id: str, k: int) -> list[Hit]:
        query = np.asarray(vector, dtype=np.float64).reshape(-1)
        if not np.isfinite(query).all():
            raise InvalidInput("query vector has non-finite values")
        norm = float(np.linalg.norm(query))
        if k <= 0 or norm == 0.0:
            return []
        with self._db() as conn:
            while True:
                with self._cache_lock.shared():
                    cache = self._caches.get(flt.tenant, model_id)
                    fresh = cache is not None and cache.generation == sqlite_vectors.generation(conn, flt.tenant)
                    if cache is not None and fresh and not (self._ann and cache.wants_ann()):
                        if cache.dim is None:
                            return []
                        if query.size != cache.dim:
                            raise InvalidInput(
                                f"{model_id} vectors have {cache.dim} dimensions, the query {query.size}"
                            )
                        allowed = metadata_docs(conn, flt)
                        return cache.search(flt, query / norm, k, exact=not self._ann, allowed=allowed)
                self._reload(conn, flt.tenant, model_id)

    def _reload(self, conn: sqlite3.Connection, tenant: str, model_id: str) -> None:
        """Bring the (tenant, model_id) cache up to the file, from one snapshot of it: the cache in
        memory or the saved one, caught up from the change log; else every row. Commits wait."""
        with self._load_lock, self._cache_lock.exclusive():
            conn.execute("BEGIN")  # one snapshot for the generation, the log and the rows
            rebuilt = False
            try:
                gen = sqlite_vectors.generation(conn, tenant)
                cache = self._caches.get(tenant, model_id)
                restored = None
                if cache is None and self._snapshots:
                    restored = cache = vector_snapshot.load(
                        vector_snapshot.directory(self.path, tenant, model_id),
                        epoch=self._epoch, tenant=tenant, model_id=model_id,
                    )  # fmt: skip
                caught_up = cache is not None and cache.generation != gen
                if cache is not None and caught_up:
                    cache = sqlite_vectors.catch_up(conn, tenant, model_id, cache, gen)
                if (
                    cache is not None
                    and cache is restored
                    and not sqlite_vectors.agrees(conn, tenant, model_id, cache, caught_up)
                ):
                    cache = None
                if cache is None:
                    cache, rebuilt = sqlite_vectors.load(conn, tenant, model_id, gen), True
                self._caches.put(tenant, model_id, cache)
            finally:
                conn.execute("COMMIT")
            if self._ann and cache.wants_ann():
                cache.build_ann()
                rebuilt = True
        if rebuilt:  # searches and writes go on while it is written
            self._save(tenant, model_id, cache)

    def _save(self, tenant: str, model_id: str, cache: VectorCache) -> None:
        """Write the cache's snapshot (big caches only); a failure only costs the next process a full load.
        It is written from a consistent copy taken under the caches' shared lock (commits wait for the
        copy of the small arrays and, 64k rows at a time, of the approximate index; never for the
        files), so no lock of this index is held while the files are written."""
        if not self._snapshots or cache.rows < SNAPSHOT_MIN_ROWS:
            return
        with self._cache_lock.shared():
            state, ann = cache.state(), cache.ann
        generation = int(state[2]["generation"])
        try:
            copy = ann.copy_below(int(state[2]["n"]), self._cache_lock.shared) if ann is not None else None
            vector_snapshot.save(
                vector_snapshot.directory(self.path, tenant, model_id), state, copy,
                epoch=self._epoch, tenant=tenant, model_id=model_id,
            )  # fmt: skip
            cache.saved_generation = max(cache.saved_generation or 0, generation)
        except OSError as exc:
            vector_snapshot.log.warning("vector snapshot not saved: %s", exc)


@dataclass
class _Write:
    conn: sqlite3.Connection
    after: Callable[[], None] | None = None  # applies the write to the caches, after COMMIT
    changed: dict[str, set[str]] = field(default_factory=dict)  # tenant -> doc ids written (the change log)
