"""What a change is, in words: whose a statement is, which subject it is about, and whether a later
statement updates an earlier one ("I live in Leeds" … weeks later … "we moved to York in March").

Core rules, read by recall (for a question about the present, the later statement ranks above the earlier
one it updates, which is marked as earlier) and by consolidation (a fact a later turn changes is superseded,
or marked stale when its new value cannot be read). No model: words, a lexicon of subjects ("slots"), and
the cosine of the two statements' stored vectors, which the caller gives.

A later statement updates an earlier one when all of these hold:
- one owner: the same speaker, or the same person named (`owners`); two people in one scope never update
  each other's statements, and "he"/"she" of unknown person updates nothing;
- it asserts: it is not a question, not one more of something ("too", "another"), not an echo (nothing the
  earlier did not say) unless it ends the earlier ("I left Acme", "Biscuit passed away", "no longer");
- one subject: a slot both statements touch (home, employer, manager, rent…), where in the later statement
  the change language stands in the same clause as the slot ("we moved to York"), or, for a subject with one
  value at a time, that clause states another value (a name, a number, a value word: "vegan" after
  "vegetarian"); a subject with many values at a time (pets, hobbies, tools) changes only when something of
  it ends or is replaced. Without a shared slot: the vectors say the same kind of thing (cosine ≥
  SAME_KIND) and the later statement uses change language and names another value, or ends something.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from mneme.models import Episode
from mneme.records import Fact
from mneme.text import STOPWORDS, stem, words


@dataclass(frozen=True)
class Slot:
    name: str
    cues: re.Pattern[str]  # words that say a statement is about this subject
    single: bool = True  # one value at a time: another value is a change
    values: frozenset[str] = frozenset()  # lower-case value words of the slot ("vegan", "vegetarian")
    numeric: bool = False  # its values may be numbers (an amount, a time, a version), not only names


def _slot(name: str, cues: str, *, single: bool = True, values: str = "", numeric: bool = False) -> Slot:
    return Slot(name, re.compile(rf"\b(?:{cues})\b"), single, frozenset(values.split()), numeric)


SLOTS: tuple[Slot, ...] = (
    _slot("home", r"li(?:ve|ves|ved|ving) (?:in|at|near|with|on)|mov(?:e|ed|ing) (?:to|into|back|out|house|away|in)|"
          r"relocat\w*|flat(?! rate| tyre| tire)|apartment|address|neighbou?rhood|based in|home ?town"),
    _slot("employer", r"work(?:s|ed|ing)? (?:at|for)|(?:my|our|new|current|old|his|her|their|a|the) (?:[\w-]+ ){0,2}"
          r"job|employer|(?:my|our|new|current|his|her|their) (?:company|firm)|joined|hired|start(?:s|ed|ing)? at|"
          r"resigned|quit|freelanc\w*|laid off|redundan\w*"),
    _slot("role", r"role|position|title|promot\w*|work(?:s|ed|ing)? as|career|part-time|full-time|contract(?:or)?"),
    _slot("manager", r"manager|boss|supervisor|report(?:s|ing)? to|team lead"),
    _slot("diet", r"diet|vegetarian|vegan|pescatarian|meat|dairy|gluten|keto|eat(?:s|ing)?|plant-based|lactose",
          values="vegetarian vegan pescatarian keto paleo omnivore carnivore gluten-free dairy-free halal kosher"),
    _slot("phone", r"phone|mobile|iphone|android|pixel|samsung|(?:my|new|phone|mobile) number", numeric=True),
    _slot("school", r"school|university|uni|college|(?<!of )course|degree|studying|stud(?:y|ies)|enrolled|masters?|"
          r"phd|bootcamp"),
    _slot("supplier", r"supplier|vendor|provider|suppl(?:y|ies)|wholesaler|distributor|agency|"
          r"(?:order|buy)(?:s|ing)? from"),
    _slot("tool", r"tool|app|software|editor|ide|tracker|crm|platform|using|use[sd]?|migrat\w*|hosted on|hosting|"
          r"switch(?:ed|ing)? (?:from|to|over)", single=False),
    _slot("framework", r"framework|library|stack|built (?:on|with|in)|written in|rewrit\w*|react|vue|angular|"
          r"svelte|django|rails|flask|fastapi|laravel"),
    _slot("money", r"budget|rent|landlord|lease|salary|pay (?:rise|raise|cut)|price|costs?|fee|(?:hourly|day) rate|"
          r"rate is|charged?|subscription|mortgage|earn(?:s|ing)?", numeric=True),
    _slot("version", r"version|upgrad\w*|downgrad\w*|v\d[\w.]*", numeric=True),
    _slot("hours", r"opening hours|open(?:s|ing)? (?:at|from|until|till|on)|clos(?:e|es|ing) (?:at|from|on)|hours|shifts?", numeric=True),
    _slot("schedule", r"meetings?|stand-?ups?|syncs?|calls|appointments?|reschedul\w*|1:1s?|one-on-ones?|retros?|"
          r"lessons?|classes", numeric=True),
    _slot("deadline", r"deadline|due|launch|go-live|release date|delivery|cutover|ship(?:s|ping)?|postpon\w*|"
          r"delay\w*|pushed|brought forward|moved (?:up|back)", numeric=True),
    _slot("owner", r"(?<!my )(?<!our )(?<!their )(?<!his )(?<!her )own(?:s|ed|er|ership)?|in charge|responsible|"
          r"lead(?:s|ing)? (?:the|on)|hand(?:ed|ing|s)? (?:[\w-]+ ){0,4}"
          r"(?:over|off)|t(?:ook|aking|akes) over|point person|assigned|accountable|maintainer"),
    _slot("pet", r"dog|cat|puppy|kitten|pets?|rabbit|hamster|parrot|horse|tortoise|passed away|put down|adopted|"
          r"rehomed", single=False),
    _slot("hobby", r"hobby|took up|taken up|taking up|playing|plays?|practi[sc]\w*|learning|classes|club|gave up",
          single=False),
    _slot("name", r"call me|name|go(?:es)? by|nickname|prefer(?:s|red)? to be called|pronouns"),
    _slot("partner", r"girlfriend|boyfriend|wife|husband|partner|fianc[eé]e?|married|engaged|divorced|broke up|"
          r"separated|dating"),
    _slot("vehicle", r"car|drive[sn]?|driving|vehicle|bike|scooter|van"),
    _slot("provider", r"bank|insurer|insurance|doctor|dentist|gp|gym|broadband|energy supplier"),
)
SLOT_NAMES = {slot.name: slot for slot in SLOTS}
VALUE_WORDS = frozenset().union(*(slot.values for slot in SLOTS))

# Change language, both directions. ENDS end or replace a value: they change a subject with many values too.
ENDS = re.compile(
    r"\b(?:no longer|not any ?more|n't [\w ]{0,30}any ?more|any ?more|used to|quit|quitting|left|leaving|stopped|"
    r"gave up|given up|dropped|ditched|got rid of|sold|passed away|put (?:him |her |it |them )?down|died|rehomed|"
    r"switch(?:ed|ing)?|swapped|replaced|replacing|migrated|migrating|moved (?:over|away|on|out)|instead|"
    r"hand(?:ed|ing|s)? (?:[\w-]+ ){0,4}(?:over|off)|t(?:ook|aking) over|broke up|divorced|separated|"
    r"former(?:ly)?|previously|from [\w.,$£€-]+(?: [\w.,$£€-]+)? to)\b"
)
CHANGES = re.compile(  # a change said as such: enough beside a subject the earlier statement shares
    r"\b(?:moved|moving|relocated|changed|changing|upgraded|downgraded|pushed|postponed|delayed|rescheduled|"
    r"brought forward|raised|increased|went up|gone up|goes up|dropped|cut|reduced|lowered|promoted|transferred|"
    r"joined|hired|became|become|back to|returned|went (?:vegan|vegetarian|back)|adopted|took up|taking up|"
    r"signed up|enrolled|renamed|got (?:married|engaged))\b"
)
WEAK = re.compile(  # words that often come with a change but also without one: they need a new value beside them
    r"\b(?:now|new|started|starting|begun|began|finally|turned|as of|these days|got an?|"
    r"from (?:now|next|this|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b"
)
ADDS = re.compile(r"\b(?:too|also|as well|another|second|third|one more|extra|added|plus)\b")
QUESTION_START = re.compile(
    r"^(?:do|does|did|is|are|was|were|can|could|will|would|have|has|had|what|where|when|who|why|how|which|"
    r"whose|still)\b"
)
FILLER = frozenset(  # words an echo may add without saying anything new ("Yes, still in Leeds, as I said")
    "yes yeah yep yup no nope ok okay still right indeed already again said say told mentioned remember like "
    "really just well so oh ah hmm lol haha thanks thank sure course true exactly totally also even though "
    "know think mean guess anyway actually honestly".split()
)
NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty hundred "
    "thousand half".split()
)
NUMBER = re.compile(r"\d[\d,.:]*(?:am|pm|k|m|st|nd|rd|th)?")
CLAUSE = re.compile(r"[.;!?]+\s+|,\s+(?:and|but|so)\s+|\s+(?:and|but|so)\s+(?=(?:i|we|my|our|he|she|they)\b)|,\s+")
SAME_KIND = 0.5  # two statements of one owner whose vectors' cosine is at least this say the same kind of thing
SLOT_FLOOR = 0.2  # two statements of one slot whose cosine is below this are about different things


# -- whose a statement is -------------------------------------------------------------------------------
PEOPLE = frozenset(
    "wife husband partner girlfriend boyfriend fiance fiancee son daughter kid kids child children mum mom mother "
    "dad father sister brother parents grandma grandmother grandpa grandfather friend cousin aunt uncle niece "
    "nephew flatmate roommate colleague neighbour neighbor".split()
)
LEAD = re.compile(
    r"^(?:(?:and|so|oh|ah|well|yeah|yes|no|ok|okay|lol|haha|omg|wow|actually|also|btw|honestly|anyway|"
    r"(?:big |good |bad |my )?news|guess what|update)\W+)*",
    re.I,
)
FIRST = re.compile(r"^(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our|me|us)\b", re.I)
THIRD = re.compile(r"^(?:he|she|they|his|her|their|him|them)\b", re.I)
RELATIVE = re.compile(rf"^(?:my|our) ({'|'.join(sorted(PEOPLE))})\b", re.I)
NAMED = re.compile(
    r"^([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)(?:'s| (?:is|was|has|had|got|moved|lives|lived|works|worked|started|left|"
    r"quit|joined|switched|took|became|passed|owns|leads|handed|will|just|now|finally))\b"
)
NOT_NAMES = frozenset("I We You It This That There The My Our Your Me Us".split())
SPEAKER_PREFIX = re.compile(r"^\s*[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")


def statement(record: Episode | Fact) -> str:
    """The words of a statement: an episode's text (an STTP node's content), a fact's summary and property."""
    if isinstance(record, Fact):
        return f"{record.summary} {record.property or ''}".strip()
    return SPEAKER_PREFIX.sub("", (record.search_text or record.content).strip(), count=1)


