"""Recall's time stage reads each earlier statement's updaters latest first (`time._latest_updaters`): the
winners, and their order, must be those of reading every pair in order of the later statement, the order
`time._reverted` then reads them in."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from mneme.services.recall.run import Candidate
from mneme.services.recall.time import _latest_updaters

Winners = dict[int, tuple[int, str, float]]


def every_pair(
    pool: list[Candidate],
    pairs: list[tuple[int, int]],
    vectors: dict[str, NDArray[np.float32]],
    reason: Callable[[int, int, float], str | None],
) -> Winners:
    """Every pair read in order, the last updater kept (the rule as first written)."""
    winner: Winners = {}
    for i, j in pairs:
        a, b = vectors.get(pool[i].id), vectors.get(pool[j].id)
        similarity = float(np.dot(a, b)) if a is not None and b is not None else 0.0
        if why := reason(i, j, similarity):
            winner[i] = (j, why, similarity)
    return winner


def by_floors(floors: dict[tuple[int, int], float]) -> Callable[[int, int, float], str | None]:
    """A rule that finds pair (i, j) an update from its floor's cosine on (2.0: never)."""
    return lambda i, j, similarity: f"{i}->{j}" if similarity >= floors[(i, j)] else None


def test_latest_first_finds_the_same_updaters_in_the_same_order() -> None:
    rng = random.Random(43)
    differently_ordered = 0
    for _ in range(400):
        size = rng.randint(2, 14)
        pool = [Candidate(f"ep_{n}") for n in range(size)]
        raw = {c.id: np.array([rng.gauss(0, 1) for _ in range(4)]) for c in pool if rng.random() < 0.9}
        vectors = {doc_id: (v / np.linalg.norm(v)).astype(np.float32) for doc_id, v in raw.items()}  # some none
        pairs = [(i, j) for j in range(size) for i in range(j) if rng.random() < 0.6]
        reason = by_floors({pair: rng.choice([-1.0, 0.0, 0.2, 0.5, 2.0]) for pair in pairs})
        expected = every_pair(pool, pairs, vectors, reason)
        found = _latest_updaters(pool, pairs, vectors, reason)
        assert list(found.items()) == list(expected.items())
        differently_ordered += list(expected) != sorted(expected)
    assert differently_ordered > 10  # the order of first updaters is not the earlier statements' own order
