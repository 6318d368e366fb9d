"""The embedded index's vector caches and the file: a tenant's generation, loading a cache from the rows,
catching a cache up from the change log, and checking a restored snapshot against the file."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import numpy as np

from mneme.adapters.sqlite import vector_snapshot
from mneme.adapters.sqlite.vector_cache import Rows, VectorCache


def generation(conn: sqlite3.Connection, tenant: str) -> int:
    row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
    return int(row[0]) if row else 0


ROW_COLUMNS = "doc_id, kind, ancestor_ids, occurred_at, tier, session_id, visible_to, vector"


def load(conn: sqlite3.Connection, tenant: str, model_id: str, gen: int) -> VectorCache:
    rows = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM docs WHERE tenant = ? AND model_id = ? ORDER BY id", (tenant, model_id)
    ).fetchall()
    cache = VectorCache(gen)
    if rows:
        cache.add(as_rows(rows, len(rows[0][7]) // 4))
    return cache


def as_rows(rows: list[tuple[Any, ...]], dim: int) -> Rows:
    doc_ids, kinds, paths, occurred, tiers, sessions, visible, blobs = map(
        list, zip(*(r for r in rows if len(r[7]) == dim * 4), strict=True)
    )
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
    # fixed-width ISO UTC without the "Z" parses straight into numpy microseconds
    micros = np.array([t[:-1] for t in occurred], dtype="datetime64[us]").astype(np.int64).tolist()
    paths = json.loads(f"[{','.join(paths)}]")  # one parse, not one per row
    return Rows(doc_ids, kinds, paths, micros, tiers, sessions, visible, matrix)


def catch_up(conn: sqlite3.Connection, tenant: str, model_id: str, cache: VectorCache, gen: int) -> VectorCache | None:
    """`cache` (at an older generation) brought to `gen` by re-reading the documents the change log
    lists since; None when the log does not hold every generation in between (or says "all")."""
    if cache.generation > gen:
        return None
    logged = conn.execute(
        "SELECT gen, doc_id FROM doc_changes WHERE tenant = ? AND gen > ? AND gen <= ?", (tenant, cache.generation, gen)
    ).fetchall()
    if len({g for g, _ in logged}) != gen - cache.generation or any(d == "*" for _, d in logged):
        return None
    changed = sorted({d for _, d in logged if d})
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(changed), 500):
        chunk = changed[start : start + 500]
        found += conn.execute(  # by (tenant, doc_id); the model is checked on the rows
            f"SELECT {ROW_COLUMNS} FROM docs WHERE tenant = ? AND doc_id IN ({','.join('?' * len(chunk))})"
            " AND +model_id = ? AND vector IS NOT NULL ORDER BY id",
            (tenant, *chunk, model_id),
        ).fetchall()
    cache.remove(changed)
    if found:
        dim = cache.dim or len(found[0][7]) // 4
        cache.add(as_rows(found, dim))
    cache.generation = gen
    return cache


def agrees(conn: sqlite3.Connection, tenant: str, model_id: str, cache: VectorCache, count: bool) -> bool:
    """A restored cache holds a sample of the file's rows byte for byte, and (`count`: after a catch-up
    from the log) as many rows as the file. A snapshot at the file's own generation skips the count:
    at 1M rows it is a 0.1-0.3 s index scan, and the generation already says no write came since."""
    found = cache.rows
    if count:
        found = conn.execute(
            "SELECT count(*) FROM docs WHERE tenant = ? AND model_id = ?", (tenant, model_id)
        ).fetchone()[0]
    if int(found) != cache.rows:
        vector_snapshot.log.warning("vector snapshot of %s/%s: %d rows, the file %d", tenant, model_id, cache.rows,
                                    found)  # fmt: skip
        return False
    sample = dict(cache.sample(16))
    stored = dict(
        conn.execute(
            f"SELECT doc_id, vector FROM docs WHERE tenant = ? AND doc_id IN ({','.join('?' * len(sample))})",
            (tenant, *sample),
        ).fetchall()
    ) if sample else {}  # fmt: skip
    for doc_id, vector in sample.items():
        if stored.get(doc_id) != vector.tobytes():
            vector_snapshot.log.warning("vector snapshot of %s/%s disagrees with the file at %s", tenant, model_id,
                                        doc_id)  # fmt: skip
            return False
    return True
