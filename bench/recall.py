"""recall latency p50/p95 at 10k, 100k and 1M episodes on the embedded engine, phase by phase.

Up to `--embed-max` episodes the corpus is built through `remember` (real LocalEmbedder, batches
of 100) from the synthetic generator in bench/_common.py; beyond it, it is GROWN (embedding a
million texts takes over an hour here): episode i re-uses the text and vector of an embedded
episode (i mod base), with a new id, a new scope (the customer's generation i // base), a new
date, and its vector perturbed (cosine ~0.9 to the source) and renormalised, written straight to
both stores. The output says which sizes were grown. Corpora are cached under bench/.cache/ keyed
by size and by a fingerprint of the generator and both SQLite schemas; a bigger corpus starts
from a copy of the biggest smaller one. Each query runs three ways, interleaved: hybrid with the default scoring
(alpha 0.7, beta 0.3, balanced), BM25 only (alpha 0, beta 1) and vector only (alpha 1, beta 0).
Phases come from timing proxies: embed = `embedder.embed`, search = `index.search_text` +
`index.search_vector`, rank = total - embed - search (record loading, admission, fusion, scope
paths, context pack), of which load = `store.get_episodes` and scopes = `store.get_scope`. A
hybrid recall searches text in a second thread while it embeds the query: CPU is the calling
thread's plus that search's (not the process's: idle library threads spin), and the wall rank
is total - the longer of (embed + vector search, text search).
Percentiles are per column, so the columns of a row need not add up. Figures only, no asserts.

First query: the vector cache of a big tenant is saved next to the index (`vector_snapshot`);
the bench starts an engine twice before measuring and prints both first queries (the first one
reads every row and saves the snapshot when there is none yet).

Exact vs approximate: at sizes where the vector cache builds its approximate index
(`vector_cache.ANN_MIN_ROWS`), the bench also prints the approximate channel's recall@10
against exact search over the same queries (unfiltered and under one customer's subtree); where the
text channel runs its approximate plan (`sqlite_text.BIG_TEXT`), the overlap of its top 10 (of the
k=50 a recall asks for) with the exact BM25 top 10, and the CPU of both plans.

    .venv/bin/python bench/recall.py [--sizes 10000,100000,1000000] [--embed-max 100000] [--fast]
        [--queries 200] [--rebuild]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import time
from pathlib import Path

import _common as c

from mneme.adapters.sqlite import episodes as sqlite_episodes
from mneme.adapters.sqlite import index as sqlite_index
from mneme.adapters.sqlite import store as sqlite_store
from mneme.adapters.sqlite import text as sqlite_text
from mneme.observability import metrics
from mneme.services.recall import RecallRequest, Scoring

GENERATOR_VERSION = "1"
PHASES = ("total", "embed", "search", "rank")  # p50 and p95
PARTS = ("load", "scopes")  # parts of rank, p50 only
MODES = {
    "hybrid 0.7/0.3": Scoring(),
    "BM25 only": Scoring(alpha=0, beta=1),
    "vector only": Scoring(alpha=1, beta=0),
}
QUERY_TEMPLATES = [
    "what went wrong with order {order}",
    "{person} leave cover",
    "which customer got a {product} {defect}?",
    "why did the {region} deploy fail",
    "who restores bicycles or keeps bees at the weekend",
    "invoice INV-{invoice} overdue",
    "what does {person} prefer for updates",
    "the {product} keeps losing wifi",
    "{customer} quote for a {city} delivery",
    "budget overrun on the {project}",
    "part {part} back-order",
    "move the {project} tracking to another tool",
]


def fingerprint() -> str:
    basis = GENERATOR_VERSION + sqlite_store.SCHEMA + sqlite_index.SCHEMA + "".join(c.TEMPLATES)
    return hashlib.sha256(basis.encode()).hexdigest()[:10]


def corpus(size: int, threads: int, rebuild: bool, embed_max: int = 100_000) -> Path:
    """A directory holding `size` synthetic episodes, built (or extended) and cached on demand."""
    key = fingerprint()
    final = c.CACHE / f"recall-{key}-{size}"
    if rebuild and final.exists():
        shutil.rmtree(final)
    if (final / "done.json").exists():
        return final
    smaller = [  # an embedded corpus starts only from an embedded one
        int(p.name.rsplit("-", 1)[1])
        for p in c.CACHE.glob(f"recall-{key}-*")
        if (p / "done.json").exists() and int(p.name.rsplit("-", 1)[1]) < size and (size > embed_max or not grown(p))
    ]
    partial = c.CACHE / f"recall-{key}-{size}.partial"
    if not (partial / "index.db").exists():  # else resume an interrupted build
        base = max(smaller, default=0)
        shutil.rmtree(partial, ignore_errors=True)
        if base:
            shutil.copytree(c.CACHE / f"recall-{key}-{base}", partial)
    eng = c.engine(partial, threads)
    eng.services.indexer.sweep()  # episodes stored just before an interruption
    base = eng.services.index.count(c.TENANT)
    if size > embed_max and base:
        grow(eng, base, size)
        eng.close()
        (partial / "done.json").write_text(json.dumps({"size": size, "from": base, "grown": True}))
        partial.rename(final)
        return final
    print(f"building {size} episodes in {final.relative_to(c.ROOT)} (from {base}, {threads} threads)")
    start = chunk_start = time.perf_counter()
    chunk_first = base
    for first in range(base, size, 100):
        eng.services.remember.remember(c.CALLER, c.synthetic_items(first, min(100, size - first)))
        done = min(first + 100, size)
        if done % 10_000 == 0 or done == size:
            now = time.perf_counter()
            rate = (done - chunk_first) / (now - chunk_start)
            print(f"  {done:>7} episodes, the last {done - chunk_first} at {rate:.0f} ep/s")
            chunk_start, chunk_first = now, done
    eng.close()
    elapsed = time.perf_counter() - start
    (partial / "done.json").write_text(json.dumps({"size": size, "from": base, "seconds": elapsed}))
    partial.rename(final)
    return final


def grown(directory: Path) -> bool:
    return bool(json.loads((directory / "done.json").read_text()).get("grown"))


def grow(eng: c.Engine, base: int, size: int) -> None:
    """Episodes base..size-1 from the embedded ones, in bulk SQL straight to both files (see the doc)."""
    from datetime import timedelta

    import numpy as np

    from mneme.adapters.sqlite.base import utc_text
    from mneme.adapters.sqlite.text import iso_utc
    from mneme.errors import MnemeError
    from mneme.language.text import date_words

    store, index = eng.store._target, eng.services.index._target  # type: ignore[attr-defined]
    with index._db() as conn:
        found = conn.execute("SELECT doc_id, vector FROM docs WHERE tenant = ? AND kind = 'episode'", (c.TENANT,))
        vectors = {doc_id: np.frombuffer(blob, np.float32) for doc_id, blob in found}
    sources = sorted(  # the embedded ones only, never grown ones
        (
            e
            for batch in store.iter_episodes(c.TENANT)
            for e in batch
            if e.episode_id in vectors and not e.episode_id.startswith("ep_grown_")
        ),
        key=lambda e: e.episode_id,
    )
    embedded, dim = len(sources), len(next(iter(vectors.values())))
    print(f"growing {base} -> {size} episodes from {embedded} embedded ones (new ids, scopes, dates; "
          "vectors perturbed to cosine ~0.9 and renormalised), written straight to the stores")  # fmt: skip
    docs = [e.model_dump(mode="json", exclude={"vector", "model_id", "indexed"}) for e in sources]
    source_vectors = np.stack([vectors[e.episode_id] for e in sources])
    paths = {e.scope_id: eng.services.scopes.chain_of(c.TENANT, e.scope_id).path for e in sources}
    rng = np.random.default_rng(size)
    scopes: dict[str, list[str]] = {}
    start = time.perf_counter()
    model = c.LocalEmbedder.model_id
    for first in range(base, size, 20_000):
        batch = np.arange(first, min(first + 20_000, size))
        src = batch % embedded
        vecs = source_vectors[src] + rng.standard_normal((batch.size, dim)).astype(np.float32) * (0.48 / dim**0.5)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        days, minutes = rng.integers(c.SPAN_DAYS, size=batch.size), rng.integers(600, size=batch.size)
        episodes, rows, texts, ancestors = [], [], [], []
        for n, i in enumerate(batch.tolist()):
            source = docs[src[n]]
            customer, dept = paths[source["scope_id"]].split(".")[1:3]  # root.<customer>.<department>
            path = f"root.{customer}-g{i // embedded}.{dept}"
            if path not in scopes:
                try:
                    resolved = eng.services.scopes.resolve(c.TENANT, path)
                except MnemeError:
                    resolved = eng.services.scopes.create(c.TENANT, path, parents=True)
                scopes[path] = [s.scope_id for s in resolved.chain]
            chain = scopes[path]
            when = c.START + timedelta(days=int(days[n]), minutes=int(minutes[n]))
            episode_id, session = f"ep_grown_{i:08d}", f"sess-g{i // 25:07d}"
            doc = {**source, "episode_id": episode_id, "scope_id": chain[-1], "occurred_at": when.isoformat(),
                   "session_id": session}  # fmt: skip
            episodes.append((c.TENANT, episode_id, i + 1, 1, utc_text(when), chain[-1], json.dumps(doc), None))
            rows.append((c.TENANT, episode_id, "episode", chain[-1], json.dumps(chain), iso_utc(when), "raw",
                         session, None, model, vecs[n].tobytes()))  # fmt: skip
            texts.append((source["content"], date_words(when)))
            ancestors.append(chain)
        with store._tx() as conn:
            conn.executemany(sqlite_episodes.INSERT, episodes)
        with index._db() as conn:
            conn.execute("BEGIN IMMEDIATE")
            first_id = conn.execute("SELECT COALESCE(MAX(id), 0) FROM docs").fetchone()[0] + 1
            ids = range(first_id, first_id + len(rows))
            conn.executemany("INSERT INTO docs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                             [(doc_id, *row) for doc_id, row in zip(ids, rows, strict=True)])  # fmt: skip
            conn.executemany("INSERT INTO docs_fts (rowid, text, dates) VALUES (?,?,?)",
                             [(doc_id, *t) for doc_id, t in zip(ids, texts, strict=True)])  # fmt: skip
            conn.executemany("INSERT INTO doc_ancestors VALUES (?,?,?)",
                             [(c.TENANT, a, doc_id) for doc_id, chain in zip(ids, ancestors, strict=True)
                              for a in chain])  # fmt: skip
            conn.execute("INSERT INTO generations VALUES (?, 1) ON CONFLICT (tenant) DO UPDATE SET gen = gen + 1",
                         (c.TENANT,))  # fmt: skip
            conn.execute("COMMIT")
        done = int(batch[-1]) + 1
        if done % 100_000 == 0 or done == size:
            print(f"  {done:>7} episodes ({time.perf_counter() - start:.0f} s)")
    index._caches.drop()


def ann_recall(directory: Path, texts: list[str]) -> None:
    """The approximate vector channel's recall@10 against exact search, same cache, same queries."""
    from mneme.adapters.sqlite import vector_cache
    from mneme.search_models import SearchFilter

    eng = c.engine(directory, threads=1)
    index = eng.services.index._target  # type: ignore[attr-defined]
    root = eng.services.scopes.root(c.TENANT).scope_id
    customer = eng.services.scopes.resolve(c.TENANT, "root.pennine-joinery").scope.scope_id
    vectors = eng.embedder._target.embed(texts)
    found = {"whole tenant": [0, 0], "one customer (~1/16)": [0, 0]}
    for vector in vectors:
        for name, anc in (("whole tenant", root), ("one customer (~1/16)", customer)):
            flt = SearchFilter(tenant=c.TENANT, ancestor_id=anc, principal=c.CALLER.principal)
            approx = index.search_vector(flt, vector, c.LocalEmbedder.model_id, 10)
            cache = index._caches.get(c.TENANT, c.LocalEmbedder.model_id)
            exact = cache.search(flt, vector.astype("float64") / float((vector**2).sum() ** 0.5), 10, exact=True)
            found[name][0] += len({h.doc_id for h in approx} & {h.doc_id for h in exact})
            found[name][1] += len(exact)
    cache = index._caches.get(c.TENANT, c.LocalEmbedder.model_id)
    kind = "approximate (faiss 8-bit scan, rescored)" if cache.ann is not None else "exact only (below ANN_MIN_ROWS)"
    print(
        f"vector channel: {kind}; ANN recall@10 vs exact over {len(texts)} queries: "
        + ", ".join(f"{name} {hit / max(total, 1):.3f}" for name, (hit, total) in found.items())
        + f" (exact below {vector_cache.EXACT_MAX} filtered rows)"
    )
    eng.close()


