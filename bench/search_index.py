"""Benchmark the embedded search index (`SqliteSearchIndex`).

Builds synthetic tenants of 10k and 100k docs (random unit vectors, d=384; 30-word texts drawn
from a Zipf-weighted 2,000-word vocabulary) in a temp dir, then prints upsert throughput
(batches of 100) and median / p95 latency of search_text and search_vector over the whole
tenant, a 1% subtree, a 20-doc leaf and (where the index has metadata filters) the 1% of the tenant
whose metadata holds one user (every doc carries `{"user": "u<i % 100>"}`). Figures only, no assertions.

    .venv/bin/python bench/search_index.py [--sizes 10000 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.search_models import IndexDocument, SearchFilter

DIM = 384
MODEL = "bench-random@384"
TENANT = "bench"
SUBTREES = 100  # root -> s00..s99 (1% each) -> 10 leaves each
BATCH = 100


def vocabulary(rng: np.random.Generator, size: int = 2000) -> tuple[list[str], np.ndarray]:
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = sorted({"".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(size * 2)})[:size]
    weights = 1.0 / np.arange(1, len(words) + 1)
    return words, weights / weights.sum()


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def make_docs(start: int, count: int, rng: np.random.Generator, words: list[str], p: np.ndarray) -> list[IndexDocument]:
    """Docs start..start+count (built per batch: 100k docs of float lists would take ~1.5 GB)."""
    vecs = unit_vectors(rng, count)
    picks = rng.choice(len(words), size=(count, 30), p=p)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    docs = []
    for j, i in enumerate(range(start, start + count)):
        sub, leaf = i % SUBTREES, (i // SUBTREES) % 10
        docs.append(
            IndexDocument(
                tenant=TENANT,
                doc_id=f"doc-{i:07d}",
                kind="episode",
                scope_id=f"s{sub:02d}-l{leaf}",
                ancestor_ids=["root", f"s{sub:02d}", f"s{sub:02d}-l{leaf}"],
                text=" ".join(words[w] for w in picks[j]),
                vector=vecs[j].tolist(),
                model_id=MODEL,
                occurred_at=t0 + timedelta(seconds=i),
                metadata_terms=[f'["user","u{i % 100:02d}"]'],  # ignored by an index without metadata filters
            )
        )
    return docs


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def report(label: str, ms: list[float]) -> None:
    p95 = float(np.percentile(ms, 95))
    print(f"  {label:<38} median {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms")


def bench(n: int, queries: int, workdir: Path) -> None:
    rng = np.random.default_rng(n)
    words, p = vocabulary(rng)
    index = SqliteSearchIndex(workdir / f"index-{n}.db")
    print(f"\n== {n:,} docs, d={DIM} ==")

    elapsed = 0.0
    for i in range(0, n, BATCH):
        batch = make_docs(i, min(BATCH, n - i), rng, words, p)
        start = time.perf_counter()
        index.upsert(batch)
        elapsed += time.perf_counter() - start
    print(f"  upsert (batches of {BATCH}) {n / elapsed:,.0f} docs/s  ({elapsed:.1f} s)")

    start = time.perf_counter()
    index.search_vector(SearchFilter(tenant=TENANT, ancestor_id="root"), unit_vectors(rng, 1)[0], MODEL, 10)
    print(f"  vector cache cold load                 {(time.perf_counter() - start) * 1000:8.1f} ms")

    # vocabulary ranks 20-400: common enough to match many docs, rarer than the very top
    text_queries = [" ".join(rng.choice(words[20:400], 3)) for _ in range(queries)]
    vec_queries = unit_vectors(rng, queries)
    scopes = [("whole tenant", "root", None), ("1% subtree", "s07", None), ("leaf (~1/1000)", "s07-l3", None)]
    if "metadata" in SearchFilter.model_fields:
        scopes.append(("metadata user=u07 (1%)", "root", {"user": ["u07"]}))
    for label, anc, metadata in scopes:
        flt = SearchFilter(tenant=TENANT, ancestor_id=anc, **({"metadata": metadata} if metadata else {}))
        texts, vecs = iter(text_queries), iter(vec_queries)

        def text_search(f: SearchFilter = flt, pending: Iterator[str] = texts) -> object:
            return index.search_text(f, next(pending), 10)

        def vector_search(f: SearchFilter = flt, pending: Iterator[np.ndarray] = vecs) -> object:
            return index.search_vector(f, next(pending), MODEL, 10)

        report(f"search_text   k=10  {label}", timed(text_search, queries))
        report(f"search_vector k=10  {label}", timed(vector_search, queries))
    replaced = make_docs(0, 1000, rng, words, p)  # same ids, new text and vectors
    start = time.perf_counter()
    for i in range(0, len(replaced), BATCH):
        index.upsert(replaced[i : i + BATCH])
    elapsed = time.perf_counter() - start
    print(f"  re-upsert 1,000 docs (warm cache)      {len(replaced) / elapsed:8,.0f} docs/s")
    index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mneme-bench-") as tmp:
        for n in args.sizes:
            bench(n, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