def owners(record: Episode | Fact) -> frozenset[str]:
    """Whose a statement is, normalised; one statement may be about several ("Greg left; my new manager is
    Aisha"). A fact's: its entity's person ("Maya's dog" → maya; "Maya's brother" → maya's brother). An
    episode's, clause by clause: its speaker (`metadata.speaker`), unless the clause opens about someone else —
    a person by name ("Theo got hired" → theo), a relative ("my brother moved" → the speaker's brother), or a
    pronoun whose person the words do not say ("he got hired" → "?", which matches nothing); a clause without
    a subject is the previous clause's. Empty for a note without a speaker about no one named."""
    if isinstance(record, Fact):
        person, _, thing = " ".join((record.entity or "").lower().split()).partition("'s ")
        kin = thing.split()[:1]
        return frozenset([f"{person}'s {kin[0]}" if kin and kin[0] in PEOPLE else person] if person else [])
    value = record.metadata.get("speaker") if isinstance(record.metadata, dict) else None
    speaker = " ".join(value.lower().split()) or None if isinstance(value, str) else None
    found: set[str] = set()
    current = speaker
    for clause in CLAUSE.split(statement(record)):
        text = LEAD.sub("", clause.strip())
        if relative := RELATIVE.match(text):
            current = f"{speaker or ''}'s {relative[1].lower()}"
        elif FIRST.match(text):
            current = speaker
        elif THIRD.match(text):
            current = "?"
        elif (named := NAMED.match(text)) and named[1].split()[0] not in NOT_NAMES:
            current = named[1].lower()
        if current is not None and len(set(words(text)) - STOPWORDS - FILLER) > 1:
            found.add(current)
    return frozenset(found)


