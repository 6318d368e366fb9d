"""The reasoner port, grounding, and the deterministic extractive reasoner (the local default)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from mneme.consolidation.models import Proposal
from mneme.text import terms


class Reasoner(Protocol):
    """Proposes one fact for a cluster of episode texts.

    `feedback`, on a retry, says why the previous proposal was rejected. Transient failures raise
    `StoreUnavailable` / `Throttled`; output that is not a proposal raises `ReasonerOutputInvalid`.
    """

    name: str
    generative: bool  # generative reasoners may paraphrase; their verbatim copies are rejected

    def propose(self, texts: Sequence[str], feedback: str | None = None) -> Proposal: ...


def _supported(phrase: str, corpus: set[str]) -> bool:
    words = terms(phrase)
    return bool(words) and words <= corpus


def grounding_error(proposal: Proposal, texts: Sequence[str], *, generative: bool) -> str | None:
    """Why the cluster's text does not support the proposal, or None when it does."""
    if not proposal.summary.strip():
        return "the summary is empty"
    corpus = set().union(*(terms(text) for text in texts))
    if bool(proposal.entity) != bool(proposal.value) or (proposal.property and not proposal.entity):
        return "entity, property and value come together or not at all"
    if proposal.entity and not _supported(proposal.entity, corpus):
        return f"the entity {proposal.entity!r} does not appear in the episodes"
    if proposal.value and not _supported(proposal.value, corpus):
        return f"the value {proposal.value!r} does not appear in the episodes"
    if generative:
        summary = terms(proposal.summary)
        for text in texts:
            if summary and len(summary & terms(text)) / len(summary) > 0.8 and len(texts) > 1:
                return "the summary copies one episode nearly verbatim; summarise the cluster instead"
    return None


PATTERNS = (
    re.compile(
        r"^(?P<entity>[A-Z][\w&.' -]{1,60}?)'s (?P<property>[A-Za-z][\w -]{1,40}?) "
        r"(?:is|are|was|were|is now|has changed to|changed to|moved to) (?P<value>[^.;]{1,80})"
    ),
    re.compile(
        r"^The (?P<property>[A-Za-z][\w -]{1,40}?) (?:of|for) (?P<entity>[A-Z][\w&.' -]{1,60}?) "
        r"(?:is|are|was|were|is now) (?P<value>[^.;]{1,80})"
    ),
)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
QUALIFIER = re.compile(r"[,;(]|\s(?:since|from|as of|until|because|according to|now|currently|again)\b", re.I)


def clean_value(value: str) -> str:
    """The value up to the first qualifier: 'flat rate, Sam confirmed' and 'flat rate since 2024' → 'flat rate'."""
    return QUALIFIER.split(value, maxsplit=1)[0].strip(" .")


def central(texts: Sequence[str]) -> str:
    """The text sharing the most terms with the others (ties: the first)."""
    bags = [terms(text) for text in texts]

    def overlap(i: int) -> float:
        return sum(len(bags[i] & other) / max(len(bags[i] | other), 1) for j, other in enumerate(bags) if j != i)

    return texts[max(range(len(texts)), key=lambda i: (overlap(i), -i))]


def statement(text: str) -> tuple[str, str, str] | None:
    """(entity, property, value), normalised, when exactly one sentence states one unambiguously."""
    matches = [m for sentence in SENTENCE.split(text.strip()) for p in PATTERNS if (m := p.match(sentence.strip()))]
    if len(matches) != 1 or not (value := clean_value(matches[0]["value"])):
        return None
    found = matches[0]
    return found["entity"].strip(), found["property"].strip(), value


class ExtractiveReasoner:
    """No network, no model: the summary is the cluster's most central text; entity/property/value
    only when exactly one sentence of it matches one unambiguous pattern."""

    name = "extractive"
    generative = False

    def propose(self, texts: Sequence[str], feedback: str | None = None) -> Proposal:
        summary = central(texts).strip()
        triple = None if feedback else statement(summary)
        if triple is None:
            return Proposal(summary=summary)
        entity, prop, value = triple
        return Proposal(entity=entity, property=prop, value=value, summary=summary)
