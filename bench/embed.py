"""LocalEmbedder throughput: single texts and batches of 64, with 1 and 2 onnxruntime threads.

Run from the repository root: `.venv/bin/python bench/embed.py [--runs 5] [--singles 64]`.
Each figure is the median over the runs of texts per second; model loading and a warm-up
call are excluded.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "shared"))

from mneme.adapters.embedders import LocalEmbedder

_SUBJECTS = ["The user", "Our team", "The deploy pipeline", "The billing service", "Alice", "The agent"]
_VERBS = ["prefers", "runs", "rejects", "remembers", "depends on", "was migrated to"]
_OBJECTS = [
    "dark mode in every editor",
    "deploys on Tuesdays after the stand-up, never on Fridays",
    "PostgreSQL 16 with logical replication to the analytics cluster",
    "short answers with links to the source",
    "a retry budget of three attempts with exponential backoff",
    "the staging account in eu-west-1",
]


def make_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}." for _ in range(n)]


def median_rate(work: Callable[[], None], texts_per_run: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        rates.append(texts_per_run / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--singles", type=int, default=64, help="single-text calls per run")
    args = parser.parse_args()

    batch = make_texts(64)
    singles = make_texts(args.singles, seed=11)
    print(f"LocalEmbedder ({LocalEmbedder.model_id}), median of {args.runs} runs, texts/s")
    print(f"{'threads':>7}  {'single text':>12}  {'batch of 64':>12}")
    for threads in (1, 2):
        embedder = LocalEmbedder(intra_op_num_threads=threads)
        embedder.embed(batch)  # load the model and warm up

        def one_at_a_time(embedder: LocalEmbedder = embedder) -> None:
            for text in singles:
                embedder.embed([text])

        def one_batch(embedder: LocalEmbedder = embedder) -> None:
            embedder.embed(batch)

        single_rate = median_rate(one_at_a_time, len(singles), args.runs)
        batch_rate = median_rate(one_batch, len(batch), args.runs)
        print(f"{threads:>7}  {single_rate:>12.1f}  {batch_rate:>12.1f}")


if __name__ == "__main__":
    main()
