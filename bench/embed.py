"""LocalEmbedder throughput against the model's own ceiling on this machine.

The model's own sentences/s: onnxruntime alone on the bench episodes (bench/_common.py),
tokenized beforehand, sorted by length, batches of 32, 1 intra-op thread, with 1 and 2 batches
at a time (`_common.model_ceiling`). Then `LocalEmbedder.embed` on the same texts: single texts,
and batches of 100 with 1 and 2 workers (its concurrent length-bucketed batches), as a share of
that ceiling. Each figure is the median over the runs; model loading and a warm-up are excluded.
bench/ingest.py reports remember's rate against the same ceiling.

    .venv/bin/python bench/embed.py [--runs 5] [--singles 64] [--texts 400]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _common import LocalEmbedder, machine, model_ceiling, synthetic, table


def median_rate(work: Callable[[], None], texts_per_run: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        rates.append(texts_per_run / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--singles", type=int, default=64, help="single-text calls per run")
    parser.add_argument("--texts", type=int, default=400, help="bench episodes per batched run (batches of 100)")
    args = parser.parse_args()
    texts = [synthetic(i)[3] for i in range(args.texts)]
    print(f"LocalEmbedder ({LocalEmbedder.model_id}); {machine()}; median of {args.runs} runs, texts/s")
    ceiling = {w: model_ceiling(texts, workers=w, runs=args.runs) for w in (1, 2)}
    rows: list[list[object]] = [[f"the model's own ceiling, {w} batch(es) at a time", f"{r:.0f}", "100%"]
                                for w, r in ceiling.items()]  # fmt: skip
    single = LocalEmbedder(workers=1)
    single.embed(texts[:8])

    def one_at_a_time() -> None:
        for text in texts[: args.singles]:
            single.embed([text])

    rate = median_rate(one_at_a_time, args.singles, args.runs)
    rows.append(["LocalEmbedder, single texts", f"{rate:.0f}", f"{rate / ceiling[1]:.0%}"])
    for workers in (1, 2):
        embedder = LocalEmbedder(workers=workers)
        embedder.embed(texts[:100])

        def batches(embedder: LocalEmbedder = embedder) -> None:
            for start in range(0, len(texts), 100):
                embedder.embed(texts[start : start + 100])

        rate = median_rate(batches, len(texts), args.runs)
        rows.append([f"LocalEmbedder, batches of 100, {workers} worker(s)", f"{rate:.0f}",
                     f"{rate / ceiling[workers]:.0%}"])  # fmt: skip
    print(table(["what", "texts/s", "of ceiling"], rows))
    print(f"\nthe model's own sentences/s here: {ceiling[1]:.0f} (1 thread), {ceiling[2]:.0f} (2 at a time)")


if __name__ == "__main__":
    main()
