"""Words, stopwords and light stemming: the one definition of a meaningful query term.

Used by recall's anchor rule, by the search indexes when they build a text query, and by
consolidation's grounding check, so "the", "memory" or "rule" mean nothing anywhere.
"""

from __future__ import annotations

import functools
import itertools
import re
from datetime import datetime

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
LIGHT_VERBS = frozenset("get gets got getting go goes went".split())  # "get to work": the place says it
SUFFIXES = ("ingly", "edly", "ing", "ed", "es", "ly", "s")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")  # fmt: skip
MONTH = "|".join(MONTHS)  # a month's name, for a regex
CLOCK = re.compile(  # a time of day: "6:15", "7pm", "half seven", "quarter past six", "noon"
    r"\b\d{1,2}[:.]\d{2}\b|\b\d{1,2} ?(?:am|pm)\b|\bhalf (?:past )?[a-z]+\b|\bquarter (?:past|to)\b|"
    r"\b(?:noon|midday|midnight|o'clock)\b"
)


def words(text: str) -> list[str]:
    """Lower-cased words, in order."""
    return WORD_RE.findall(text.lower())


@functools.lru_cache(maxsize=1 << 15)  # recall stems every word of a hundred candidates a query: once a word
def stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    """Every word of `text`, lightly stemmed."""
    return {stem(word) for word in words(text)}


def meaningful_words(text: str) -> list[str]:
    """Words that can anchor or score a query: stopwords and generic memory words removed, order kept."""
    return [w for w in words(text) if w not in STOPWORDS and w not in GENERIC]


def query_words(text: str) -> list[str]:
    """A query's words to search by: its meaningful words but a light verb before "to" ("How does Leena get to
    work?" searches "leena work"; "get married" keeps "get"), all of them when nothing else is left."""
    every = words(text)
    light = {w for w, then in itertools.pairwise(every) if w in LIGHT_VERBS and then == "to"}
    meaningful = meaningful_words(text)
    return [w for w in meaningful if w not in light] or meaningful


def search_words(text: str) -> list[str]:
    """The words a text index searches a query by, once each: its `query_words`, every word when none is left."""
    return list(dict.fromkeys(query_words(text) or words(text)))


def date_words(when: datetime) -> str:
    """A date in the words a query may use: '2026-03-04 Wednesday 4 March 2026'."""
    return f"{when:%Y-%m-%d} {when:%A} {when.day} {when:%B %Y}"
