"""The reasoner port, grounding, and the deterministic extractive reasoner (the local default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mneme.consolidation.claims import claims
from mneme.consolidation.models import Proposal, sentence
from mneme.text import terms


class Reasoner(Protocol):
    """Proposes one fact for a cluster of episode texts.

    Each text is `Speaker: text` when the episode names its speaker (in its text or its `speaker`
    metadata); a generative reasoner's texts also start with the day they occurred, `[2026-03-01] `.
    `feedback`, on a retry, says why the previous proposal was rejected. Transient failures raise
    `StoreUnavailable` / `Throttled`; output that is not a proposal raises `ReasonerOutputInvalid`.
    """

    name: str
    generative: bool  # generative reasoners may paraphrase; their verbatim copies are rejected

    def propose(self, texts: Sequence[str], feedback: str | None = None) -> Proposal: ...


def _supported(phrase: str, corpus: set[str]) -> bool:
    words = {word for word in terms(phrase) if len(word) > 1}  # "Maya's" → maya (the "s" is no word)
    return bool(words) and words <= corpus


def grounds(entity: str | None, value: str | None, text: str) -> bool:
    """Does `text` state a claim about `entity` with `value` (every word of both in it)? A claim fact's
    grounding turns are its sources that do: the ones recall may fold into it and shows beside it."""
    if not entity or not value:
        return False
    corpus = terms(text)
    return _supported(entity, corpus) and _supported(value, corpus)


def grounding_error(proposal: Proposal, texts: Sequence[str], *, generative: bool) -> str | None:
    """Why the cluster's text does not support the proposal, or None when it does."""
    if not proposal.summary.strip():
        return "the summary is empty"
    if proposal.sources is not None:
        wrong = sorted({n for n in proposal.sources if not 1 <= n <= len(texts)})
        if wrong or not proposal.sources:
            return f"sources must list the numbers (1 to {len(texts)}) of the episodes that state the fact"
        texts = [texts[n - 1] for n in sorted(set(proposal.sources))]  # grounded in what it cites
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


def central(texts: Sequence[str]) -> str:
    """The text sharing the most terms with the others (ties: the first)."""
    bags = [terms(text) for text in texts]

    def overlap(i: int) -> float:
        return sum(len(bags[i] & other) / max(len(bags[i] | other), 1) for j, other in enumerate(bags) if j != i)

    return texts[max(range(len(texts)), key=lambda i: (overlap(i), -i))]


def statement(text: str) -> tuple[str, str, str] | None:
    """The first claim the text states (see `mneme.consolidation.claims`), or None."""
    found = claims(text)
    return tuple(found[0]) if found else None  # type: ignore[return-value]


class ExtractiveReasoner:
    """No network, no model: entity/property/value from the first claim of the cluster's most central
    text (`mneme.consolidation.claims`: conversational patterns, speaker from a `Name:` prefix), the
    summary a sentence that states them ("Maya lives in Berlin."), never a copy of a turn. A cluster
    that states no claim gets no fact (`summary` only, which `reconcile` keeps as episodes)."""

    name = "extractive"
    generative = False

    def propose(self, texts: Sequence[str], feedback: str | None = None) -> Proposal:
        text = central(texts).strip()
        triple = None if feedback else statement(text)
        if triple is None:
            return Proposal(summary=text)
        entity, prop, value = triple
        return Proposal(entity=entity, property=prop, value=value, summary=sentence(entity, prop, value))
