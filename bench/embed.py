"""The local embedder's throughput against the model's own ceiling on this machine, and its memory.

The configured local model (MNEME_EMBEDDER__MODEL: all-MiniLM-L6-v2 by default, or
multilingual-e5-small). The model's own sentences/s: the model alone on the bench episodes
(bench/_common.py), sorted by length, batches of 16 (the embedder's), one thread each, 1 and 2 batches at a time
(`_common.model_ceiling`). Then the embedder on the same texts: batches of 100 with 1 and 2
workers (its concurrent length-bucketed batches), as a share of that ceiling, and for MiniLM the
share of those calls' wall time its 2 workers spend in the model; and single queries
(recall's query embedding, `mneme.ports.embed_query`) in ms per query. Every figure is given per
second of wall time and per second of the process's CPU time (all threads): the machine is
shared, so the CPU figure and the ratios are the steady ones. The measurements are interleaved
round by round (the load drifts alike for all), and each is the median over the rounds; loading
and a warm-up are excluded. `--rss` adds the peak resident memory of a fresh process that loads
the model and embeds 100 texts, against the same process before it loads the model.
bench/ingest.py reports remember's rate against the same ceiling.

    .venv/bin/python bench/embed.py [--runs 5] [--singles 64] [--texts 400] [--rss]
    MNEME_EMBEDDER__MODEL=multilingual-e5-small .venv/bin/python bench/embed.py --runs 3 --rss
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import _common as c

from mneme.ports import embed_query


def rss_mb() -> float:
    """The resident memory now (Linux), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def rss_child() -> None:
    """Run in a fresh process: RSS after imports, after loading the model and embedding, and the peak."""
    before = rss_mb()
    c.bench_embedder().embed([c.synthetic(i)[3] for i in range(100)])
    print(f"{before:.0f} {rss_mb():.0f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


def busy_share(embedder: object, texts: list[str]) -> float:
    """The share of the wall time of MiniLM calls of 100 texts that its workers spend in the model: 1.0
    when they start together and end together (the rest is tokenizing, and a worker waiting for another)."""
    from mneme.adapters.models import embedders

    spent: list[float] = []
    lock = threading.Lock()
    original = embedders._LocalModel.encode_ids

    def timed(model: object, batch: object) -> object:
        start = time.perf_counter()
        try:
            return original(model, batch)  # type: ignore[arg-type]
        finally:
            with lock:
                spent.append(time.perf_counter() - start)

    embedders._LocalModel.encode_ids = timed  # type: ignore[method-assign,assignment]
    try:
        start = time.perf_counter()
        for first in range(0, len(texts), 100):
            embedder.embed(texts[first : first + 100])  # type: ignore[attr-defined]
        wall = time.perf_counter() - start
    finally:
        embedders._LocalModel.encode_ids = original  # type: ignore[method-assign]
    return sum(spent) / (embedder.workers * wall)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds (each measures every row once)")
    parser.add_argument("--singles", type=int, default=64, help="single queries per round")
    parser.add_argument("--texts", type=int, default=400, help="bench episodes per batched run (batches of 100)")
    parser.add_argument("--rss", action="store_true", help="also measure the model's memory in a fresh process")
    parser.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        return rss_child()
    texts = [c.synthetic(i)[3] for i in range(args.texts)]
    embedders = {w: c.bench_embedder(workers=w) for w in (1, 2)}
    single = embedders[1]
    print(f"local embedder {c.describe(single)}; {c.machine()}; median of {args.runs} interleaved rounds")
    for embedder in embedders.values():
        embedder.embed(texts[:100])
    rounds: dict[str, list[c.Rate]] = {}
    query_wall: list[float] = []
    query_cpu: list[float] = []
    busy: list[float] = []
    minilm = c.local_model() == "all-MiniLM-L6-v2"

    def batches(workers: int) -> Callable[[], None]:
        def run() -> None:
            for start in range(0, len(texts), 100):
                embedders[workers].embed(texts[start : start + 100])

        return run

    for _ in range(args.runs):
        for w in (1, 2):
            rounds.setdefault(f"ceiling {w}", []).append(c.model_ceiling(texts, workers=w, runs=1))
            rounds.setdefault(f"embedder {w}", []).append(c.measure(batches(w), len(texts), 1))
        if minilm:
            busy.append(busy_share(embedders[2], texts))
        for text in texts[: args.singles]:
            start, cpu = time.perf_counter(), time.process_time()
            embed_query(single, text)
            query_wall.append((time.perf_counter() - start) * 1000)
            query_cpu.append((time.process_time() - cpu) * 1000)
    med = {k: c.Rate(statistics.median(r.wall for r in v), statistics.median(r.cpu for r in v))
           for k, v in rounds.items()}  # fmt: skip
    rows: list[list[object]] = []
    for w in (1, 2):
        ceiling, mine = med[f"ceiling {w}"], med[f"embedder {w}"]
        rows.append([f"the model's own ceiling, {w} batch(es) at a time", f"{ceiling.wall:.0f}", f"{ceiling.cpu:.0f}",
                     "100%", "100%"])  # fmt: skip
        rows.append([f"embedder, batches of 100, {w} worker(s)", f"{mine.wall:.0f}", f"{mine.cpu:.0f}",
                     f"{mine.wall / ceiling.wall:.0%}", f"{mine.cpu / ceiling.cpu:.0%}"])  # fmt: skip
    print(c.table(["what", "texts/s", "texts/cpu-s", "of ceiling (wall)", "of ceiling (cpu)"], rows))
    if busy:
        print(f"\n2 workers, calls of 100 texts: the workers are in the model {statistics.median(busy):.1%} of the "
              "call's wall time (the steadier figure: the ceiling and the embedder run minutes apart)")  # fmt: skip
    print(
        f"\nsingle queries (recall's query embedding): p50 {c.p50(query_wall):.1f} / p95 {c.pct(query_wall, 95):.1f} ms"
        f" wall, p50 {c.p50(query_cpu):.1f} / p95 {c.pct(query_cpu, 95):.1f} ms CPU"
    )
    one, two = med["ceiling 1"], med["ceiling 2"]
    print(f"the model's own sentences/s here: {one.wall:.0f} (1 thread), {two.wall:.0f} (2 at a time); "
          f"per CPU-second {one.cpu:.0f}, i.e. at most ~{one.cpu * (os.cpu_count() or 1):.0f}/s on "
          f"{os.cpu_count()} idle cores")  # fmt: skip
    if args.rss:
        out = subprocess.run([sys.executable, __file__, "--rss-child"], capture_output=True, text=True, check=True)
        before, after, peak = (float(x) for x in out.stdout.split())
        print(f"RSS of a fresh process: {before:.0f} MB after imports, {after:.0f} MB after loading the model "
              f"and embedding 100 texts (+{after - before:.0f} MB; peak {peak:.0f} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
