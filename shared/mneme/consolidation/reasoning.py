"""The reasoner port and the deterministic extractive reasoner (the local default); grounding is in
`mneme.language.grounding`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from mneme.consolidation.claims.window import Claim, window_claims
from mneme.language.grounding import supported
from mneme.language.text import terms
from mneme.records import KnownFact, Proposal, Reading, Turn, norm, sentence

CHARS_PER_TOKEN = 3.5  # English prose in a Claude-class tokenizer, about; for budgets and estimates only
TURN_OVERHEAD = 12  # tokens a turn adds beyond its text: its number, time and speaker


def tokens(text: str) -> int:
    """An estimate of the tokens `text` takes (a window's budget, a prompt's price): no tokenizer is shipped."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class Reasoner(Protocol):
    """Reads one window of a scope's turns (a session, or a day without sessions, in order) and proposes the
    facts it states, in one call.

    `turns` are numbered from 1 in the order they were said, each with its speaker (who owns "I" and "my")
    and time; `known` are the scope's current facts on the window's subjects, each under a key ("F1") that a
    proposal updating it names in `supersedes`; `feedback`, on a retry, says why the previous answer was
    refused. Every proposal cites the turns that state it (`Proposal.sources`); the extract stage checks
    each against the turns it cites and keeps the ones that hold. Transient failures raise
    `StoreUnavailable` / `Throttled`; an answer that is not a reading at all raises `ReasonerOutputInvalid`
    (one whose parts are partly invalid keeps the valid ones and lists the rest in `Reading.problems`).
    """

    name: str
    generative: bool  # a model that paraphrases: its summaries of several turns may become facts

    def propose(
        self, turns: Sequence[Turn], known: Sequence[KnownFact] = (), feedback: str | None = None
    ) -> Reading: ...


def turn_claims(turns: Sequence[Turn]) -> list[tuple[int, Claim]]:
    """Every claim of the window, with the index of the turn that states it: the turns read in order with
    their speakers (`mneme.consolidation.claims.window.window_claims`: the speaker owns "I" and "my"; an answer to
    the question just asked, or "he"/"she" with one person just named, read with the turn before it)."""
    return window_claims([(turn.speaker, turn.said()) for turn in turns])


LOOK_BACK = 6  # turns before a claim's own that it may cite for the words it takes from them


class ExtractiveReasoner:
    """No network, no model: the claims each turn states with its speaker (`turn_claims`), one proposal per
    distinct claim citing every turn that states it, its summary the sentence that states it ("Maya lives in
    Berlin."), never a copy of a turn. A claim read with the turns before it ("She's a paramedic." after
    Sofia was named) cites those that give its entity or value too (`cited`). A turn that states no claim
    gives nothing: it stays an episode. It proposes no supersession by key: reconcile supersedes a claim of
    the same entity and property."""

    name = "extractive"
    generative = False

    def propose(self, turns: Sequence[Turn], known: Sequence[KnownFact] = (), feedback: str | None = None) -> Reading:
        found: dict[tuple[str, str, str], Proposal] = {}
        for index, (entity, prop, value) in turn_claims(turns):
            key = (norm(entity), norm(prop), norm(value))
            held = found.get(key)
            if held is None:
                summary = sentence(entity, prop, value)
                found[key] = Proposal(entity=entity, property=prop, value=value, summary=summary, sources=[])
                held = found[key]
            held.sources[:] = sorted({*held.sources, *cited(turns, index, entity, value)})
        return Reading(facts=list(found.values()))


def cited(turns: Sequence[Turn], index: int, entity: str, value: str) -> list[int]:
    """The numbers of the turns a claim of turn `index` rests on: its own, and the nearest of the LOOK_BACK
    before it that hold the words of its entity or value it does not (a pronoun's person, a question's
    subject)."""
    numbers = [turns[index].number]
    said = [turns[index].said()]
    for earlier in range(index - 1, max(-1, index - 1 - LOOK_BACK), -1):
        if supported(entity, value, said):
            break
        if _adds(turns[earlier].said(), said, entity, value):
            numbers.append(turns[earlier].number)
            said.append(turns[earlier].said())
    return numbers


def _adds(text: str, said: list[str], entity: str, value: str) -> bool:
    """Does `text` hold a word of the entity or value that `said` lacks?"""
    missing = terms(f"{entity} {value}") - set().union(*(terms(t) for t in said))
    return bool({w for w in missing if len(w) > 1} & terms(text))
