"""The embedded search index: one SQLite file (WAL) with FTS5 for text and numpy for vectors.

Schema:
- `docs`: one row per (tenant, doc_id) with the filter columns (occurred_at as fixed-width ISO
  UTC, so it sorts as text) and the L2-normalised vector as float32 bytes.
- `doc_ancestors` (tenant, ancestor_id, doc): the subtree mapping, a WITHOUT ROWID primary key.
- `docs_fts`: FTS5 (porter unicode61), rowid = docs.id.
- `generations`: a per-tenant counter bumped by every write; it tells a vector cache whether it
  still reflects the file (another process may write too).

Every filter is part of the one SQL statement (text) or of the boolean mask (vectors, see
`vector_cache`) that precedes ORDER BY ... LIMIT / argpartition, so a small subtree gets its
true top k. Time windows are half-open: since <= occurred_at < until; naive datetimes are UTC.

One connection, opened on first use, shared by all threads behind a lock (calls serialise).
SQLite operational errors (locked, I/O, cannot open) surface as `StoreUnavailable`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from mneme.adapters.vector_cache import CacheSet, Rows, VectorCache, as_utc, normalised_vector
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.search_models import Hit, IndexDocument, SearchFilter

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, doc_id TEXT NOT NULL, kind TEXT NOT NULL,
    scope_id TEXT NOT NULL, ancestor_ids TEXT NOT NULL, occurred_at TEXT NOT NULL, tier TEXT NOT NULL,
    session_id TEXT, visible_to TEXT, model_id TEXT, vector BLOB, UNIQUE (tenant, doc_id));
CREATE INDEX IF NOT EXISTS docs_scope ON docs (tenant, scope_id);
CREATE INDEX IF NOT EXISTS docs_model ON docs (tenant, model_id);
CREATE TABLE IF NOT EXISTS doc_ancestors (
    tenant TEXT NOT NULL, ancestor_id TEXT NOT NULL, doc INTEGER NOT NULL,
    PRIMARY KEY (tenant, ancestor_id, doc)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_ancestors_doc ON doc_ancestors (doc);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(text, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS generations (tenant TEXT PRIMARY KEY, gen INTEGER NOT NULL);
"""

_UPSERT = """
INSERT INTO docs (tenant, doc_id, kind, scope_id, ancestor_ids, occurred_at, tier, session_id,
                  visible_to, model_id, vector)
VALUES (?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (tenant, doc_id) DO UPDATE SET
    kind=excluded.kind, scope_id=excluded.scope_id, ancestor_ids=excluded.ancestor_ids,
    occurred_at=excluded.occurred_at, tier=excluded.tier, session_id=excluded.session_id,
    visible_to=excluded.visible_to, model_id=excluded.model_id, vector=excluded.vector
RETURNING id
"""

# Text search, two plans with the same result (CROSS JOIN fixes the loop order). FTS-first walks the
# query's matches and probes the subtree's primary key; subtree-first walks a small subtree and
# probes FTS per doc (~25 us per doc and query word, so only for small subtrees).
_FTS_FIRST = """
SELECT d.doc_id, -bm25(docs_fts) AS score FROM docs_fts CROSS JOIN docs d ON d.id = docs_fts.rowid
WHERE docs_fts MATCH :q AND d.tenant = :tenant AND EXISTS (
    SELECT 1 FROM doc_ancestors a WHERE a.tenant = :tenant AND a.ancestor_id = :anc AND a.doc = d.id)
"""
_SUBTREE_FIRST = """
SELECT d.doc_id, -bm25(docs_fts) AS score FROM doc_ancestors a CROSS JOIN docs d CROSS JOIN docs_fts
WHERE a.tenant = :tenant AND a.ancestor_id = :anc AND d.id = a.doc AND docs_fts.rowid = a.doc
    AND docs_fts MATCH :q AND d.tenant = :tenant
"""

_WORD = re.compile(r"[^\W_]+")
_MAX_TERMS = 32


