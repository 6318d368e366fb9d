"""recall quality on a labelled set: recall@5, recall@10 and MRR per scoring and per category.

The set is bench/quality/dataset.jsonl (built by bench/quality/build.py: ~3,100 episodes and
240 queries over paraphrases, identifiers, dates and multi-session facts, with distractors).
The corpus goes through `remember` with the real LocalEmbedder and is cached under
bench/.cache/ keyed by the dataset, both SQLite schemas and the indexing code. Every query runs with limit 10 at
hybrid alpha/beta 0.7/0.3 (the default), 0.5/0.5 and 0.3/0.7, vector only and lexical only,
each with strictness balanced and precision (fallback stays on_empty, the default).
recall@k = share of a query's relevant episodes in its top k (a multi-session query has two);
MRR = 1 / rank of the first relevant episode in the top 10 (0 if none).

`--among N`: the set among N synthetic episodes (bench/recall.py's corpus of that size, built if
missing; N >= vector_cache.ANN_MIN_ROWS), where the vector channel searches its approximate index:
the default scoring and vector only, each with the approximate index and with exact search, on the
same files (the distractors lower both; the difference is the approximate index's).

    .venv/bin/python bench/quality.py [--misses "0.7/0.3 balanced"] [--rebuild] [--among 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import _common as c
import numpy as np

from mneme.adapters.sqlite import index as sqlite_index
from mneme.adapters.sqlite import store as sqlite_store
from mneme.language.text import GENERIC, STOPWORDS
from mneme.observability import metrics
from mneme.ports import Embedder, embed_query
from mneme.search_models import SearchFilter
from mneme.services.recall import RecallRequest, Scoring
from mneme.services.recall.anchors import anchor_words
from mneme.services.recall.stages import MIN_VECTOR

DATASET = c.ROOT / "bench" / "quality" / "dataset.jsonl"
INDEXING = c.ROOT / "shared" / "mneme" / "services" / "indexing.py"  # what an episode is indexed with
WEIGHTS = {"0.7/0.3": (0.7, 0.3), "0.5/0.5": (0.5, 0.5), "0.3/0.7": (0.3, 0.7), "vector": (1, 0),
           "lexical": (0, 1)}  # fmt: skip
STRICTNESS = ("balanced", "precision")
DEFAULT = "0.7/0.3 balanced"
CATEGORIES = ("paraphrase", "identifier", "date", "multi-session")


class MemoEmbedder:
    """The real embedder, remembering single texts: each query is embedded once, not ten times."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.memo: dict[str, np.ndarray] = {}
        self.queries: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != 1:
            return self.inner.embed(texts)
        if texts[0] not in self.memo:
            self.memo[texts[0]] = self.inner.embed(texts)
        return self.memo[texts[0]]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Recall's query vectors (`mneme.ports.embed_query`): e5's query prefix, MiniLM's plain embed."""
        for text in texts:
            if text not in self.queries:
                self.queries[text] = embed_query(self.inner, text)
        return np.stack([self.queries[text] for text in texts])


def load() -> tuple[list[dict], list[dict]]:
    lines = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines()]
    return [x for x in lines if x["type"] == "episode"], [x for x in lines if x["type"] == "query"]


def corpus(episodes: list[dict], rebuild: bool) -> tuple[Path, dict[str, str]]:
    """The engine directory and the map episode_id -> dataset id, ingested once and cached."""
    basis = DATASET.read_bytes() + (sqlite_store.SCHEMA + sqlite_index.SCHEMA).encode() + INDEXING.read_bytes()
    if c.local_model() != "all-MiniLM-L6-v2":  # another model's corpus is cached apart (MiniLM's key unchanged)
        basis += c.local_model().encode()
    return cached(c.CACHE / f"quality-{hashlib.sha256(basis).hexdigest()[:10]}", episodes, rebuild)


def among(size: int, episodes: list[dict], rebuild: bool) -> tuple[Path, dict[str, str]]:
    """The set remembered into a copy of bench/recall.py's corpus of `size` synthetic episodes, cached."""
    import recall as recall_bench

    base = recall_bench.corpus(size, threads=2, rebuild=False)
    return cached(c.CACHE / f"quality-among-{base.name}", episodes, rebuild, start_from=base)


