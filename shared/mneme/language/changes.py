"""What a change is, in words: whose a statement is, which subject it is about, and whether a later
statement updates an earlier one ("I live in Leeds" … weeks later … "we moved to York in March").

Core rules, read by recall (for a question about the present, the later statement ranks above the earlier
one it updates, which is marked as earlier) and by consolidation (a fact a later turn changes is superseded,
or marked stale when its new value cannot be read). No model: words, a lexicon of subjects (`slots`), and
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
from dataclasses import dataclass, replace
from datetime import timedelta

from mneme.language import nochange
from mneme.language.slots import ANY_CUE, SLOT_NAMES, SLOTS, VALUE_WORDS, Slot
from mneme.language.text import STOPWORDS, stem, words
from mneme.models import Episode
from mneme.records import RELATIVES_MANY, Fact, many_valued, norm

AMOUNT = re.compile(r"[£$€¥₹]\s?\d|\b\d[\d,.]*\s?(?:k|grand|pounds|quid|dollars|euros)\b")  # money, whatever it is for
FOR_ME = re.compile(  # someone else's doing, to the speaker: "they offered me the job", "the agency put us on"
    r"\b(?:offer(?:ed|s)?|gave|give[sn]?|giving|paid|pay(?:s|ing)?|promoted|hired|moved|put|raised|transferred|"
    r"signed|took on|taken on|made|switched|upgraded|bumped)\s+(?:me|us)\b"
)
OFFER = re.compile(r"\boffer(?:ed|s)?\b")  # an offer is the speaker's to take or turn down: "offered us the 19th"

# Change language, both directions. ENDS end or replace a value: they change a subject with many values too.
ENDS = re.compile(
    r"\b(?:no longer|not any ?more|n't [\w ]{0,30}any ?more|any ?more|used to|quit|quitting|stopped|"
    r"leaving(?! (?:present|gift|card|do|party|drinks|message|speech|collection|lunch|dinner|video)\b)|"
    r"left(?! (?:a|an|some|me|us|him|her|them|you|it|behind|over|out)\b)|"  # not "left a note", "left me some"
    r"gave up|given up|dropped|ditched|got rid of|sold|passed away|"
    r"t(?:ook|aken?|aking) (?:me|him|her|us|them) off|put (?:him |her |it |them )?down|died|rehomed|"
    r"switch(?:ed|ing)?|swapp(?:ed|ing)|replaced|replacing|migrated|migrating|moved (?:over|away|on|out)|instead|"
    r"trad(?:ed|ing) (?:[\w-]+ ){0,3}in\b|part[- ]exchanged|"
    r"migration(?:'s| is| has)? (?:been )?(?:done|complete|finished)|"
    r"hand(?:ed|ing|s)? (?:[\w-]+ ){0,4}(?:over|off)|t(?:ook|aking|aken) over|broke up|divorced|separated|"
    r"former(?:ly)?|previously|from [\w.,$£€-]+(?: [\w.,$£€-]+)? to|resign(?:ed|ing)|"
    r"(?:hand|handed|handing|hands|gave|put) in (?:my|his|her|their|our) notice|"
    r"(?:last|final) (?:day|shift|week|pickup|session) (?:at|as|with|from)|signed (?:me|him|her|them|us) off|"
    r"discharged)\b"
)
CHANGES = re.compile(  # a change said as such: enough beside a subject the earlier statement shares
    r"\b(?:moved|moving|relocated|chang(?:ed|ing)(?! (?:my|our|his|her|their) minds?| rooms?\b)|upgraded|downgraded|"
    r"pushed|postponed|delayed|rescheduled|extended|extension|"
    r"brought forward|raised|increased|went up|gone up|goes up|bumped (?:[\w-]+ )?(?:up )?to|dropped|cut|reduced|"
    r"upped|put (?:[\w-]+ ){0,2}up(?! with)|doubled|halved|tripled|rises?|hiked|"
    r"lowered|promoted|transferred|"
    r"joined|hired|became|become|back to|returned|went (?:vegan|vegetarian|back)|adopted|took up|taking up|"
    r"signed (?:[\w-]+ ){0,2}(?:up|with|for|on)|enrolled|renamed|got (?:married|engaged)|slip(?:s|ped)(?! up)|bought|"
    r"offered (?:me|him|her|them|us)|accepted|got the job|took the job|"
    r"(?:put|wants?|has|have) (?:me|him|her|them|us) (?:on(?:to)?|at))\b"
)
WEAK = re.compile(  # words that often come with a change but also without one: they need a new value beside them
    r"\b(?:now|new|started|starting|begun|began|finally|turned|as of|these days|got an?|"
    r"from (?:now|next|this|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b"
)
HEDGE = re.compile(
    r"\b(?:might|maybe|perhaps|thinking (?:of|about)|considering|if|would|could|planning to|"
    r"(?<!been )(?<!keep )going to|"  # a plan; not a habit: "I've been going to the Stellbridge site"
    r"want(?:s|ed)? (?:(?:me|us|him|her|them) )?to(?! (?:know|ask|check|see|understand|learn|find out|make sure))|"
    r"hoping|hope to|tempted|debating|wondering|not sure|rumou?r|"
    r"(?:someone|somebody|people|word)\b[^.!?]{0,30}\b(?:said|says|saying|reckons)|"
    r"apparently|probably|possibly|likely|not yet|"
    r"discuss(?:ed|es|ing)?|talk(?:ed|ing)? (?:about|of)|propos(?:ed|es|ing|al)|suggest(?:ed|s|ing|ion)|floated|"
    r"trial(?:l?ing|l?ed)?|trying (?:out )?|testing (?:out )?|looking (?:at|for|into|around))\b"
)  # talk of a change is no change: "owners discussed opening on Sundays"; nor is a trial: "trialling Marriage's"
WHETHER = re.compile(r"\b(?:(?:should|shall) (?:i|we)|is it worth)\b")  # "Should I switch broadband to FibreLoop?"
ADDS = re.compile(  # one more of something; not time added to a date ("review added a week": a delay), nor "too many"
    r"\b(?:too(?! [a-z])|also|as well|another|second|third|one more|extra|"
    r"added(?! (?:a|an|one|two|three) (?:days?|weeks?|fortnight|months?))|plus)\b"
)
REQUEST = re.compile(r",\s*(?:can|could|would|will) you\b[^.!?]*\?")  # "…, can you help me log it?"
ASKS_YOU = re.compile(r"\b(?:can|could|would|will) you\b")  # a request may carry a change: "can you switch to Spanish?"
# the speaker's own statement, then what they ask: "I live on Cragg Street, what's the nearest tip?"
STATED_THEN_ASKED = re.compile(
    r"^((?:(?:so|and|well|ok|okay|right|hi|hey|anyway|btw)\W+)*(?:i|i'm|i've|my|we|we're|we've|our)\b[^,?]{6,}),"
    r"\s*(?:what|where|when|which|how|who|is there|are there|any)\b[^?]*\?$",
    re.I,
)
ASKS_FOR = re.compile(  # a request that tells of the speaker's things: "can you help me email my manager, Rosalind?"
    r"^(?:please )?(?:can|could|would|will) you (?:please )?(?:help me )?(?:to )?(?:write|draft|update|tidy|add|"
    r"change|make|remind|send|book|fix|edit|rewrite|prepare|format|email|address|plan|adjust|redo)\b.*\b(?:my|our)\b"
)
# a question without its "?"; not "When the contract ended I moved us to …", nor "Can't, Friday is D&D night"
QUESTION_START = re.compile(
    r"^(?:(?:what|where|when|who|why|how|which|whose)(?: \w+)? )?(?:do|does|did|is|are|was|were|can|could|will|"
    r"would|have|has|had|am|should)\b(?!')|^(?:what|where|when|who|why|how|which)(?:'s|'re)\b|^how (?:come|about)\b"
    r"|^(?:what|where|when|who|why|how|which|whose)\b\W*(?:\w++\W*+){0,2}$"  # "why not", "which one?" (possessive:
    # a long word is not split every way before `$` fails)
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
CLAUSE = re.compile(
    r"[.;:!?]+\s+|,\s+(?:and|but|so)\s+|\s+(?:and|but|so)\s+(?=(?i:i|we|my|our|he|she|they)\b|[A-Z])|,\s+|\s+-\s+"
)
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
FIRST = re.compile(r"^(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our|me|us|mine|ours)\b", re.I)
THIRD = re.compile(r"^(?:he|she|they|his|her|their|him|them|you|you're|your|hers|theirs|yours)\b", re.I)
MY = re.compile(r"\b(?:my|our)\s+(?:[\w'-]+\s+){0,2}$")  # just before a slot's word: the speaker's
RELATIVE = re.compile(rf"^(?:my|our) ({'|'.join(sorted(PEOPLE))})\b", re.I)
UPPER = "A-Z" + "".join(c for c in map(chr, range(0xC0, 0x250)) if c.isupper())  # "Łukasz", "Çağla", "Óscar"
POSSESSED = re.compile(rf"\b([{UPPER}][\w-]+)'s ([a-z][\w-]*)")  # "Daniela's levothyroxine"
NAMED_RELATIVE = re.compile(  # "my son Arlo"; "my sister is Jo" of a relative one may have several of
    rf"^(?:[Mm]y|[Oo]ur) (?:(?:{'|'.join(sorted(PEOPLE))})|(?:{'|'.join(sorted(RELATIVES_MANY))}) is) ([{UPPER}][\w-]+)"
)
NAMED = re.compile(  # a person by name, then a verb ("Theo got hired", "Hannah runs the rota", "Priya's …")
    rf"^([{UPPER}][\w'-]+(?: [{UPPER}][\w'-]+)?)(?:'s| (is|was|has|had|got|took|will|just|now|finally|never|still|"
    r"can|can't|won't|doesn't|didn't|[a-z]+ed|[a-z]+[^s\W]s))\b"
)
COMMON = (STOPWORDS - {"is", "was", "has", "had", "will", "just", "now", "can"}) | frozenset(
    "today yesterday tomorrow last next this that these those also then after before since still big good bad "
    "news update quick great thanks please guess sorry sad happy hey hi hello dear sure maybe don't didn't "
    "can't won't i'm i've i'd i'll it's that's there's let's "
    # things a sentence opens on with 's ("Money's tight", "Work's mad"): no one's name
    "money work life everything nothing something weather traffic dinner lunch breakfast food business "
    # verbs a request or an invitation opens on ("Take my car to work tomorrow", "Write a thank-you card", "Meet
    # Mochi!"): no one's name
    "take bring send remind tell ask let make give keep get put meet try grab pick write draft tidy add fix edit "
    "rewrite prepare format plan adjust redo find help suggest recommend explain join use".split()
)
TITLES = frozenset("dr mr mrs ms mx prof sir dame".split())  # before a name, not one: two doctors share no value
VERBAL = ("ing", "ed", "ly")  # a capitalised word ending so opens a sentence; it names no one
SPEAKER, UNKNOWN, IMPLIED = "@", "?", ""  # a clause about the speaker; about "he" or "you"; naming no one
OURS = re.compile(r"\b(?:our|ours)\b", re.I)
THING = "*"  # a clause about a thing ("The events budget is €120,000"): anyone may say it changed
THE = re.compile(  # a clause that opens on a thing: "The data pipeline…", "This laptop…"; not a time ("This morning")
    r"^(?:the|this|that|these|those) (?!(?:morning|afternoon|evening|night|week|weekend|month|year|day|time|"
    r"other|same|one|last|first)\b)[\w-]+",
    re.I,
)
NOTE_TAKERS = frozenset({"assistant", "system", "agent", "tool", "bot", "ai"})  # roles that speak of others
SPEAKER_PREFIX = re.compile(r"^\s*[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")


def statement(record: Episode | Fact) -> str:
    """The words of a statement: an episode's text (an STTP node's content), a fact's summary and property."""
    if isinstance(record, Fact):
        return f"{record.summary} {record.property or ''}".strip()
    return _unprefixed(record.search_text or record.content)


