"""Engram's anchor rule: a hit must share meaningful, stemmed terms with the query."""

from __future__ import annotations

import re

WORD_RE = re.compile(r"[^\W_]+")  # letters and digits of any script: "Müller" stays one word
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours
    """.split()
)
GENERIC = frozenset(
    """
    memory memories rule rules knowledge note notes remember recall info information thing
    """.split()
)
SUFFIXES = ("ingly", "edly", "ing", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    return {stem(word) for word in WORD_RE.findall(text.lower())}


def anchor_words(query: str) -> set[str]:
    """Meaningful query words: stopwords and generic memory words removed."""
    return {w for w in WORD_RE.findall(query.lower()) if w not in STOPWORDS and w not in GENERIC}


def anchors(query: str) -> set[str]:
    """Anchor words, lightly stemmed."""
    return {stem(word) for word in anchor_words(query)}


def anchor_hits(query_anchors: set[str], text: str) -> int:
    return len(query_anchors & terms(text))


def admits(query_anchors: set[str], text: str) -> bool:
    """Four or more anchors need two hits; fewer need one. No anchors at all admits nothing."""
    needed = 2 if len(query_anchors) >= 4 else 1
    return bool(query_anchors) and anchor_hits(query_anchors, text) >= needed