def cached(
    final: Path, episodes: list[dict], rebuild: bool, start_from: Path | None = None
) -> tuple[Path, dict[str, str]]:
    """`final` holding the set remembered (into a copy of `start_from`, if given), built once."""
    if rebuild:
        shutil.rmtree(final, ignore_errors=True)
    if not (final / "ids.json").exists():
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        if start_from is not None:
            shutil.copytree(start_from, partial, ignore=shutil.ignore_patterns("*.vectors"))
        print(f"ingesting {len(episodes)} episodes into {final.relative_to(c.ROOT)} ...")
        eng = c.engine(partial, threads=2)
        ids = ingest(eng, episodes)
        eng.close()
        (partial / "ids.json").write_text(json.dumps(ids))
        partial.rename(final)
    return final, json.loads((final / "ids.json").read_text())


def ingest(eng: c.Engine, episodes: list[dict]) -> dict[str, str]:
    """Remember the set's episodes in batches of 100; the map episode_id -> dataset id."""
    ids: dict[str, str] = {}
    for start in range(0, len(episodes), 100):
        batch = episodes[start : start + 100]
        items = [
            c.item(e["content"], e["scope"], datetime.fromisoformat(e["occurred_at"]), e["session_id"], e["id"])
            for e in batch
        ]
        done = eng.services.remember.remember(c.CALLER, items)
        ids.update({r.episode_id: e["id"] for r, e in zip(done, batch, strict=True)})
    return ids


def ann_against_exact(directory: Path, ids: dict[str, str], queries: list[dict], inner: Embedder) -> None:
    """The default scoring and vector only, with the approximate vector index and with exact search."""
    from mneme.adapters.sqlite import vector_cache

    embedder = MemoEmbedder(inner)
    results: dict[str, list[dict]] = {}
    for ann in (True, False):
        eng = c.engine(directory, embedder=embedder, ann=ann)
        for name in (DEFAULT, "vector balanced"):
            weights, strictness = name.split()
            alpha, beta = WEIGHTS[weights]
            results[f"{name}, {'approximate' if ann else 'exact'}"] = run(eng, ids, queries, alpha, beta, strictness)
        cache = eng.index._caches.get(c.TENANT, embedder.model_id)
        kind = "exact search" if not ann else "its approximate index" if cache and cache.ann else "exact (no index)"
        print(f"{cache.rows if cache else 0} vectors, searched with {kind}")
        eng.close()
    print(summary(results, queries))
    for name in (DEFAULT, "vector balanced"):
        a, e = results[f"{name}, approximate"], results[f"{name}, exact"]
        gaps = ", ".join(f"{k} {mean(a, key) - mean(e, key):+.3f}" for k, key in (("R@5", "r5"), ("R@10", "r10"),
                                                                                 ("MRR", "rr")))  # fmt: skip
        print(f"{name}: approximate - exact: {gaps} (ANN_MIN_ROWS {vector_cache.ANN_MIN_ROWS})")


def run(eng: c.Engine, ids: dict[str, str], queries: list[dict], alpha: float, beta: float, strictness: str) -> list:
    scoring = Scoring(alpha=alpha, beta=beta, strictness=strictness)  # type: ignore[arg-type]
    rows: list[dict] = []
    for q in queries:
        response = eng.services.recall.recall(c.CALLER, RecallRequest(query=q["query"], scoring=scoring))
        metrics.clear_metrics()  # Powertools prints the set every 100 values otherwise
        scored(rows, [ids.get(r.id, r.id) for r in response.results], q)
    return rows


def evaluate(eng: c.Engine, ids: dict[str, str], queries: list[dict]) -> dict[str, list[dict]]:
    """Per config, per query: recall@5, recall@10, reciprocal rank and the top ids."""
    out: dict[str, list[dict]] = {}
    for weights, (alpha, beta) in WEIGHTS.items():
        for strictness in STRICTNESS:
            out[f"{weights} {strictness}"] = run(eng, ids, queries, alpha, beta, strictness)
    return out


def mean(rows: list[dict], key: str, where: str | None = None, field: str = "category") -> float:
    values = [r[key] for r in rows if where is None or r["q"][field] == where]
    return statistics.fmean(values) if values else float("nan")