@functools.lru_cache(maxsize=8192)
def _unprefixed(text: str) -> str:  # a turn's text without the "Name: " it may open with
    return SPEAKER_PREFIX.sub("", text.strip(), count=1)


def speaker(record: Episode | Fact) -> str | None:
    """Who said a turn (`metadata.speaker`), normalised; None for a fact or a turn without one."""
    value = record.metadata.get("speaker") if isinstance(record, Episode) else None
    return " ".join(value.lower().split()) or None if isinstance(value, str) else None


def _subject(text: str, current: str) -> str:
    """Whom a clause is about: the speaker, a relative of theirs, someone named, someone unknown ("he",
    "you"), or, when it names no one, whom the clause before it was about (IMPLIED at first)."""
    text = LEAD.sub("", text)
    if relative := RELATIVE.match(text):
        return f"{SPEAKER}'s {relative[1].lower()}"
    if FIRST.match(text):
        return SPEAKER
    if THIRD.match(text):
        return UNKNOWN
    if (thing := THE.match(text)) and thing[0].split()[1].lower() not in PEOPLE:
        return THING
    named = NAMED.match(text)
    first = named[1].split()[0].lower().removesuffix("'s") if named else ""  # "Work's got …": no one's name
    if named and first not in NO_ONE and not first.endswith(VERBAL) and named[2] not in COMMON:
        if OURS.search(text):
            return THING  # "Netflix Standard is our one luxury": a thing of ours, not a person
        return named[1].lower().removesuffix("'s")  # "Arlo's settled", "Priya's bike": Arlo, Priya
    return current