# -- what a statement says ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """What the rules read of one statement's text, once (`read`)."""

    slots: frozenset[str]
    changed: dict[str, str]  # slot -> the change words said in a clause about it ("home": "moved")
    ended: dict[str, str]  # slot -> the words that end or replace something of it, in a clause about it
    valued: dict[str, frozenset[str]]  # slot -> the values named in the clauses about it
    values: frozenset[str]  # names (capitalised words not opening a sentence), numbers, value words
    content: frozenset[str]  # its meaningful words, stemmed, without filler and change words
    asks: bool
    adds: bool  # one more of something ("too", "another")
    ends: str | None  # anywhere in it
    cue: str | None  # the first change word anywhere in it, ends, strong or weak


def _values(text: str, *, numbers: bool = True) -> frozenset[str]:
    """What a text names as values: names (capitalised words not opening a sentence), value words, numbers."""
    openers = {m.end() for m in re.finditer(r"(?:^|[.!?:;]\s+|\n)\W*[\w'-]+", text)}
    names = {m[0].lower() for m in re.finditer(r"[\w'-]+", text) if m[0][:1].isupper() and m.end() not in openers}
    lowered = set(words(text))
    found = (names - STOPWORDS - {"i", "i'm", "i've", "i'd", "i'll"}) | (lowered & VALUE_WORDS)
    if numbers:
        found |= {m[0].rstrip(".,:") for m in NUMBER.finditer(text)} | (lowered & NUMBER_WORDS)
    return frozenset(found)