def scored(rows: list[dict], top: list[str], q: dict) -> None:
    relevant = set(q["relevant"])
    ranks = [i for i, doc in enumerate(top, 1) if doc in relevant]
    rows.append({
        "q": q, "top": top, "rr": 1 / ranks[0] if ranks else 0.0,
        "r5": len(relevant & set(top[:5])) / len(relevant),
        "r10": len(relevant & set(top[:10])) / len(relevant),
    })  # fmt: skip


def summary(results: dict[str, list[dict]], queries: list[dict], kinds: Sequence[str] = ()) -> str:
    """Overall R@5, R@10, MRR, then R@10/MRR per category and per extra kind (query count in the header)."""
    groups = [("category", cat) for cat in CATEGORIES] + [("kind", kind) for kind in kinds]
    headers = ["scoring", "R@5", "R@10", "MRR"]
    headers += [f"{name} ({sum(q[field] == name for q in queries)})" for field, name in groups]
    rows = []
    for name, res in results.items():
        cells = [f"{mean(res, 'r10', g, field):.2f}/{mean(res, 'rr', g, field):.2f}" for field, g in groups]
        rows.append([name, f"{mean(res, 'r5'):.3f}", f"{mean(res, 'r10'):.3f}", f"{mean(res, 'rr'):.3f}", *cells])
    return c.table(headers, rows) + "\n(columns after MRR: R@10/MRR of that group of queries)"


def report(results: dict[str, list[dict]], queries: list[dict]) -> None:
    print(summary(results, queries))
    kinds = list(dict.fromkeys(q["kind"] for q in queries))
    balanced = [name for name in results if name.endswith("balanced")]
    print("\nrecall@10 by kind of query (strictness balanced)")
    kind_rows = [[kind, sum(q["kind"] == kind for q in queries),
                  *(f"{mean(results[n], 'r10', kind, 'kind'):.2f}" for n in balanced)]
                 for kind in kinds]  # fmt: skip
    print(c.table(["kind", "n", *(n.split()[0] for n in balanced)], kind_rows))
    score = {name: mean(res, "r10") + mean(res, "rr") for name, res in results.items()}
    best = max((n for n in results if not n.startswith(("vector", "lexical"))), key=score.__getitem__)
    b, d = results[best], results[DEFAULT]
    alpha, beta = WEIGHTS[best.split()[0]]
    print(
        f"\nrecommendation: alpha={alpha}, beta={beta}, strictness={best.split()[1]} "
        f"(R@10 {mean(b, 'r10'):.3f}, MRR {mean(b, 'rr'):.3f}; current default {DEFAULT}: "
        f"R@10 {mean(d, 'r10'):.3f}, MRR {mean(d, 'rr'):.3f})"
    )


VARIANTS = [  # fusion, weights, then flags: unicode = lexical query words kept whole (not ASCII-split),
    # fill = a candidate from one channel gets its true cosine instead of 0 for the vector channel
    "current 0.7/0.3", "current 0.7/0.3 unicode", "current 0.7/0.3 unicode fill",
    "current 0.5/0.5 unicode fill", "minmax 0.5/0.5 unicode", "minmax 0.5/0.5 unicode fill",
    "minmax 0.3/0.7 unicode fill", "rrf 0.5/0.5 unicode",
]  # fmt: skip


