"""remember throughput on the embedded engine (SQLite store + SQLite index + the configured local
embedder: MiniLM, or MNEME_EMBEDDER__MODEL=multilingual-e5-small).

Single-item calls and batches of 100 (one caller; and two callers at once, as a bulk importer
running two requests would), in episodes per second of wall time and of CPU time, with
the share of the wall time spent in `embedder.embed`, in the record store (put_episodes,
get_episodes, mark_indexed, get_scope) and in the index upsert; batches with 1 and 2 embedder
workers (concurrent length-bucketed batches, 1 onnxruntime thread each). The model's own
sentences/s on the same episodes (`_common.model_ceiling`, as in bench/embed.py) is measured in
the same run, and each row gives its rate as a share of that ceiling, per second of wall time and
per second of CPU time (the steadier figure on a shared machine). Each run starts from an
empty engine in a temp dir with the model loaded and warmed up;
episodes come from the synthetic generator in bench/_common.py. Figures only: the machine is
shared, so quote them, do not assert on them.

    .venv/bin/python bench/ingest.py [--singles 300] [--batches 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import CALLER, bench_embedder, describe, engine, machine, model_ceiling, p50, pct, synthetic_items, table

TARGET = 500  # episodes/s for batch ingest


def run(
    tmp: Path, name: str, workers: int, calls: int, per_call: int, offset: int, callers: int = 1
) -> dict[str, float]:
    """`calls` remember calls of `per_call` items each into a fresh engine, from `callers` threads at once
    (each its share of the calls, in order)."""
    eng = engine(tmp / name, threads=1, workers=workers)
    eng.embedder.embed(["warm up the model and the session"])
    eng.services.remember.remember(CALLER, synthetic_items(offset, 1))  # scopes, files, caches
    batches = [synthetic_items(offset + 1 + c * per_call, per_call) for c in range(calls)]
    eng.embedder.reset(), eng.index.reset(), eng.store.reset()
    latencies: list[float] = []

    def call_all(mine: list) -> None:
        for batch in mine:
            t0 = time.perf_counter()
            eng.services.remember.remember(CALLER, batch)
            latencies.append((time.perf_counter() - t0) * 1000)

    start, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(call_all, [batches[c::callers] for c in range(callers)]))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    eng.close()
    return {
        "rate": calls * per_call / wall,
        "cpu": calls * per_call / cpu,
        "embed": eng.embedder.total() / wall,
        "store": eng.store.total() / wall,
        "index": eng.index.seconds["upsert"] / wall,
        "p50": p50(latencies),
        "p95": pct(latencies, 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--singles", type=int, default=300, help="single-item remember calls per run")
    parser.add_argument("--batches", type=int, default=20, help="batches of 100 per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration (median reported)")
    args = parser.parse_args()
    print(f"remember throughput, embedded engine, {describe(bench_embedder())}; {machine()}")
    print(f"median of {args.repeats} runs per row; embed/store/index = share of the wall time in those calls;")
    print("ep/cpu-s = episodes per second of process CPU time (all threads; less sensitive to a busy machine)\n")
    configs = [  # label, embedder workers, calls, items per call, concurrent callers
        ("single items", 1, args.singles, 1, 1),
        ("batches of 100", 1, args.batches, 100, 1),
        ("batches of 100", 2, args.batches, 100, 1),
        ("2 callers x 100", 2, args.batches, 100, 2),
    ]
    texts = [item.content for item in synthetic_items(900_000, 400)]
    ceiling = {w: model_ceiling(texts, workers=w, runs=args.repeats) for w in (1, 2)}
    rows, rates = [], {}
    with tempfile.TemporaryDirectory(prefix="mneme-ingest-") as tmp:
        for label, threads, calls, per_call, callers in configs:
            runs = [
                run(Path(tmp), f"{per_call}-{threads}-{callers}-{r}", threads, calls, per_call, r * 100_000, callers)
                for r in range(args.repeats)
            ]
            med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            rates[(per_call, threads, callers)] = med["rate"]
            rows.append([
                label, threads, calls * per_call, f"{med['rate']:.0f}",
                f"{min(r['rate'] for r in runs):.0f}-{max(r['rate'] for r in runs):.0f}", f"{med['cpu']:.0f}",
                f"{med['embed']:.0%}", f"{med['store']:.0%}", f"{med['index']:.0%}",
                f"{med['p50']:.1f}", f"{med['p95']:.1f}", f"{med['rate'] / ceiling[threads].wall:.0%}",
                f"{med['cpu'] / ceiling[threads].cpu:.0%}",
            ])  # fmt: skip
    headers = ["mode", "workers", "episodes", "ep/s", "range", "ep/cpu-s", "embed", "store", "index"]
    print(table([*headers, "ms/call p50", "p95", "of model", "of model (cpu)"], rows))
    print(f"\nthe model's own sentences/s on these episodes (measured in this run): {ceiling[1].wall:.0f} with 1 "
          f"batch at a time, {ceiling[2].wall:.0f} with 2; per CPU-second {ceiling[1].cpu:.0f} and "
          f"{ceiling[2].cpu:.0f}; 'of model' = ep/s / that ceiling for the row's workers, '(cpu)' = ep/cpu-s / "
          f"the ceiling's texts/cpu-s")  # fmt: skip
    one, two, both = rates[(100, 1, 1)], rates[(100, 2, 1)], rates[(100, 2, 2)]
    print(
        f"batch ingest, one caller: {one:.0f} ep/s with 1 worker, {two:.0f} ep/s with 2 (x{two / one:.2f}); "
        f"target >= {TARGET} ep/s: {'met' if max(one, two) >= TARGET else 'NOT met'} on this run"
    )
    print(f"batch ingest, two callers at once (2 workers): {both:.0f} ep/s (embed/store/index shares add up over both)")
    print(f"single-item calls: {rates[(1, 1, 1)]:.0f} ep/s ({one / rates[(1, 1, 1)]:.1f}x slower than batches)")


if __name__ == "__main__":
    main()