def text_overlap(directory: Path, texts: list[str]) -> None:
    """The approximate text plan's top 10 against exact BM25 (the same file, the exact plan forced), k=50."""
    from mneme.adapters.sqlite.index import SqliteSearchIndex
    from mneme.search_models import SearchFilter

    plans = {
        "approximate": SqliteSearchIndex(directory / "index.db", snapshots=False),
        "exact": SqliteSearchIndex(directory / "index.db", snapshots=False, approximate_text_from=2**62),
    }
    eng = c.engine(directory, threads=1)
    flt = SearchFilter(tenant=c.TENANT, ancestor_id=eng.services.scopes.root(c.TENANT).scope_id,
                       principal=c.CALLER.principal)  # fmt: skip
    eng.close()
    found: dict[str, list[list[str]]] = {name: [] for name in plans}
    cpu: dict[str, list[float]] = {name: [] for name in plans}
    for text in texts:
        for name, plan in plans.items():
            start = time.thread_time()
            found[name].append([hit.doc_id for hit in plan.search_text(flt, text, 50)[:10]])
            cpu[name].append((time.thread_time() - start) * 1000)
    shared = sum(len(set(a) & set(e)) for a, e in zip(found["approximate"], found["exact"], strict=True))
    print(
        f"text channel: approximate plan; top-10 overlap with exact BM25 over {len(texts)} queries (k=50): "
        f"{shared / max(sum(len(e) for e in found['exact']), 1):.3f}; search_text CPU ms p50/p95: "
        + ", ".join(f"{name} {c.p50(ms):.1f}/{c.pct(ms, 95):.1f}" for name, ms in cpu.items())
    )
    for plan in plans.values():
        plan.close()