def what_if(eng: c.Engine, ids: dict[str, str], queries: list[dict]) -> None:
    """Re-rank the channels' candidates (k=50, balanced admission) with other fusions: a replica of
    RecallService._search/_rank ('current 0.7/0.3' must match the service), to size fixes first."""
    root = eng.services.scopes.resolve(c.TENANT, "root").scope.scope_id
    flt = SearchFilter(tenant=c.TENANT, ancestor_id=root, principal=c.CALLER.principal)
    out: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for q in queries:
        vec = embed_query(eng.embedder, q["query"])
        hits = eng.index.search_vector(flt, vec, eng.embedder.model_id, 50)
        v = {h.doc_id: max(0.0, h.score) for h in hits}
        words = {w for w in re.findall(r"[^\W_]+", q["query"].lower()) if w not in STOPWORDS | GENERIC}
        lexical = {
            uni: {h.doc_id: h.score for h in eng.index.search_text(flt, " ".join(sorted(ws)) or q["query"], 50)}
            for uni, ws in ((False, anchor_words(q["query"])), (True, words))
        }
        records = eng.services.store.get_episodes(
            c.TENANT, list(v.keys() | lexical[False].keys() | lexical[True].keys())
        )
        cosine = {d: max(0.0, float(np.dot(vec, e.vector))) for d, e in records.items()}
        for name in VARIANTS:
            how, weights, *flags = name.split()
            full = {d: cosine[d] for d in v.keys() | lexical["unicode" in flags].keys()} if "fill" in flags else v
            ranked = fuse(full, lexical["unicode" in flags], *WEIGHTS[weights], how)
            scored(out[name], [ids.get(d, d) for d in ranked], q)
    print("\nwhat-if, strictness balanced (replica of the ranking with candidate fixes; see VARIANTS)")
    print(summary(out, queries, kinds=("name (diacritics)", "order", "ticket", "topic+month")))


def fuse(v: dict[str, float], lex: dict[str, float], alpha: float, beta: float, how: str) -> list[str]:
    """The top 10 ids: current = alpha * cosine + beta * bm25 / top bm25 (missing channel = 0);
    minmax = the same with cosines scaled to [0, 1] over the candidates; rrf = reciprocal rank fusion."""
    top, lo, hi = (
        max(lex.values(), default=1.0) or 1.0,
        min(v.values(), default=0.0),
        max(v.values(), default=1.0),
    )
    vrank = {d: i for i, d in enumerate(sorted(v, key=v.__getitem__, reverse=True), 1)}
    lrank = {d: i for i, d in enumerate(sorted(lex, key=lex.__getitem__, reverse=True), 1)}
    scores = {}
    for d in (d for d in v.keys() | lex.keys() if d in lex or v[d] >= MIN_VECTOR):
        if how == "rrf":
            scores[d] = (alpha / (60 + vrank[d]) if d in v else 0) + (beta / (60 + lrank[d]) if d in lex else 0)
        else:
            vs = (v[d] - lo) / ((hi - lo) or 1) if how == "minmax" and d in v else v.get(d, 0.0)
            scores[d] = alpha * vs + beta * lex.get(d, 0.0) / top
    return sorted(scores, key=lambda d: (-round(scores[d], 6), d))[:10]


def show_misses(name: str, rows: list[dict], texts: dict[str, str]) -> None:
    print(f"\nmisses at top 10 for {name}:")
    for r in (r for r in rows if r["r10"] < 1):
        q = r["q"]
        print(f"- [{q['kind']}] {q['query']!r} wants {q['relevant']}: {texts[q['relevant'][0]][:70]!r}")
        for doc in r["top"][:3]:
            print(f"    got {doc}: {texts.get(doc, '?')[:90]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--misses", metavar="SCORING", help='print the misses of one scoring, e.g. "lexical balanced"')
    parser.add_argument("--what-if", action="store_true", help="also rank with candidate fusion fixes")
    parser.add_argument("--rebuild", action="store_true", help="re-ingest the corpus")
    parser.add_argument("--among", type=int, metavar="N", help="the set among N synthetic episodes (ANN vs exact)")
    args = parser.parse_args()
    episodes, queries = load()
    inner = c.bench_embedder()
    print(f"recall quality, embedded engine, {c.describe(inner)}, limit 10")
    print(f"{len(episodes)} episodes, {len(queries)} queries ({DATASET.relative_to(c.ROOT)})\n")
    if args.among:
        ann_against_exact(*among(args.among, episodes, args.rebuild), queries, inner)
        return
    directory, ids = corpus(episodes, args.rebuild)
    eng = c.engine(directory, embedder=MemoEmbedder(inner))
    results = evaluate(eng, ids, queries)
    report(results, queries)
    if args.what_if:
        what_if(eng, ids, queries)
    eng.close()
    if args.misses:
        show_misses(args.misses, results[args.misses], {e["id"]: e["content"] for e in episodes})


if __name__ == "__main__":
    main()
