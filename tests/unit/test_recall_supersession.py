"""Recall's time stage reads each earlier statement's updaters latest first (`time._latest_updaters`): the
winners, and their order, must be those of reading every pair in order of the later statement, the order
`time._reverted` then reads them in."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from numpy.typing import NDArray

from mneme.models import Episode
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


def note(n: int, session: str) -> Candidate:
    at = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(days=n)
    record = Episode(
        tenant="t",
        episode_id=f"ep_{n}",
        scope_id="s",
        content=f"note {n}",
        content_hash=str(n),
        occurred_at=at,
        created_at=at,
        author="a",
        session_id=session,
    )
    return Candidate(record.episode_id, record=record)


@pytest.mark.parametrize(("sessions", "kept"), [(("s1", "s2", "s2"), 1), (("s1", "s2", "s3"), 2)])
def test_of_two_updates_in_one_conversation_the_one_about_the_subject_itself_wins(
    sessions: tuple[str, str, str], kept: int
) -> None:
    """ "Go-live brought forward to 2 September" and "Training moved to the last week of August", two notes of
    one meeting, both update "go-live 30 September": the change of its own subject wins, not the later note;
    a later conversation's update wins whatever it says."""
    pool = [note(n, session) for n, session in enumerate(sessions)]
    reasons = {(0, 1): "deadline: brought forward", (0, 2): "same answer: moved"}
    found = _latest_updaters(pool, list(reasons), {}, lambda i, j, _: reasons.get((i, j)))
    assert found[0][0] == kept
