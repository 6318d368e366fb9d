"""Corrections: "I live in Bath" / "sorry, I meant Bristol" states that the speaker lives in Bristol, and
the corrected words state nothing.

A correction opens with a marker ("*Apex", "I meant", "no wait", "actually no", "correction:", "or
rather", "make that", or a bare "sorry,") and gives a bare value. The corrected words are the speaker's
own: the same turn before the marker, or, for a turn that opens with one, their last turn within two. The
value replaces the one claim of those words whose value has its shape (a name, a number, a date, an
amount, a role); where no claim or several have it, an explicit marker withdraws every claim of the
corrected words and a bare "sorry" ("sorry, Leeds is great") corrects nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from mneme.consolidation.claims.rules import Found
from mneme.consolidation.claims.turns import Turn
from mneme.consolidation.claims.values import AMOUNT_RE, DATE_RE, clean, is_name, is_role

Claims = list[tuple[int, Found]]  # (turn, claim)
Before = Callable[[int, str], list[Found]]  # the claims of turn i's words before a marker

EXPLICIT = (
    r"\*(?=\S)|(?:(?:sorry|oops|oh)[,!]?\s+)?(?:I meant|no wait|wait,? no|actually,? no|no sorry|correction|"
    r"or rather|make that)\b[,:!.]?"
)
MARKER = re.compile(
    rf"(?:^|(?<=[,.;!?])\s*|\s[-–—]\s*)(?:(?P<x>{EXPLICIT})|sorry[,!]\s*)\s*(?P<rest>\S.*)$", re.I | re.S
)
TRAILING_STAR = re.compile(r"^(?P<rest>[^*\s][^*]*?)\*$")  # "Apex*"
# Words taken back: "I live in Leeds. Ok I don't", "jk", "not really" (in the turn, or just after it), or
# put in the past: "I work at Tesco. well, worked", "my partner is a chef, or was", "or I did, until May".
TAKEN_BACK = re.compile(
    r"(?:^|(?<=[,.;!?])\s*)(?:(?:(?:ok|okay|well|lol|haha|nah|no)[,!]?\s+)*(?:jk|j/k|just kidding|kidding|"
    r"not really|(?:I|we) (?:don't|do not|am not|'m not|didn't|haven't|wasn't|can't)|I'm not)\s*"
    r"(?:[,.!]\s*(?:but|and)\b.*)?\W*$|(?:well|or|ok|okay),?\s+(?:worked|lived|was|were|did|used to)\b|"
    r"(?:well|or|ok|okay),?\s+(?:I|we|he|she|they) (?:did|used to)(?=\s*(?:$|[,.;!?]|until\b|till\b|'til\b|up to\b)))",
    re.I | re.S,
)
OPENING = re.compile(r"^(?:it's|it is|it was|I meant|I mean|that's|that is)\s+", re.I)


def shape(value: str) -> str | None:
    """What kind of value it is, for a correction to replace only its like: 34 by 35, Bath by Bristol."""
    if re.fullmatch(r"\d{1,3}", value):
        return "number"
    if DATE_RE.fullmatch(value):
        return "date"
    if AMOUNT_RE.fullmatch(value) and re.search(r"[£$€¥₹k]", value):
        return "amount"
    if is_name(value, allow_days=True):
        return "name"
    return "role" if is_role(value) else None


def _fragment(rest: str) -> str:
    """The value a correction gives: "35" of "35, I keep forgetting", "Dr Hill" of "it's Dr Hill now"."""
    return clean(re.split(r",\s|[.;!?](?:\s|$)", OPENING.sub("", rest.strip()), maxsplit=1)[0])


def _replace(candidates: list[Found], value: str, explicit: bool) -> tuple[list[Found], Found | None]:
    """The claims the correction withdraws, and the claim it states."""
    kind = shape(value) if value else None
    alike = [c for c in candidates if kind and shape(c.value) == kind]
    if len(alike) == 1:
        return alike, alike[0]._replace(value=value)
    return (candidates if explicit else []), None


def _taken_back(out: Claims, turns: Sequence[Turn], i: int, start: int, before: Before) -> Claims:
    """Without the claims taken back: this turn's before the words, or the speaker's turn just before."""
    if start > 0:
        withdrawn = before(i, turns[i].text[:start])
        return [(j, c) for j, c in out if not (j == i and c in withdrawn)]
    if i and turns[i - 1].speaker == turns[i].speaker:
        return [(j, c) for j, c in out if j != i - 1]
    return out


def corrected(turns: Sequence[Turn], found: Claims, before: Before) -> Claims:
    """The window's claims with every correction applied."""
    out = list(found)
    for i, turn in enumerate(turns):
        if turn.assistant:
            continue
        if back := TAKEN_BACK.search(turn.text):
            out = _taken_back(out, turns, i, back.start(), before)
            continue
        marker = MARKER.search(turn.text) or TRAILING_STAR.match(turn.text.strip())
        if not marker:
            continue
        explicit = bool(marker.groupdict().get("x")) or marker.re is TRAILING_STAR
        start = marker.start() if marker.re is MARKER else 0
        if start > 0:
            at, candidates = i, before(i, turn.text[:start])
        else:
            earlier = [j for j in range(max(0, i - 2), i) if turns[j].speaker == turn.speaker]
            at = earlier[-1] if earlier else -1
            candidates = [c for j, c in out if j == at]
        withdrawn, stated = _replace(candidates, _fragment(marker["rest"]), explicit)
        out = [(j, c) for j, c in out if not (j == at and c in withdrawn)]
        if stated:
            out.append((i, stated))
    return sorted(out, key=lambda item: item[0])
