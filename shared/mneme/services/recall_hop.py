"""Recall's second hop: candidates linked to the best hits.

A question that joins facts ("which cities has Ines lived in", "why was the game delayed each time")
is answered by several items that say related things in different words. The best hits carry the
query's meaning; the other answers are often close to those hits but under the query's own
cosine bar. `link` runs inside the admit stage, on balanced strictness only: a candidate that the
rule did not admit is admitted as `linked` when

  - it is an episode or a fact (like the vector rule, a link never admits a curated memory),
  - it stays related to the query (cosine >= LINK_FLOOR), and
  - its stored vector is close (cosine >= LINK_COSINE) to one of the LINK_SOURCES best admitted
    hits that the query's meaning found (their own cosine >= MIN_VECTOR).

A linked candidate ranks LINK_BOOST times its own score, never above the weakest of those sources
(a link does not outrank the hits it came through). It comes from the same channels, under the same
tenant, scope and filters as every other candidate: a link admits, it never searches. A question
about a time window ("in 2023") is answered by the window, so it links nothing. The admit stage's
trace names each linked candidate and its source (`linked`); its `scores` carry the link's cosine.
(`reach` picks the sources and the candidates that may link; the admit stage reads their vectors.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from mneme.models import Memory

if TYPE_CHECKING:
    from mneme.services.recall_stages import Candidate, Run

LINK_SOURCES = 5  # the best admitted hits a candidate may link to
LINK_COSINE = 0.5  # stored-vector cosine between a candidate and a source
LINK_FLOOR = 0.15  # a linked candidate's own cosine with the query
LINK_BOOST = 2.0  # a linked candidate's score factor (capped at the weakest source's score)


def reach(
    run: Run, admitted: list[Candidate], rejected: list[Candidate], min_vector: float
) -> tuple[list[Candidate], list[Candidate]]:
    """The sources (the best admitted hits found by meaning) and the rejected candidates that may link
    to them; nothing on precision or recall strictness, without a query vector or for a time window."""
    if run.scoring.strictness != "balanced" or run.query_vector is None or run.when.since is not None:
        return [], []
    near = [c for c in rejected if not isinstance(c.record, Memory) and c.vector >= LINK_FLOOR]
    if not near:
        return [], []
    best = sorted(admitted, key=lambda c: (-c.score, c.id))[:LINK_SOURCES]
    sources = [c for c in best if c.vector >= min_vector]
    return (sources, near) if sources else ([], [])


def link(run: Run, sources: list[Candidate], near: list[Candidate]) -> dict[str, str]:
    """Admit the candidates of `near` linked to a source (their records loaded with vectors): the
    linked candidate's id -> its source's id. Scores and `scores` are updated (see the module)."""
    stored = [(source, vector) for source in sources if (vector := _vector(run, source)) is not None]
    if not stored:
        return {}
    ceiling = min(source.score for source, _ in stored)
    links: dict[str, str] = {}
    for candidate in near:
        vector = _vector(run, candidate)
        if vector is None:
            continue
        cosine, source = max((float(np.dot(vector, v)), s.id) for s, v in stored)
        if cosine >= LINK_COSINE:
            links[candidate.id] = source
            candidate.scores["linked"] = round(cosine, 6)
            candidate.score = max(candidate.score, min(candidate.score * LINK_BOOST, ceiling))
    return links


def _vector(run: Run, candidate: Candidate) -> NDArray[np.float32] | None:
    stored = getattr(candidate.record, "vector", None)
    if stored is None or getattr(candidate.record, "model_id", None) != run.deps.embedder.model_id:
        return None
    return np.asarray(stored, dtype=np.float32)