def fts_query(text: str) -> str | None:
    """The words of `text`, each quoted, ORed: user syntax never reaches FTS5."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:_MAX_TERMS]
    return " OR ".join(f'"{w}"' for w in words) or None


def iso_utc(value: datetime) -> str:
    return as_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _default_connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


class SqliteSearchIndex:
    """`mneme.ports.SearchIndex` over one SQLite file; safe to share between threads."""

    visibility_lag = 0.0  # a write is searchable when it returns

    def __init__(
        self,
        path: str | Path,
        *,
        connect: Callable[[str], sqlite3.Connection] | None = None,
        subtree_first_max: int = 256,
    ) -> None:
        self.path = str(path)
        self._connect = connect or _default_connect
        # Text plan choice: subtree-first when subtree size x query words is at most this.
        self._subtree_first_max = subtree_first_max
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._caches = CacheSet()

    # -- plumbing ---------------------------------------------------------------------------
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._open()
                yield self._conn
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"search index unavailable: {exc}") from exc

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(self.path)
        try:
            conn.isolation_level = None  # transactions are explicit
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # the index can be rebuilt; skip fsync per commit
            conn.execute("PRAGMA busy_timeout=5000")
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _tx(self, tenants: set[str]) -> Iterator[sqlite3.Connection]:
        """A write transaction that bumps the tenants' generations; caches are told after commit."""
        with self._db() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                gens = {
                    t: conn.execute(
                        "INSERT INTO generations VALUES (?, 1)"
                        " ON CONFLICT (tenant) DO UPDATE SET gen = gen + 1 RETURNING gen",
                        (t,),
                    ).fetchone()[0]
                    for t in tenants
                }
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._caches.committed(gens)  # the caller then applies its write to the caches

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._caches.drop()

    # -- writes -----------------------------------------------------------------------------
    def upsert(self, docs: Sequence[IndexDocument]) -> None:
        latest = {(d.tenant, d.doc_id): d for d in docs}  # the last version in a batch wins
        if not latest:
            return
        vectors = {key: vec for key, d in latest.items() if (vec := normalised_vector(d)) is not None}
        with self._lock:  # held until the caches saw the write too
            with self._tx({tenant for tenant, _ in latest}) as conn:
                self._check_dimensions(conn, latest, vectors)
                for key, d in latest.items():
                    vec = vectors.get(key)
                    row = (
                        *key, d.kind, d.scope_id, json.dumps(d.ancestor_ids), iso_utc(d.occurred_at), d.tier,
                        d.session_id, d.visible_to, d.model_id if vec is not None else None,
                        vec.tobytes() if vec is not None else None,
                    )  # fmt: skip
                    doc = conn.execute(_UPSERT, row).fetchone()[0]
                    conn.execute("DELETE FROM docs_fts WHERE rowid = ?", (doc,))
                    conn.execute("INSERT INTO docs_fts (rowid, text) VALUES (?, ?)", (doc, d.text))
                    self._write_ancestors(conn, d.tenant, [doc], d.ancestor_ids)
            self._caches.upserted(latest, vectors)

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
        with self._lock:
            with self._tx({tenant}) as conn:
                ids = [
                    (row[0],)
                    for doc_id in doc_ids
                    for row in conn.execute("SELECT id FROM docs WHERE tenant = ? AND doc_id = ?", (tenant, doc_id))
                ]
                conn.executemany("DELETE FROM docs_fts WHERE rowid = ?", ids)
                conn.executemany("DELETE FROM doc_ancestors WHERE doc = ?", ids)
                conn.executemany("DELETE FROM docs WHERE id = ?", ids)
            self._caches.removed(tenant, doc_ids)

    def update_ancestors(self, tenant: str, scope_id: str, ancestor_ids: Sequence[str]) -> None:
        """Give every document of `scope_id` the new path (root first, the scope itself last)."""
        path = list(ancestor_ids)
        with self._lock:
            with self._tx({tenant}) as conn:
                rows = conn.execute(
                    "SELECT id, doc_id FROM docs WHERE tenant = ? AND scope_id = ?", (tenant, scope_id)
                ).fetchall()
                conn.execute(
                    "UPDATE docs SET ancestor_ids = ? WHERE tenant = ? AND scope_id = ?",
                    (json.dumps(path), tenant, scope_id),
                )
                self._write_ancestors(conn, tenant, [row[0] for row in rows], path)
            self._caches.moved(tenant, [row[1] for row in rows], path)

    def clear_tenant(self, tenant: str) -> None:
        with self._lock:
            with self._tx({tenant}) as conn:
                ids = conn.execute("SELECT id FROM docs WHERE tenant = ?", (tenant,)).fetchall()
                conn.executemany("DELETE FROM docs_fts WHERE rowid = ?", ids)
                conn.execute("DELETE FROM doc_ancestors WHERE tenant = ?", (tenant,))
                conn.execute("DELETE FROM docs WHERE tenant = ?", (tenant,))
            self._caches.drop(tenant)

    # -- reads ------------------------------------------------------------------------------
    def count(self, tenant: str) -> int:
        with self._db() as conn:
            return int(conn.execute("SELECT count(*) FROM docs WHERE tenant = ?", (tenant,)).fetchone()[0])

    def doc_ids(self, tenant: str) -> set[str]:
        with self._db() as conn:
            return {row[0] for row in conn.execute("SELECT doc_id FROM docs WHERE tenant = ?", (tenant,))}

    def search_text(self, flt: SearchFilter, query: str, k: int) -> list[Hit]:
        match = fts_query(query)
        if k <= 0 or match is None:
            return []
        params: dict[str, object] = {"q": match, "tenant": flt.tenant, "anc": flt.ancestor_id, "k": k}
        where = _filter_sql(flt, params)
        with self._db() as conn:
            limit = self._subtree_first_max // (match.count(" OR ") + 1)
            small = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM doc_ancestors WHERE tenant = ? AND ancestor_id = ? LIMIT ?)",
                (flt.tenant, flt.ancestor_id, limit + 1),
            ).fetchone()[0]
            plan = _SUBTREE_FIRST if small <= limit else _FTS_FIRST
            rows = conn.execute(f"{plan} {where} ORDER BY score DESC, d.doc_id LIMIT :k", params).fetchall()
        return [Hit(doc_id=doc_id, score=score) for doc_id, score in rows]

    def search_vector(self, flt: SearchFilter, vector: NDArray[np.float32], model_id: str, k: int) -> list[Hit]:
        query = np.asarray(vector, dtype=np.float64).reshape(-1)
        if not np.isfinite(query).all():
            raise InvalidInput("query vector has non-finite values")
        norm = float(np.linalg.norm(query))
        if k <= 0 or norm == 0.0:
            return []
        with self._db() as conn:
            cache = self._cache(conn, flt.tenant, model_id)
            if cache.dim is None:
                return []
            if query.size != cache.dim:
                raise InvalidInput(f"{model_id} vectors have {cache.dim} dimensions, the query {query.size}")
            return cache.search(flt, query / norm, k)

    def _cache(self, conn: sqlite3.Connection, tenant: str, model_id: str) -> VectorCache:
        """The (tenant, model_id) cache, (re)loaded if the file moved past its generation."""
        conn.execute("BEGIN")  # one snapshot for the generation and the rows
        try:
            gen_row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
            gen = gen_row[0] if gen_row else 0
            cache = self._caches.get(tenant, model_id)
            if cache is None or cache.generation != gen:
                cache = _load(conn, tenant, model_id, gen)
                self._caches.put(tenant, model_id, cache)
        finally:
            conn.execute("COMMIT")
        return cache


