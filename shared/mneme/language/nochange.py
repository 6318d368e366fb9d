"""What a later statement says that is no change, whatever other values it names: that the subject asked about
stayed ("same job", "didn't touch the amlodipine"), that something happened ("the party last Sunday was fun"),
that something will ("I'll come home every Diwali"), or that a change considered was called off ("gave up on
switching"). Read by `changes.update_reason`, `reverts.undoes` and recall's rules of what is true now
(`services/recall/truth/`)."""

from __future__ import annotations

import functools
import re

from mneme.language.slots import SLOT_NAMES

KEPT = re.compile(  # "same job", "didn't touch the amlodipine", "melatonin stays the same"
    r"\b(?:same|unchanged|no change to (?:my|our|the))\s+([\w-]+)|"
    r"\b(?:did(?:n't| not)|has(?:n't| not)|have(?:n't| not)) (?:touch|change|alter)(?:ed)? "
    r"(?:the|my|our|his|her) ([\w-]+)|"
    r"\b([\w-]+) (?:stays?|stayed|remains?|is staying) (?:the same|unchanged|as (?:it|they) (?:is|was|are|were))"
)


def kept(text: str, asked: frozenset[str], words: frozenset[str]) -> bool:
    """The text says a subject asked about stayed as it was ("same job", "same school"), or a thing the question
    names ("didn't touch the amlodipine" for "What amlodipine dose is Maureen on?")."""
    kept = [next(group for group in m.groups() if group) for m in KEPT.finditer(text.lower())]
    return bool(words & set(kept)) or any(
        SLOT_NAMES[name].cues.search(f"my {thing}") for name in asked for thing in kept
    )


CALLED_OFF = re.compile(  # a change considered and called off: "gave up on switching", "told the conductor no"
    r"\bchanged (?:my|our|his|her|their) minds?\b|\bf[ae]ll(?:s|ing)? through\b|"
    r"\bdid(?:n't| not) go (?:ahead|through)\b|\bnot going ahead\b|\b(?:pulled|backed) out\b|\bsaid no\b|"
    r"\bcalled (?:it|the [\w-]+) off\b|\bdecided (?:against|not to)\b|\bdeclined\b|"
    r"\bleav(?:e|ing) (?:it|them|things) (?:alone|be|as (?:it|they) (?:is|are))\b|"
    r"\b(?:stay|staying|stayed|sticking|stuck) (?:put|where (?:i|we) (?:was|were|am|are))\b|\bdecided to stay\b|"
    r"\bturned (?:[\w-]+ ){0,2}down\b|\b(?:gave|giving|given) up on [\w-]+ing\b|\btold (?:[\w-]+ ){1,3}no\b|"
    r"\b(?:nobody|no one)(?:'s| is) (?:moving|changing|going anywhere)\b|\bno extension\b|"
    r"\b(?:date|deadline|plan|price|offer|booking) stands\b|\b(?:i|we)(?:'m| am|'re| are)? stay(?:ed|ing)? loyal\b|"
    r"\b(?:keep(?:ing|s)?|stick(?:ing|s)? with) what (?:i|we)(?:'ve| have| had|'d)(?: got)?\b|"
    r"\bnothing(?:'s| is)? chang(?:es|ing) for\b|"
    r"\b(?:that's|it's|that is|it is) a no\b|\ba no from (?:me|us)\b|"  # "missed fish too much, so that's a no from me"
    r"\bcancell?ed (?:the|my|our) (?:free )?trial\b|\bnot worth (?:switching|migrating|moving|changing)\b|"
    r"\bcan wait\b"  # "cancelled the trial, not worth migrating", "decided the e-bike can wait"
)


def called_off(told: str) -> bool:
    """What a statement tells (lowered, its questions left out: `changes.told`) calls off a change that was only
    considered, offered or rumoured: no change itself, and the first value stands."""
    return CALLED_OFF.search(told) is not None


EVENT = re.compile(  # a report of something that happened, not of how things are
    r"\b(?:was|were|yesterday|ago|last (?:night|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b"
    r"|^(?:(?:i|we|he|she|they) )?[a-z]+ed\b"  # "Shipped 40 units to …", "we hosted twelve people"
)


FUTURE = re.compile(  # a plan or a promise; not a change that starts on a date ("100 mg from tomorrow")
    r"\b(?:will|shall|'ll|promise[sd]?|(?<!from )(?<!starting )(?:tomorrow|next (?:week|month|year)))\b"
)


def told_events(earlier: str, later: str) -> bool:
    """Either statement reports an event ("the party last Sunday was fun", "we hosted twelve on Friday"), or the
    later one a promise or a plan ("I'll come home every Diwali"): they name other values without changing
    how things are."""
    (event, _), (told, promised) = _tells(earlier), _tells(later)
    return event or told or promised


@functools.lru_cache(maxsize=8192)
def _tells(text: str) -> tuple[bool, bool]:
    """Whether a statement reports an event, and whether it promises or plans (read once, compared many times)."""
    lowered = text.lower()
    return bool(EVENT.search(lowered)), bool(FUTURE.search(lowered))