def _possessor(text: str, subject: str) -> str | None:
    """The person whose thing a clause about someone else (`subject`) names after its opening ("GP raised
    Daniela's levothyroxine": "daniela"; not "Daniela's sister", a person of her own)."""
    for m in POSSESSED.finditer(text, 1):
        name = m[1].lower()
        if name not in COMMON and name not in subject.split() and m[2].lower() not in PEOPLE:
            return name
    return None


def _alias(text: str) -> str | None:
    """The name a relative is given beside the word for them ("My son Arlo has started…": "arlo")."""
    named = NAMED_RELATIVE.match(LEAD.sub("", text.strip()))
    return named[1].lower() if named and named[1].lower() not in COMMON else None


def owners(record: Episode | Fact, slot: str | None = None) -> frozenset[str]:
    """Whose a statement is (about `slot` only, when given), normalised; one statement may be about several
    ("Greg left; my new manager is Aisha"). A fact's: its entity's person ("Maya's dog" → maya; "Maya's
    brother" → maya's brother). An episode's, clause by clause: its speaker (`metadata.speaker`), unless the
    clause is about someone else — a person by name ("Theo got hired" → theo), a relative ("my brother moved"
    → the speaker's brother), or a pronoun whose person the words do not say ("he got hired" → "?", which
    matches nothing). A clause that names no one is its speaker's ("Started at Ocado on Monday"), but a note
    (no speaker, or an assistant's) belongs to no one but the people it names."""
    if isinstance(record, Fact):
        if THE.match(record.entity or ""):
            return frozenset({THING})  # "The data pipeline uses Python 3.8.": a thing's, anyone's to change
        person, _, thing = " ".join((record.entity or "").lower().split()).partition("'s ")
        kin = thing.split()[:1]
        return frozenset([f"{person}'s {kin[0]}" if kin and kin[0] in PEOPLE else person] if person else [])
    return _owners(speaker(record), statement(record), slot)