def _asks(lowered: str) -> bool:
    """Every sentence that says something is a question ("So you moved? Nice." asks; "Wednesdays are chaos.
    Could we switch to Saturdays?" says something first)."""
    said = [s for s in re.split(r"(?<=[.!?])\s+", lowered) if set(words(s)) - STOPWORDS - FILLER]
    return bool(said) and all(s.endswith("?") or QUESTION_START.match(s) for s in said)


@functools.lru_cache(maxsize=8192)
def read(text: str) -> Reading:
    lowered = " ".join(text.lower().split())
    changed: dict[str, str] = {}
    ended: dict[str, str] = {}
    valued: dict[str, frozenset[str]] = {}
    for clause in CLAUSE.split(" ".join(text.split())):
        low = clause.lower()
        ends, strong = ENDS.search(low), CHANGES.search(low)
        for slot in (s for s in SLOTS if s.cues.search(low)):
            valued[slot.name] = valued.get(slot.name, frozenset()) | _values(clause, numbers=slot.numeric)
            if ends or strong:
                changed.setdefault(slot.name, (ends or strong)[0])  # type: ignore[index]
            if ends:
                ended.setdefault(slot.name, ends[0])
    cues = [m for pattern in (ENDS, CHANGES, WEAK) for m in pattern.finditer(lowered)]
    cue_words = {stem(w) for m in cues for w in words(m[0])}
    meaningful = {stem(w) for w in words(text) if w not in STOPWORDS and w not in FILLER and len(w) > 1}
    ends = ENDS.search(lowered)
    return Reading(
        slots=frozenset(s.name for s in SLOTS if s.cues.search(lowered)),
        changed=changed,
        ended=ended,
        valued=valued,
        values=_values(text),
        content=frozenset(meaningful - cue_words),
        asks=_asks(lowered),
        adds=bool(ADDS.search(lowered)),
        ends=ends[0] if ends else None,
        cue=min(cues, key=lambda m: m.start())[0] if cues else None,
    )


def slots(text: str) -> frozenset[str]:
    return read(text).slots


# -- whether a later statement updates an earlier one ----------------------------------------------------
def update_reason(
    earlier: Episode | Fact, later: Episode | Fact, similarity: float, *, latest: bool = False
) -> str | None:
    """Why `later` updates `earlier` ("home: moved", "manager: aisha instead of greg"), or None (the module's
    rules). `similarity`: the cosine of the two statements' stored vectors. `latest`: the question asked
    explicitly for the latest ("now", "currently"): then a statement of the same kind that names another
    value updates without change language. The caller checks that `later` came after `earlier`."""
    mine, theirs = owners(earlier), owners(later)
    if (mine or theirs) and not (mine & theirs) - {"?"}:
        return None
    old, new = read(statement(earlier)), read(statement(later))
    added = new.values - old.values
    if new.asks or (new.ends is None and (new.adds or (new.content <= old.content and not added))):
        return None  # a question, one more of something, or an echo: nothing the earlier did not say
    many = False  # a subject with many values at a time (pets, tools): only an end is a change
    for name in sorted(old.slots & new.slots) if similarity >= SLOT_FLOOR else ():
        if not SLOT_NAMES[name].single:
            if new.ends:
                return f"{name}: {new.ended.get(name, new.ends)}"
            many = True
        elif name in new.changed:
            return f"{name}: {new.changed[name]}"
        elif fresh := new.valued.get(name, frozenset()) - old.values:
            return f"{name}: {sorted(fresh)[0]} instead of {', '.join(sorted(old.valued.get(name, ()))) or '?'}"
    if many or similarity < SAME_KIND:
        return None
    if new.ends or (added and (new.cue or latest)):
        return f"same kind ({similarity:.2f}): {new.ends or new.cue or sorted(added)[0]}"
    return None
