"""Engram's anchor rule: a hit must share meaningful, stemmed terms with the query."""

from __future__ import annotations

from mneme.language.text import query_words, stem, terms


def anchor_words(query: str) -> set[str]:
    """Meaningful query words: stopwords, generic memory words and a light verb before "to" removed."""
    return set(query_words(query))


def anchors(query: str) -> set[str]:
    """Anchor words, lightly stemmed."""
    return {stem(word) for word in anchor_words(query)}


def anchor_hits(query_anchors: set[str], text: str) -> int:
    return len(query_anchors & terms(text))


def admits(query_anchors: set[str], text: str, strong: str = "") -> bool:
    """Four or more anchors need two hits, or one hit on a strong field (`strong`: a memory's key,
    id, tags and triggers); fewer need one. No anchors at all admits nothing."""
    if not query_anchors:
        return False
    if len(query_anchors) < 4:
        return anchor_hits(query_anchors, text) >= 1
    return anchor_hits(query_anchors, text) >= 2 or anchor_hits(query_anchors, strong) >= 1
