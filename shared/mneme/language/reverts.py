"""Changes undone: a later statement that goes back to an earlier value ("I've gone back to my own surname") or
calls a change off ("changed my mind, we're staying put"). Recall's time stage reads them after the changes
(`mneme.language.changes.update_reason`) to end a chain where it really ends."""

from __future__ import annotations

import re

from mneme.language import nochange
from mneme.language.changes import CALENDAR, NUMBER_WORDS, Said, openers, said, same_subject, sentences, told
from mneme.models import Episode
from mneme.records import Fact

BACK = re.compile(  # "gone back to", "rolled back to 2.7", "re-contracted with Plusnet", "with Shipton again"
    r"\b(?:(?:went|gone|go|going|moved|switched|changed|reverted|rolled) back|back to|returned to|again|"
    r"stays?|remains?|re-?(?:contracted|signed|joined|subscribed|registered|enrolled|hired|booked))\b"
)


def returns_to(earlier: Episode | Fact | Said, later: Episode | Fact | Said) -> str | None:
    """The later statement goes back to a value the earlier one named ("I'm back on Vue 2", "we've gone back to
    the old supplier", "rolled back to 2.7"): it updates whatever changed the earlier one since. None unless it
    says so, asserts it, and is about the same owner. Either may be given read once (`said`)."""
    after = said(later)
    if not BACK.search(after.text.lower()):
        return None
    before = said(earlier)
    old, new = before.reading, after.reading
    named = (old.values & new.values) - openers(after.text) - NUMBER_WORDS
    if new.asks or new.hedged or not named or not same_subject(before, after):
        return None
    return f"back to {sorted(named)[0]}"


# a return to what was before, without naming it: "rejoined my old gym", "back to my usual alarm", "put the cluster
# back in the region it came from", "my old boss is back", "got my own bike back", "I'm happy as I was"; not the old
# thing sent back ("the old router went back in the post"), nor a part that stays ("the email stays as it was")
_BEFORE = (
    r"(?:(?:my|our|his|her|their|its|the) (?:old|own|usual|previous|original|former|regular)\b"
    r"(?! (?:days|times|self)\b)|(?:it|they) came from\b)"  # not "the old days": like then
)
GOES_BACK = re.compile(
    rf"\b(?:back|again|rejoined|returned to|reverted to|restored)\b.*\b{_BEFORE}"
    rf"|\b{_BEFORE}(?: [\w-]+){{0,3}} (?:is|are)(?: \w+)? back\b"
    rf"|\b(?:got|get|getting|have|has|had) {_BEFORE}(?: [\w-]+){{0,3}} back\b"
    r"|\bas (?:i|we) (?:was|were)\b(?! \w+ing)"  # not "as I was saying"
)
RETURN_WORDS = ("back", "again", "rejoined", "returned", "reverted", "restored", "as i w", "as we w")  # one is in each


def goes_back(text: str) -> bool:
    """A sentence it tells goes back to what was before without naming it: what the change it ends had replaced
    holds again (recall's `truth.stands.first_returned`)."""
    lowered = " ".join(text.lower().split())
    if not any(word in lowered for word in RETURN_WORDS):
        return False  # every return names one of them: most turns are passed over without reading their sentences
    return any(GOES_BACK.search(sentence) for sentence in sentences(told(text).lower()))


# a return that names what it goes back to, the name beside the return: "back to plain vegetarian", "back at
# Dunhollow", "the Folio Glow is back", "Dervla again"; not "handed my folder back", "back in Portlenna", nor the day
# of a return from somewhere ("got back on Friday") or what follows the name ("back to five-a-side on Tuesday")
_NAME = r"(?!(?:on|in|at|from|for|after|last|this|next|since|until)\b)[\w'&-]+"
NAMED_BACK = re.compile(
    rf"\bback (?P<to>to|on|at|with) (?:(?:the|my|our|plain) )?(?P<after>{_NAME}(?: {_NAME}){{0,2}})"
    r"|(?P<before>[\w'&-]+(?: [\w'&-]+){0,2}) (?:is|are) back\b|(?P<again>[\w'&-]+) again\b"
)


def named_back(said_: Said) -> frozenset[str]:
    """The values a statement names beside a return to them ("so the Halden Lumo is back on my bedside table");
    none when it asks or hedges."""
    lowered = said_.text.lower()
    if said_.reading.asks or said_.reading.hedged or ("back" not in lowered and "again" not in lowered):
        return frozenset()  # every named return says one of them: most turns are passed over unread
    near: set[str] = set()
    for found in NAMED_BACK.finditer(told(said_.text).lower()):
        words = " ".join(group for group in found.group("after", "before", "again") if group).split()
        near.update(word for word in words if found["to"] != "on" or word not in CALENDAR)
    return (said_.reading.values & near) - openers(said_.text) - NUMBER_WORDS


UNDONE = re.compile(rf"{nochange.CALLED_OFF.pattern}|\bcancel(?:l?ed|l?ing|s)\b")  # or "the move's cancelled"


def undoes(
    change: Episode | Fact | Said, later: Episode | Fact | Said, restored: Episode | Fact | Said | None = None
) -> str | None:
    """The later statement calls a change off ("changed my mind, we're staying put", "the move fell through"):
    the statements the change superseded stand again. None unless it asserts so, shares a word with the change
    and is about the same owner, and names no value but the change's and the one it `restored` ("the move's off,
    we're staying put in Zaragoza"). Any may be given read once (`said`)."""
    after = said(later)
    undone = UNDONE.search(after.text.lower())
    if undone is None or after.reading.asks or after.reading.hedged:
        return None
    before = said(change)
    if not before.reading.content & after.reading.content or not same_subject(before, after):
        return None
    kept = _bare(before.reading.values | (said(restored).reading.values if restored is not None else frozenset()))
    if _bare(after.reading.values - openers(after.text) - NUMBER_WORDS) - kept:
        return None  # "Direct Line cancelled; insured with Zurich from 20 August": a new value, a change again
    return f"undone: {undone[0]}"


def _bare(values: frozenset[str]) -> frozenset[str]:
    """Values without a possessive: "Pablo's company" and "Pablo will work remotely" name one person."""
    return frozenset(value.removesuffix("'s") for value in values)
