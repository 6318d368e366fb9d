"""The reasoner port and the deterministic extractive reasoner (the local default); grounding is in
`mneme.grounding`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mneme.consolidation.claims import claims
from mneme.grounding import central
from mneme.records import Proposal, sentence


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