@functools.lru_cache(maxsize=8192)
def _owners(speaker: str | None, text: str, slot: str | None) -> frozenset[str]:
    """`owners` of a turn by `speaker` that says `text` (read once per turn and slot, not once per pair)."""
    found, before = set(), IMPLIED
    for clause in read(text).clauses:
        after_someone, before = before not in (IMPLIED, SPEAKER, UNKNOWN, THING), clause.subject
        if clause.said and (slot is None or slot in clause.slots):
            if speaker and (slot in clause.mine or clause.done_to_me):
                found.add(speaker)  # "my phone"; "they've moved me (to 5 November)"
            subject = clause.subject or (SPEAKER if speaker not in NOTE_TAKERS else IMPLIED)
            if subject == THING and speaker and speaker not in NOTE_TAKERS and not after_someone:
                found.add(speaker)  # "The agent put the rent up": the speaker's thing, unless it follows someone's
            elif subject == THING and (speaker in NOTE_TAKERS or not speaker):
                subject = IMPLIED  # a note's thing is anyone's, as the rest of a note is
            who = subject.replace(SPEAKER, speaker or "", 1) if subject.startswith(SPEAKER) else subject
            if who and not who.startswith("'"):
                found.add(who)
            if clause.alias:
                found.add(clause.alias)  # "my son Arlo" is Arlo too: a later "Arlo's settled" is about him
            if clause.whose:
                found.add(clause.whose)  # "GP raised Daniela's levothyroxine" is of Daniela's things too
    return frozenset(found)


# -- what a statement says ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Clause:
    subject: str  # SPEAKER, UNKNOWN, IMPLIED, "@'s brother", or a person's name in lower case
    alias: str | None  # the name a relative subject is given beside it ("my son Arlo": "arlo")
    whose: str | None  # whose thing a named subject's doing is to ("GP raised Daniela's dose": "daniela")
    slots: frozenset[str]
    mine: frozenset[str]  # slots the speaker owns in it, whoever its subject: "Dad replaced my old phone"
    values: frozenset[str]
    change: str | None  # change words said in it, ENDS or CHANGES
    said: bool  # it says something (two meaningful words or more)
    done_to_me: bool = False  # someone else's doing to the speaker, not an offer: "they've moved me to 5 November"


@dataclass(frozen=True)
class Reading:
    """What the rules read of one statement's text, once (`read`)."""

    clauses: tuple[Clause, ...]
    slots: frozenset[str]
    values: frozenset[str]  # names, numbers, value words
    content: frozenset[str]  # its meaningful words, stemmed, without filler and change words
    asks: bool
    adds: bool  # one more of something ("too", "another")
    hedged: bool  # a maybe, a plan, a wish: "thinking of moving to York", "might switch" (where the change is said)
    ends: str | None  # words that end or replace a value, anywhere in it
    identifiers: tuple[tuple[str, str], ...]  # ("order", "1417"): things named by a number
    cue: str | None  # the first change word anywhere in it, ENDS, CHANGES or WEAK

    def changed(self, slot: str) -> str | None:
        """The change words of a clause about `slot` ("we moved to York": "moved")."""
        return next((c.change for c in self.clauses if slot in c.slots and c.change), None)

    def valued(self, slot: str) -> frozenset[str]:
        """The values named in the clauses about `slot` (numbers only for a slot that takes them)."""
        found = frozenset().union(*(c.values for c in self.clauses if slot in c.slots))
        numeric = SLOT_NAMES[slot].numeric
        return found if numeric else frozenset(v for v in found if not NUMBER.fullmatch(v) and v not in NUMBER_WORDS)


def _my(lowered: str, at: int) -> bool:
    """The words just before `at` say "my"/"our", of no relative between ("my old phone", not "my sister's
    notice": hers)."""
    found = MY.search(lowered, 0, at)
    return found is not None and not set(found[0].split()) & PEOPLE


def _hedged(flat: str, clauses: list[Clause]) -> bool:
    """A maybe, a plan or a wish where the change is said: in a clause that says a change, or anywhere when
    none does ("moved to Brighton on Saturday, I can see the pier if I lean out" is no maybe); or a change
    only asked about ("Should I switch to FibreLoop?", not "Saigon Kitchen's my go-to. What should I order?")."""
    parts = [part.lower() for part, clause in zip(CLAUSE.split(flat), clauses, strict=True) if clause.change]
    return any(HEDGE.search(part) for part in parts or [flat.lower()]) or any(WHETHER.search(part) for part in parts)


JOB = frozenset({"employer", "role"})


def _touched(lowered: str, whole: str) -> list[Slot]:
    """The slots a lower-cased clause touches: by their cue words, and money by an amount where the whole
    statement (`whole`, lower-cased) talks of a job: a pay ("offered me the job, at £37,000")."""
    found = [s for s in SLOTS if s.cues.search(lowered)] if ANY_CUE.search(lowered) else []
    money = SLOT_NAMES["money"]
    paid = AMOUNT.search(lowered) and any(SLOT_NAMES[name].cues.search(whole) for name in JOB)
    return [*found, money] if money not in found and paid else found


