"""Recall's profile signal: a question about what a person is like ("Would Ines enjoy a steakhouse
dinner?", "What does Dario care about in a job?") is answered by the turns where that person says what
they like, do and value, which share few words with the question.

When a query names a speaker of the scope's turns and asks about their tastes, habits or values
(`asks`), one more text search runs over that person's turns with the words people use to say so
("love", "hate", "miss", "always", "every", "joined"…): its hits join the candidates (`profile` channel,
under the same tenant, scope and filters), and every turn of that person that says one of those words
ranks PROFILE_BOOST times higher (`scores.profile`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mneme.language.text import stem, terms, words
from mneme.models import Episode
from mneme.services.indexing import speaker

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate

ASKS = re.compile(
    r"\b(would|likely|enjoy|prefer|rather|kind of|care|cares|value|values|like to|likes|personality|hobbies|"
    r"interests|feel about|feel at ease|put first|attitude)\b",
    re.IGNORECASE,
)
CUES = (
    "love loved like liked enjoy enjoyed hate hated miss prefer favourite favorite want dream always never every "
    "proud care important started joined practise practice hobby weekends fan afraid scared happy rather passion"
)
CUE_TERMS = frozenset(stem(word) for word in words(CUES))
PROFILE_HITS = 30  # the most turns of the person the profile search adds
PROFILE_BOOST = 1.5  # a turn of the person that says one of the cue words


def asks(query: str) -> bool:
    """Does the query ask what someone likes, values or would do?"""
    return ASKS.search(query) is not None


def search_words(query: str, names: set[str]) -> str:
    """The query's words that name the person (as written), and the cue words."""
    named = [word for word in words(query) if stem(word) in names]
    return " ".join([*named, CUES])


def says_about_self(candidate: Candidate, names: set[str]) -> bool:
    """A turn of a person the query names (`names`: their stemmed name words) that says a cue word."""
    record = candidate.record
    if not isinstance(record, Episode):
        return False
    who = speaker(record)
    return bool(who and terms(who) & names and terms(record.search_text or record.content) & CUE_TERMS)


def boost(candidate: Candidate, names: set[str]) -> None:
    if says_about_self(candidate, names):
        candidate.scores["profile"] = PROFILE_BOOST
        candidate.score *= PROFILE_BOOST