def queries(count: int, size: int) -> list[str]:
    rng = random.Random(42)
    out = []
    for n in range(count):
        _, _, _, content = c.synthetic(rng.randrange(size))  # half are words of a real episode
        if n % 2:
            words = [w.strip(".,:;") for w in content.split() if len(w) > 3]
            out.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 5)))))
            continue
        values = {
            "order": rng.randint(10000, 69999), "person": c.person(rng), "product": rng.choice(c.PRODUCTS),
            "defect": rng.choice(c.DEFECTS), "region": rng.choice(c.REGIONS),
            "invoice": f"2025-{rng.randint(1, 9999):04d}", "customer": rng.choice(c.CUSTOMERS),
            "city": rng.choice(c.CITIES), "project": rng.choice(c.PROJECTS), "part": c.part_code(rng),
        }  # fmt: skip
        out.append(rng.choice(QUERY_TEMPLATES).format(**values))
    return out


def first_query(directory: Path) -> tuple[float, float]:
    """Wall and CPU seconds of a new engine's first recall (the embedding model loaded beforehand)."""
    eng = c.engine(directory, threads=1, workers=1)
    eng.embedder.embed(["load the model"])
    wall, cpu = time.perf_counter(), time.process_time()
    eng.services.recall.recall(c.CALLER, RecallRequest(query="warm up the vector cache"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    eng.close()
    return wall, cpu


def measure(directory: Path, size: int, texts: list[str]) -> None:
    saved = (directory / "index.db.vectors").exists()
    starts = [first_query(directory), first_query(directory)]  # the second reads the snapshot the first saved
    eng = c.engine(directory, threads=1, workers=1)
    recall = eng.services.recall.recall
    cold = c.stopwatch(lambda: recall(c.CALLER, RecallRequest(query="warm up the vector cache")))
    for text in texts[:10]:
        for scoring in MODES.values():
            recall(c.CALLER, RecallRequest(query=text, scoring=scoring))
    metrics.clear_metrics()
    samples = {clock: {mode: {} for mode in MODES} for clock in ("wall", "cpu")}
    results: dict[str, list[int]] = {mode: [] for mode in MODES}
    for text in texts:
        for mode, scoring in MODES.items():
            eng.embedder.reset(), eng.index.reset(), eng.store.reset()
            wall, cpu = time.perf_counter(), time.thread_time()
            response = recall(c.CALLER, RecallRequest(query=text, scoring=scoring))
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            cpu += sum(proxy.elsewhere for proxy in (eng.embedder, eng.index, eng.store))  # the text search's thread
            metrics.clear_metrics()  # Powertools prints the set every 100 values otherwise
            results[mode].append(len(response.results))
            for clock, total, attr in (("wall", wall, "seconds"), ("cpu", cpu, "cpu")):
                spent = {
                    k: v for proxy in (eng.embedder, eng.index, eng.store) for k, v in getattr(proxy, attr).items()
                }
                embed, search = spent["embed"], spent["search_text"] + spent["search_vector"]
                # wall: the text search overlaps the embedding and the vector search
                vector = embed + spent["search_vector"]
                channels = max(vector, spent["search_text"]) if clock == "wall" else embed + search
                phases = {"total": total, "embed": embed, "search": search, "rank": total - channels,
                          "load": spent["get_episodes"], "scopes": spent["get_scope"]}  # fmt: skip
                for name, seconds in phases.items():
                    samples[clock][mode].setdefault(name, []).append(seconds * 1000)
    eng.close()
    how = "GROWN from embedded episodes (see the doc), not all embedded" if grown(directory) else "all embedded"
    print(f"\n{size} episodes ({how}); {len(texts)} queries")
    first = "from the saved vector snapshot" if saved else "no snapshot yet: reads every row, saves one"
    print(f"first query after start (model loaded): {starts[0][0] * 1000:.0f} ms wall, {starts[0][1] * 1000:.0f} ms"
          f" CPU ({first}); after a restart {starts[1][0] * 1000:.0f} ms wall, {starts[1][1] * 1000:.0f} ms CPU"
          f" (from the snapshot, if the cache is big enough to save); first query of the measuring engine"
          f" {cold * 1000:.0f} ms")  # fmt: skip
    for clock, title in (("wall", "wall ms"), ("cpu", "cpu ms")):
        rows = []
        for mode, s in samples[clock].items():
            row: list[object] = [mode]
            for phase in PHASES:
                row += [f"{c.p50(s[phase]):.1f}", f"{c.pct(s[phase], 95):.1f}"]
            rows.append([*row, *(f"{c.p50(s[part]):.1f}" for part in PARTS)])
        headers = [title] + [f"{p} {q}" for p in PHASES for q in ("p50", "p95")]
        print(c.table([*headers, *(f"{p} p50" for p in PARTS)], rows))
    print("results per query (mean): " + ", ".join(f"{m} {sum(r) / len(r):.1f}" for m, r in results.items()))
    for clock in ("wall", "cpu"):
        p95 = c.pct(samples[clock]["hybrid 0.7/0.3"]["total"], 95)
        goal = 25 if size <= 100_000 else 100
        print(f"hybrid p95 at {size} ({clock}): {p95:.1f} ms incl. query embedding; goal <= {goal} ms: "
              f"{'met' if p95 <= goal else 'NOT met'} here")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--embed-max", type=int, default=100_000, help="bigger sizes are grown, not embedded")
    parser.add_argument("--fast", action="store_true", help="only the smallest size, 100 queries")
    parser.add_argument("--queries", type=int, default=200, help="queries per size (each run 3 ways)")
    parser.add_argument("--build-threads", type=int, default=2, help="embedder threads while building")
    parser.add_argument("--rebuild", action="store_true", help="ignore cached corpora")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.fast:
        sizes, args.queries = sizes[:1], min(args.queries, 100)
    print(f"recall latency, embedded engine, {c.describe(c.bench_embedder())}, limit 10; {c.machine()}")
    print("wall time, then CPU time of the calling thread and of the timed calls it made on other threads;")
    print("rank = total - embed - search; load (store.get_episodes) and scopes (store.get_scope) are in rank;")
    print("a hybrid recall searches text while it embeds the query: its wall rank is total - the longer of the two")
    for size in sizes:
        directory = corpus(size, args.build_threads, args.rebuild, args.embed_max)
        texts = queries(args.queries, size)
        measure(directory, size, texts)
        ann_recall(directory, texts[:100])
        if size >= sqlite_text.BIG_TEXT:
            text_overlap(directory, texts[:100])


if __name__ == "__main__":
    main()