def values(text: str) -> frozenset[str]:
    """What a text names as values (`Reading.values`), without the rest of `read`: a tenth of its cost."""
    return _values(" ".join(text.split()))


def _values(text: str) -> frozenset[str]:
    """What a text names as values: names (capitalised words, not common ones), value words, numbers."""
    names = {m[0].lower() for m in re.finditer(r"[\w'-]+", text) if m[0][:1].isupper()}
    lowered = set(words(text))
    plain = names - COMMON - STOPWORDS - FILLER - TITLES - NUMBER_WORDS  # "Is that allowed?", "Dr" Nwosu: no name
    found = {n for n in plain if not _contracted(n) and (n in CALENDAR or not n.endswith(VERBAL))}
    numbers = {m[0].rstrip(".,:") for m in NUMBER.finditer(text)} | numbers_told(text, lowered)
    return frozenset(found | numbers | (lowered & VALUE_WORDS))


def _contracted(word: str) -> bool:
    """A common word contracted ("What's", "She's", "We're", "Doesn't", "I've"), capitalised where it opens a
    sentence: no name. A name's possessive ("Dad's", "Kofi's") stays one."""
    base, _, rest = word.partition("'")
    return bool(rest) and (base in COMMON or base in STOPWORDS or word.endswith("n't"))


ONE_AS_PRONOUN = re.compile(  # "a firm one", "the one I use", "this one", "no one", "one of them": no amount
    # (possessive: a run of quotes or dashes, which both `\W` and the word may take, is not split every way)
    r"\b(?:a|an|the|this|that|which|each|every|any|no|another|other)\W++(?:[\w'-]++\W++)?one\b|\bone\W++of\b",
    re.I,
)


def numbers(values: frozenset[str]) -> frozenset[str]:
    """The values that are numbers: digits ("50", "7:30") or number words ("ten")."""
    return frozenset(v for v in values if NUMBER.fullmatch(v) or v in NUMBER_WORDS)


def numbers_told(text: str, lowered: set[str] | None = None) -> set[str]:
    """The number words a text says as amounts: "one" only where it counts something ("one cat", "just one",
    "down to one"), not as a pronoun ("a firm one", "the one I use", "one of them")."""
    told = (set(words(text)) if lowered is None else lowered) & NUMBER_WORDS
    if "one" in told and len(re.findall(r"\bone\b", text, re.I)) <= len(ONE_AS_PRONOUN.findall(text)):
        told.discard("one")
    return told


def _asks(lowered: str) -> bool:
    """Every sentence that says something is a question ("So you moved? Nice." asks; "Wednesdays are chaos.
    Could we switch to Saturdays?" says something first; so does "I take 50mg every morning, can you remind
    me?": a request after a statement is no question about it; nor is "Can you help me email my manager, Rosalind?",
    a request that tells of the speaker's things)."""
    said = [STATED_THEN_ASKED.sub(r"\1.", s) for s in sentences(REQUEST.sub(".", lowered))]
    said = [s for s in said if set(words(s)) - STOPWORDS - FILLER]
    return bool(said) and all((s.endswith("?") or QUESTION_START.match(s)) and not ASKS_FOR.match(s) for s in said)


def _adds(flat: str) -> bool:
    """One more of something: a sentence says "too", "also", "another"… and names what is added, or no other
    sentence says a change ("Another email from the council. They extended again: 4 April" changes the date;
    "I've news about JET, too. They offered me a place" adds the news)."""
    said = sentences(flat)
    adding = [s for s in said if ADDS.search(s.lower())]
    changed = any(ENDS.search(s.lower()) or CHANGES.search(s.lower()) for s in said if s not in adding)
    return bool(adding) and (not changed or any(_values(s) - openers(s) for s in adding))


def sentences(text: str) -> list[str]:
    """A text's sentences, each with its closing mark."""
    return re.split(r"(?<=[.!?])\s+", text)


def told(text: str) -> str:
    """The sentences of a text that ask nothing: what it tells."""
    stated = (STATED_THEN_ASKED.sub(r"\1.", s.rstrip()) for s in sentences(text))
    return " ".join(s for s in stated if not s.endswith("?"))


