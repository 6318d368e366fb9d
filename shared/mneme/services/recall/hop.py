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
tenant, scope and filters as every other candidate: a link admits, it never searches.

A chained question ("in which city does Hiroshi's granddaughter live") finds a first turn that names
someone or something the question does not ("Yui lives with my son Takeshi"); the second turn names it
again ("Takeshi came from Osaka"). `name_links`: the names (capitalised words inside a sentence, not
a weekday or month, not a speaker, not a word of the query) of the NAME_SOURCES best admitted hits
are looked for in the other candidates; an episode or fact that mentions one and stays related to
the query (cosine >= LINK_FLOOR) ranks NAME_BOOST times its score, never above the weakest of those
hits, and is admitted as linked if the rule had rejected it.

A question about a time window ("in 2023") is answered by the window, so it links nothing. The admit
stage's trace names each linked candidate and its source (`linked`, `named`) and the names followed
(`names`); a candidate's `scores` carry the link's cosine (`linked`) or the name factor (`named`).
(`reach` picks the sources and the candidates that may link; the admit stage reads their vectors.)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from mneme.language.text import MONTHS, STOPWORDS, stem, terms
from mneme.models import Episode, Memory
from mneme.services.recall.records import record_text

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

LINK_SOURCES = 5  # the best admitted hits a candidate may link to
LINK_COSINE = 0.6  # stored-vector cosine between a candidate and a source
LINK_PER_SOURCE = 3  # the closest candidates one source may bring in (a weak hit cannot flood the pack)
LINK_FLOOR = 0.15  # a linked candidate's own cosine with the query
LINK_BOOST = 2.0  # a linked candidate's score factor (capped at the weakest source's score)
NAME_SOURCES = 3  # the best admitted hits whose names are followed
NAME_BOOST = 1.2  # a candidate naming one of them (capped at the weakest of those hits' score)
NAME = re.compile(r"[^\W\d_][^\W_]{2,}")  # a word of three or more characters, starting with a letter
NOT_NAMES = STOPWORDS | frozenset("monday tuesday wednesday thursday friday saturday sunday".split()) | set(MONTHS)
SENTENCE_END = '.!?:"“'  # a capitalised word after these (or first in the text) starts a sentence


def reach(
    run: Run, admitted: list[Candidate], rejected: list[Candidate], min_vector: float
) -> tuple[list[Candidate], list[Candidate]]:
    """The sources (the best admitted hits found by meaning) and the rejected candidates that may link
    to them; nothing on precision or recall strictness, without a query vector or for a time window."""
    if not followable(run):
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
    close: list[tuple[float, Candidate, str]] = []
    for candidate in near:
        vector = _vector(run, candidate)
        if vector is None:
            continue
        cosine, source = max((float(np.dot(vector, v)), s.id) for s, v in stored)
        if cosine >= LINK_COSINE:
            close.append((cosine, candidate, source))
    links: dict[str, str] = {}
    brought = dict.fromkeys((s.id for s, _ in stored), 0)
    for cosine, candidate, source in sorted(close, key=lambda each: (-each[0], each[1].id)):
        if brought[source] >= LINK_PER_SOURCE:  # what the hit needs, not everything near it
            continue
        brought[source] += 1
        links[candidate.id] = source
        candidate.scores["linked"] = round(cosine, 6)
        candidate.score = max(candidate.score, min(candidate.score * LINK_BOOST, ceiling))
    return links


def _vector(run: Run, candidate: Candidate) -> NDArray[np.float32] | None:
    stored = getattr(candidate.record, "vector", None)
    if stored is None or getattr(candidate.record, "model_id", None) != run.deps.embedder.model_id:
        return None
    return np.asarray(stored, dtype=np.float32)


def followable(run: Run) -> bool:
    """Links are made on balanced strictness, with a query vector, for a question naming no time window."""
    return run.scoring.strictness == "balanced" and run.query_vector is not None and run.when.since is None


def name_links(
    run: Run, passed: list[Candidate], rejected: list[Candidate], speakers: set[str]
) -> tuple[dict[str, str], list[str]]:
    """Candidates naming what one of the best hits names (see the module): the candidate's id -> the
    hit's id, and the names followed. `speakers` (stemmed) are never followed: the speaker rule has them."""
    ranked = sorted(passed, key=lambda c: (-c.score, c.id))[:NAME_SOURCES]
    if not ranked:
        return {}, []
    asked = terms(run.request.query or "")
    followed: dict[str, str] = {}
    for hit in ranked:
        for name in _names(hit) - asked - speakers:
            followed.setdefault(name, hit.id)
    if not followed:
        return {}, []
    ceiling = ranked[-1].score
    best = {c.id for c in ranked}
    links: dict[str, str] = {}
    for candidate in [*passed, *rejected]:
        if candidate.id in best or isinstance(candidate.record, Memory) or candidate.vector < LINK_FLOOR:
            continue
        text = _text(candidate)
        lowered = text.lower()
        if not any(name in lowered for name in followed):  # a cheap test before stemming every word
            continue
        shared = sorted(terms(text) & followed.keys())
        if shared:
            links[candidate.id] = followed[shared[0]]
            candidate.scores["named"] = NAME_BOOST
            candidate.score = max(candidate.score, min(candidate.score * NAME_BOOST, ceiling))
    return links, sorted(followed)


def _names(candidate: Candidate) -> set[str]:
    """Capitalised words inside a sentence (not its first word), weekdays and months left out; stemmed."""
    text = _text(candidate)
    found = set()
    for match in NAME.finditer(text):
        word, before = match.group(), text[max(0, match.start() - 4) : match.start()].rstrip()
        if word[0].isupper() and before and before[-1] not in SENTENCE_END and word.lower() not in NOT_NAMES:
            found.add(stem(word.lower()))
    return found


def _text(candidate: Candidate) -> str:
    """What a candidate says: an episode's own words (no speaker, no date words), else its record text."""
    record = candidate.record
    assert record is not None
    return (record.search_text or record.content) if isinstance(record, Episode) else record_text(record)