def _load(conn: sqlite3.Connection, tenant: str, model_id: str, gen: int) -> VectorCache:
    rows = conn.execute(
        "SELECT doc_id, kind, ancestor_ids, occurred_at, tier, session_id, visible_to, vector FROM docs"
        " WHERE tenant = ? AND model_id = ? ORDER BY id",
        (tenant, model_id),
    ).fetchall()
    cache = VectorCache(gen)
    if not rows:
        return cache
    dim = len(rows[0][7]) // 4
    doc_ids, kinds, paths, occurred, tiers, sessions, visible, blobs = map(
        list, zip(*(r for r in rows if len(r[7]) == dim * 4), strict=True)
    )
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
    # fixed-width ISO UTC without the "Z" parses straight into numpy microseconds
    micros = np.array([t[:-1] for t in occurred], dtype="datetime64[us]").astype(np.int64).tolist()
    paths = json.loads(f"[{','.join(paths)}]")  # one parse, not one per row
    cache.add(Rows(doc_ids, kinds, paths, micros, tiers, sessions, visible, matrix))
    return cache


def _filter_sql(flt: SearchFilter, params: dict[str, object]) -> str:
    """The non-subtree filters as AND clauses over `d` (docs), binding into `params`."""
    clauses: list[str] = []
    for column, values in (("kind", flt.kinds), ("tier", flt.tiers)):
        if values is not None:
            names = [f"{column}{i}" for i in range(len(values))]
            params.update(zip(names, sorted(values), strict=True))
            clauses.append(f"d.{column} IN ({', '.join(':' + n for n in names)})" if names else "0")
    if flt.since is not None:
        params["since"] = iso_utc(flt.since)
        clauses.append("d.occurred_at >= :since")
    if flt.until is not None:
        params["until"] = iso_utc(flt.until)
        clauses.append("d.occurred_at < :until")
    if flt.session_id is not None:
        params["session"] = flt.session_id
        clauses.append("d.session_id = :session")
    params["principal"] = flt.principal
    clauses.append("(d.visible_to IS NULL OR d.visible_to = :principal)")
    return "".join(f" AND {c}" for c in clauses)