@functools.lru_cache(maxsize=8192)
def read(text: str) -> Reading:
    flat = " ".join(text.split())
    lowered = flat.lower()
    clauses = []
    subject, for_me, done = IMPLIED, False, False
    for part in CLAUSE.split(flat):
        low = part.lower()
        before, subject = subject, _subject(part.strip(), subject)
        change = ENDS.search(low) or CHANGES.search(low)
        named = _touched(low, lowered)
        # someone else's doing to the speaker, in this clause or carried on ("offered me the job, at £37,000")
        direct = FOR_ME.search(low) is not None
        for_me = subject != SPEAKER and (direct or (for_me and subject == before))
        done = for_me and not OFFER.search(low) and (done or direct)  # nor what an offer carries on
        clauses.append(
            Clause(
                subject=subject,
                alias=_alias(part) if subject.startswith(f"{SPEAKER}'s ") else None,
                whose=_possessor(part, subject) if subject not in (SPEAKER, UNKNOWN, IMPLIED, THING) else None,
                slots=frozenset(s.name for s in named),
                mine=frozenset(
                    s.name for s in named if for_me or any(_my(low, m.start()) for m in s.cues.finditer(low))
                ),
                values=_values(part),
                change=change[0] if change else None,
                said=len(set(words(part)) - STOPWORDS - FILLER) > 1,
                done_to_me=done,
            )
        )
    cues = [m for pattern in (ENDS, CHANGES, WEAK) for m in pattern.finditer(lowered)]
    cue_words = {stem(w) for m in cues for w in words(m[0])}
    meaningful = {stem(w) for w in words(flat) if w not in STOPWORDS and w not in FILLER and len(w) > 1}
    ends = ENDS.search(lowered)
    return Reading(
        clauses=tuple(clauses),
        slots=frozenset(s.name for s in _touched(lowered, lowered)),
        values=_values(flat),
        content=frozenset(meaningful - cue_words),
        asks=_asks(lowered),
        adds=_adds(flat),
        hedged=_hedged(flat, clauses),
        ends=ends[0] if ends else None,
        identifiers=tuple((m[1], m[2]) for m in IDENTIFIER.finditer(lowered) if m[1] not in STOPWORDS),
        cue=min(cues, key=lambda m: m.start())[0] if cues else None,
    )


@dataclass(frozen=True)
class Said:
    """A statement read once (`said`), to compare with many: its record, words, speaker and reading."""

    record: Episode | Fact
    text: str
    speaker: str | None
    reading: Reading


def said(record: Episode | Fact | Said) -> Said:
    """A record's statement, read once (recall's time stage compares each of its pool with every other)."""
    if isinstance(record, Said):
        return record
    text = statement(record)
    return Said(record, text, speaker(record), read(text))


# -- whether a later statement updates an earlier one ----------------------------------------------------
def _same(earlier: Said, later: Said, slot: str | None, topic: frozenset[str], about: frozenset[str]) -> bool:
    """One subject: a person both are about (of `slot`, when given) — one the question asks about, when the
    earlier statement is about them (`about`); for a thing's slot (a framework, a deadline, who owns a piece
    of work), the thing both name, whoever says it, or the one thing of its kind both say is the same
    person's ("our standup is at 9:30" … "they moved our standup to 10"); a statement that names no one (a
    note) is anyone's; one about a thing ("The events budget is €120,000", THING) is its speaker's, and for no
    slot in particular anyone's to say it changed ("events got slashed to €75,000"), if both name it."""
    mine, theirs = _whose(earlier, slot), _whose(later, slot)
    if THING in mine and earlier.speaker:
        mine |= {earlier.speaker}  # a thing someone spoke of is theirs too: a question about them reaches it
    if not (mine or theirs) and _apart(earlier.text, later.text):
        return False  # two notes about different named things ("Interviewed Ines Moreau …", "Interviewed Pavel …")
    shared = (mine & theirs) - {UNKNOWN}
    if _two_of_kin(earlier, later, shared):
        return False  # "my brother Tom" and "my brother Sam": two brothers
    if earlier.speaker:  # "Harriet's mum", asked about, is who Harriet calls "Mum"
        about |= {person.removeprefix(f"{earlier.speaker}'s ") for person in about}
    if mine & about:
        return bool(shared & about)
    if slot is None and THING in mine and (topic or not _apart(earlier.text, later.text)):
        return theirs != {UNKNOWN}  # a thing's state, whoever says it changed ("the budget got cut"), not "he" alone
    if slot is not None and not SLOT_NAMES[slot].personal:
        owned = shared and topic and all(_possessed(one, slot) for one in (earlier, later))
        return any(not SLOT_NAMES[slot].cues.fullmatch(word) for word in topic) or bool(owned)
    if shared or not (mine and theirs):
        return bool(shared) or not ({UNKNOWN} & (mine | theirs))
    return False


def _two_of_kin(earlier: Said, later: Said, shared: frozenset[str]) -> bool:
    """The one person both are about is a relative one may have several of ("@'s brother"), whom each gives another
    name ("my brother Tom …", "my brother Sam …")."""
    if not shared or any(who.partition("'s ")[2] not in RELATIVES_MANY for who in shared):
        return False
    names = [{clause.alias for clause in one.reading.clauses if clause.alias} for one in (earlier, later)]
    return bool(names[0] and names[1]) and not names[0] & names[1]


def same_subject(earlier: Said, later: Said) -> bool:
    """Both statements are about one subject, whoever says them (`_same` with no slot, topic or question)."""
    return _same(earlier, later, None, frozenset(), frozenset())


def _whose(one: Said, slot: str | None) -> frozenset[str]:
    return owners(one.record, slot) if isinstance(one.record, Fact) else _owners(one.speaker, one.text, slot)


def _possessed(one: Said, slot: str) -> bool:
    """The statement says the slot's thing is the speaker's ("our standup", "they moved my shifts")."""
    return any(slot in clause.mine for clause in one.reading.clauses)


CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
    "saturdays sundays january february march april may june july august september october november december".split()
)
NO_ONE = COMMON | NUMBER_WORDS | CALENDAR  # no one's name where a clause opens: "Friday is D&D night", "Work's got …"


@functools.lru_cache(maxsize=8192)
def _mentions(text: str) -> frozenset[str]:
    """The names a text mentions past the first word of each sentence: capitalised words, not acronyms, not
    days or months, not common words."""
    found = set()
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        for word in re.findall(r"[\w'-]+", sentence)[1:]:
            low = word.lower()
            if word[:1].isupper() and not word.isupper() and low not in COMMON and low not in CALENDAR:
                found.add(low.removesuffix("'s"))
    return frozenset(found)


@functools.lru_cache(maxsize=8192)
def by_place(text: str) -> frozenset[str]:
    """The `openers` that name no value word: capitalised by their place in a text, not named by it ("Much",
    "Funny"), while "Vegan, since March." still names "vegan"."""
    return openers(text) - VALUE_WORDS


def openers(text: str) -> frozenset[str]:
    """The first words of a text's sentences that it does not also name further in ("Much", "Brand" of "Much.
    Brand new boiler"): capitalised by their place, not as names; a day or month ("Mid-May") names a time."""
    first = {m[1].lower() for m in re.finditer(r"(?:^|[.!?]\s+)([\w'-]+)", text) if m[1][:1].isupper()}
    return frozenset(w for w in first - _mentions(text) if not CALENDAR & set(w.split("-")))


def _apart(earlier: str, later: str) -> bool:
    """Both mention names, and none in common: they are about different people, places or things (a name and
    its longer form, "Postgres" and "PostgreSQL", are one)."""
    old, new = _mentions(earlier), _mentions(later)
    return bool(old and new) and not any(a[:5] == b[:5] for a in old for b in new)


IDENTIFIER = re.compile(  # "order 1417", "ticket #204", "room 12b"; not a date ("due 12 may"), a time ("opens 8 to 3")
    rf"\b([a-z]+) #?(\d[\w-]*)(?<!am)(?<!pm)(?!\w|[:.]\d| to \d| (?:{'|'.join(sorted(CALENDAR))})\b)"
)


def _other_thing(old: Reading, new: Reading) -> bool:
    """Both name a thing of one kind by different identifiers ("Order 1417" and "Order 1587")."""
    if not (old.identifiers and new.identifiers):
        return False
    mine, theirs = dict(old.identifiers), dict(new.identifiers)
    return any(kind in theirs and theirs[kind] != number for kind, number in mine.items())


def _other_claims(earlier: Episode | Fact, later: Episode | Fact) -> bool:
    """Two claims that are not one subject: of two entities or two properties ("Dario | son", "Dario | manager's
    name"), or two values of a property one holds several of ("Dario | uses | Slack", "Dario | uses | Figma").
    Consolidation supersedes one claim by another of its own subject; recall does not guess it from their words."""
    if not (isinstance(earlier, Fact) and isinstance(later, Fact)):
        return False
    keys = [(norm(one.entity or ""), norm(one.property or "")) for one in (earlier, later)]
    return all(all(key) for key in keys) and (keys[0] != keys[1] or many_valued(keys[0][1]))


def _elsewhere(new: Reading) -> bool:
    """Every change the statement says is of a subject it names ("we're moving to Tokyo, so I've swapped Italian
    for Japanese": the second change names none, and may be the one asked about)."""
    changing = [clause for clause in new.clauses if clause.change]
    return all(clause.slots for clause in changing) if changing else bool(new.slots)


def may_update(later: Episode | Fact | Said, *, present: bool = False) -> bool:
    """Whether `later` could update any statement (`update_reason`), to screen a pool before its pairs: it
    asserts (no question, no plan or maybe) and touches a subject or says a change, or names a value when the
    question asks about the present."""
    new = said(later).reading
    return not (new.asks or new.hedged) and bool(new.slots or new.ends or new.cue or (present and new.values))


def may_be_updated(earlier: Episode | Fact | Said) -> bool:
    """Whether any statement could update `earlier` (`update_reason`): it states something, and asks nothing."""
    old = said(earlier).reading
    return not old.asks and bool(old.content)


def update_reason(
    earlier: Episode | Fact | Said,
    later: Episode | Fact | Said,
    similarity: float,
    *,
    present: bool = False,
    topical: bool = False,
    asked: frozenset[str] = frozenset(),
    about: frozenset[str] = frozenset(),
    words: frozenset[str] = frozenset(),
) -> str | None:
    """Why `later` updates `earlier` ("home: moved", "manager: aisha instead of greg"), or None (the module's
    rules). `similarity`: the cosine of the two statements' stored vectors. `present`: the question asks how
    things are now (in the present tense, whether or not it says "now"): then a statement of the same kind that
    names another value updates without change language, if said in another conversation (within one, another
    value without change words is an aside or a reply: "lessons are £40" … "so £10 a head"). `topical`:
    both statements are among the best answers to the question asked, which then says what they are about:
    change language and a new value are enough, without similar vectors, unless the later statement is about
    other slots than the question's (`asked`, `questions.question_slots`). `about`: the people the question asks about
    (`people`); a statement about one of them is updated only by one about them too. `words`: the question's
    meaningful words; a later statement that says one of them stayed ("didn't touch the amlodipine") updates
    nothing. The caller checks that `later` came after `earlier`; either may be given read once (`said`)."""
    before, after = said(earlier), said(later)
    if _other_claims(before.record, after.record):
        return None  # "Dario | son | Leo" and "Dario | manager's name | Priya": two subjects, whatever the words
    old, new = before.reading, after.reading
    added = new.values - old.values
    if not (old.slots & new.slots or new.ends or new.cue or (present and added)):
        return None  # no subject both touch, no change words, no new value asked about now: no change below
    if old.asks or not old.content or new.asks or new.hedged:
        return None  # a question states nothing to update, and updates nothing; nor does a plan or a maybe
    if nochange.called_off(told(after.text).lower()):
        return None  # "Gave up on switching", "Told the conductor no": a change called off is none
    if _assistant_answers(before, after):
        return None  # "3 hours 40 … can you work out the pace?" — "Three hours forty is 5 minutes 13 a km"
    if new.ends is None and (new.adds or (new.content <= old.content and not added)):
        return None  # one more of something, or an echo: nothing the earlier did not say
    if {v for v in old.values & about if NUMBER.fullmatch(v)} - new.values or _other_thing(old, new):
        return None  # the earlier one names the thing the question asks about ("order 1417"), the later one not
    if (asked or words) and nochange.kept(after.text, asked, words):
        return None  # a partial change that says the subject asked about stayed: "moved to Wokingham, same job"
    topic = (old.content & new.content) - old.values - new.values
    shared = old.slots & new.slots
    if asked & new.slots and not asked & old.slots:
        shared &= asked  # asked about work, the earlier says only the pay: a new pay is no answer to the question
    many, why = _slot_change(before, after, sorted(shared) if similarity >= SLOT_FLOOR else [], topic, about)
    if why is not None:
        return why
    if many or (similarity < SAME_KIND and not topical) or not _same(before, after, None, topic, about):
        return None
    if similarity < SAME_KIND and asked and not (asked & new.slots) and _elsewhere(new):
        return None  # two answers to a question about a subject, but the later one changes another
    added -= by_place(after.text)  # "Much. Brand new boiler", "Funny, I was…": capitals by place
    if "?" in after.text:  # an end or a change it asks about tells none: "a gift for a colleague who's leaving?"
        new = _told_change(new, after.text)
    if new.ends or (
        added
        and (
            new.cue
            or (
                present
                and similarity >= SAME_KIND
                and not one_conversation(before.record, after.record)
                and not nochange.told_events(before.text, after.text)
            )
        )
    ):
        why = "same answer" if similarity < SAME_KIND else f"same kind ({similarity:.2f})"
        return f"{why}: {new.ends or new.cue or ', '.join(sorted(added)) or 'something new'}"
    return None


def _told_change(new: Reading, text: str) -> Reading:
    """`new` with the end and change words of the sentences it tells or requests, not of those it only asks: "What's
    a good gift for a colleague who's leaving?" tells no end; a word that needs a value beside it (WEAK: "anything else
    a new player needs?") stays."""
    kept = " ".join(s for s in sentences(text) if not s.rstrip().endswith("?") or ASKS_YOU.search(s.lower()))
    told_new = read(kept)
    weak = new.cue if new.cue and WEAK.fullmatch(new.cue) else None
    return replace(new, ends=told_new.ends, cue=told_new.cue or weak)


CONVERSATION = timedelta(hours=1)  # two turns of no given session this close are one conversation


def _assistant_answers(earlier: Said, later: Said) -> bool:
    """An assistant's (or agent's) turn in the conversation of a person's statement answers them: it works with
    what they said, it does not change it (their own later word, or a recap in another conversation, does)."""
    return (
        later.speaker in NOTE_TAKERS
        and earlier.speaker not in (None, *NOTE_TAKERS)
        and one_conversation(earlier.record, later.record)
    )


def one_conversation(earlier: Episode | Fact, later: Episode | Fact) -> bool:
    """Two turns of one conversation: one session, or, with none given, said within CONVERSATION."""
    if not (isinstance(earlier, Episode) and isinstance(later, Episode)):
        return False
    if earlier.session_id is not None or later.session_id is not None:
        return earlier.session_id == later.session_id
    return abs(later.occurred_at - earlier.occurred_at) <= CONVERSATION


def strength(why: str) -> int:
    """How much an `update_reason` says: a change of the subject itself ("deadline: brought forward") more than one
    of the same kind of statement, which says more than one of two answers to the question."""
    return 0 if why.startswith("same answer") else 1 if why.startswith("same kind") else 2


def _slot_change(
    earlier: Said, later: Said, shared: list[str], topic: frozenset[str], about: frozenset[str]
) -> tuple[bool, str | None]:
    """The change of a slot both statements touch, of one subject: change words in the slot's clause, or for a
    slot with one value at a time another value. Also whether a slot with many values (pets, tools) was
    shared without an end of one, which no other reading may then call a change."""
    old, new = earlier.reading, later.reading
    many = False
    for name in shared:
        if not _same(earlier, later, name, topic, about):
            continue
        if not SLOT_NAMES[name].single:
            if new.ends:
                return many, f"{name}: {new.ends}"
            many = True
        elif change := new.changed(name):
            return many, f"{name}: {change}"
        elif fresh := new.valued(name) - old.values:
            return many, f"{name}: {sorted(fresh)[0]} instead of {', '.join(sorted(old.valued(name))) or '?'}"
    return many, None
