"""Claims from conversation: hand-written patterns, no model (chosen over a spaCy parse by measurement,
see bench/claims.py and docs in the issue-16 note).

A claim is (entity, property, value). The speaker of an utterance is the entity of its first-person
statements; it comes from a `Name:` prefix of the text (the extract stage writes one from the
episode's `speaker` metadata when the text has none). Without a known speaker, first-person statements
yield nothing. Questions, hedges ("might", "I'd love to"), negations ("no longer", "not ... anymore",
"used to") and everything that matches no pattern yield nothing: a wrong fact is worse than none.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mneme.grounding import split_speaker
from mneme.text import MONTH


class Claim(NamedTuple):
    entity: str
    property: str
    value: str


SENTENCE = re.compile(r"(?<=[.!?])\s+")
CLAUSE = re.compile(r"\s*(?:[,;]|\s-\s|\bbut\b)\s*")
NEGATED = re.compile(
    r"\b(?:not|never|no longer|n't|anymore|any more|used to|stopped|quit|ex-|former(?:ly)?)\b|n't\b", re.I
)
HEDGED = re.compile(
    r"\b(?:might|(?-i:may)|maybe|perhaps|would|could|should|'d|want(?:s|ed)? to|hope|hoping|wish|plan(?:ning)? to|"
    r"thinking (?:of|about)|going to|if|probably|guess|think|considering)\b",
    re.I,
)
NAME = r"[A-Z][\w&'.-]*(?:(?: (?:of|de|van|la|le|du|da))? [A-Z][\w&'.-]*)*"
PLACE = NAME
RELATIONS = (
    "mum mom mother dad father sister brother wife husband partner son daughter boyfriend girlfriend "
    "friend cousin aunt uncle grandma grandmother grandpa grandfather boss flatmate roommate"
).split()
NUMBER = r"(?:\d+|two|three|four|five|six|seven|eight|nine|ten)"
HAVE_NOT = {"question", "questions", "meeting", "problem", "problems", "idea", "call", "doubt", "feeling", "minute"}
# Cut a value at the first qualifier: "Berlin last year" -> "Berlin", "Premium since the upgrade" -> "Premium".
QUALIFIER = re.compile(
    r"[,;()!?]|\.(?:\s|$)|\s(?:since|from|as of|until|because|according to|now|currently|again|usually|"
    r"for|and (?:he|she|they|it|i|we|you|so|then|that|this)|anyway|by the way|"
    r"these days|hands down|honestly|originally|actually|last|this|next|in (?:the )?(?:spring|summer|autumn|"
    rf"fall|winter|{MONTH}|"
    r"\d{4})|for (?:work|tickets|years|now)|only|too|as well|instead\b.*|though|fluently|right now|lately)\b",
    re.I,
)
ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
# A possessive value that is a location or a state, not a value: "is in Hove", "is broken", "is paid monthly".
# Nor is a place or time relative to the speaker ("is here", "was last weekend"), nor a pronoun.
NOT_A_VALUE = re.compile(
    r"^(?:in|on|at|from|with|for|to|by|near|over|under|out|off|up|down|still|so|very|really|quite|too|"
    r"also|just|always|never|not|paid|done|gone|broken|made|kept|sent|set|\w+ed|\w+ing|"
    r"here|there|this|that|these|those|it|everything|nothing|something|anything|everywhere|somewhere|"
    r"yesterday|today|tonight|tomorrow|soon|now|then|later|earlier|ago|last|next|every)\b",
    re.I,
)


PREPOSITION = re.compile(r"^(?:in|on|at|from|with|for|to|by|near)\b", re.I)


def clean(value: str) -> str:
    """The value up to its first qualifier, without a leading article or trailing punctuation."""
    value = re.sub(r"^(?:now|currently)\s+", "", value.strip(), flags=re.I)
    value = QUALIFIER.split(value, maxsplit=1)[0].strip(" .'\"")
    return ARTICLE.sub("", value).strip()


def _name(text: str) -> str | None:
    found = re.match(rf"(?:the )?({NAME})", text)
    return clean(found[1]) if found else None


SUBJECT = r"^(?:I|We)(?: (?:have|'ve|just|recently|finally|now|also|all))*"
I_AM = r"^I(?:'m| am)"
# Per property, alternative patterns (the first that matches wins); the value is the group `v`.
FIRST_PERSON: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "lives in",
        (
            rf"{SUBJECT} (?:moved|relocated) to (?:an? |the )?(?:[a-z][\w-]* )*?(?:in )?(?P<v>{PLACE})",
            rf"{SUBJECT} (?:live|am living|'m living|are living) (?:in|near) (?P<v>{PLACE})",
            rf"{I_AM} (?:now )?(?:based |living )?in (?P<v>{PLACE}) now\b",
            rf"{I_AM} based in (?P<v>{PLACE})",
            rf"^I work remotely from (?P<v>{PLACE})",
        ),
    ),
    ("from", (rf"{I_AM} (?:originally )?from (?P<v>{PLACE})",)),
    (
        "works at",
        (
            rf"{SUBJECT} work (?:at|for) (?:the )?(?P<v>{NAME})",
            rf"{SUBJECT} (?:joined|started at|started working at) (?:the )?(?P<v>{NAME})",
            rf"{I_AM} an? [a-z][\w -]*? (?:at|for) (?:the )?(?P<v>{NAME})",
        ),
    ),
    (
        "works as",
        (
            rf"{SUBJECT} (?:work|am working|'m working)\b.*?\bas (?:an? )?(?P<v>[a-z][\w -]*)",
            rf"{I_AM} an? (?P<v>[a-z][\w -]*?) (?:at|for) (?:the )?{NAME}",
            rf"{I_AM} an? (?P<v>[a-z][\w -]*?) by (?:trade|profession)",
        ),
    ),
    (
        "uses",
        (
            rf"{SUBJECT} (?:switched|migrated|changed|moved over) (?:over )?to (?:the )?(?P<v>\w[\w .&+-]*)",
            rf"{SUBJECT} moved from {NAME} to (?P<v>{NAME})",
            rf"{SUBJECT} dropped {NAME} for (?P<v>{NAME})",
            rf"{SUBJECT} use (?:the )?(?P<v>[A-Za-z][\w .&+-]*)",
        ),
    ),
    (
        "age",
        (
            rf"{I_AM} (?P<v>\d{{1,3}})(?: years old)?\b(?! (?:minutes|hours|days|weeks|months|percent|%))",
            r"^I (?:just |recently )?turned (?P<v>\d{1,3})\b",
        ),
    ),
    ("allergic to", (rf"{I_AM} (?:very |severely |also )?allergic to (?P<v>[\w -]+)",)),
    (
        "has",
        (
            rf"^(?:I|We) (?:now )?have (?P<v>{NUMBER} [a-z]+s)\b",
            rf"^I (?:now )?have an? (?!(?:{'|'.join(HAVE_NOT)})\b)(?P<v>[a-z]+)\b.*\bnow\b",
        ),
    ),
    ("speaks", (rf"^I speak (?P<v>{NAME})",)),
    (
        "studies",
        (
            rf"{I_AM} (?:studying|doing a degree in) (?P<v>[a-z][\w ]*?)(?: at | in |$|\.)",
            r"^I study (?P<v>[a-z][\w ]*?)(?: at | in |$|\.)",
        ),
    ),
    ("name", (rf"^(?:My name is|Call me|I'm called) (?P<v>{NAME})",)),
)
FIRST_PERSON_RULES = tuple((prop, tuple(re.compile(p) for p in patterns)) for prop, patterns in FIRST_PERSON)
LEADING_FILLER = re.compile(r"^(?:and|so|oh|well|yeah|yes|actually|also)\s*,?\s+", re.I)


def _first_person(clause: str, speaker: str) -> list[Claim]:
    """Statements whose subject is the speaker (I, we, my, our)."""
    s = LEADING_FILLER.sub("", clause)
    out: list[Claim] = []
    for prop, patterns in FIRST_PERSON_RULES:
        found = next((m for p in patterns if (m := p.match(s))), None)
        if found and (value := clean(found["v"])):
            out.append(Claim(speaker, prop, value))
    return out + _possessive(s, speaker)


def _possessive(s: str, speaker: str) -> list[Claim]:
    """'My favourite X is Y', 'my X is Y', 'my X's name is Y', 'my dog is called Y', 'my brother lives in Z'."""
    if m := re.match(r"^(?:My|Our) favou?rite ([a-z]+(?: [a-z]+)?) (?:is|are) (.+)", s):
        value = clean(m[2])
        return [Claim(speaker, f"favourite {m[1]}", value)] if value and not PREPOSITION.match(value) else []
    if m := re.match(rf"^My ({'|'.join(RELATIONS)}) (lives in|moved to|works (?:at|for)) (?:the )?(\w.*)", s):
        prop = "lives in" if m[2] in ("lives in", "moved to") else "works at"
        value = clean(m[3])
        return [Claim(f"{speaker}'s {m[1]}", prop, value)] if value else []
    if m := re.match(r"^(?:My|Our) ([a-z][\w'-]*(?: [a-z][\w'-]*){0,2}) (?:is|are) (?:called|named) (.+)", s):
        value = clean(m[2])
        return [Claim(speaker, f"{m[1]}'s name", value)] if value else []
    if m := re.match(r"^(?:My|Our) ([a-zA-Z][\w'-]*(?: [a-zA-Z][\w'-]*){0,2}) (?:is|are) (.+)", s):
        noun, rest = m[1], m[2]
        if noun.split()[-1] in RELATIONS and re.match(r"(?:an?|the) ", rest):
            return []  # "my mum is a teacher", "my brother is an idiot": a judgement or a job, not a value
        if NOT_A_VALUE.match(rest) or re.match(r"(?:an? )?(?:bit|lot|little|mess|pain|nightmare)\b", rest):
            return []
        value = clean(rest)
        return [Claim(speaker, noun, value)] if value and len(value.split()) <= 6 else []
    return []


PATTERNS = (
    re.compile(
        r"^(?P<entity>[A-Z][\w&.' -]{1,60}?)'s (?P<property>[A-Za-z][\w -]{1,40}?) "
        r"(?:is|are|was|were|is now|has changed to|changed to|moved to) (?P<value>[^;]{1,80})"
    ),
    re.compile(
        r"^The (?P<property>[A-Za-z][\w -]{1,40}?) (?:of|for) (?P<entity>[A-Z][\w&.' -]{1,60}?) "
        r"(?:is|are|was|were|is now) (?P<value>[^;]{1,80})"
    ),
)
THIRD_PERSON = re.compile(
    rf"^(?P<entity>{NAME}) (?P<verb>lives in|moved to|works (?:at|for)|joined) (?:the )?(?P<value>\w.*)"
)
NOT_ENTITIES = {"I", "We", "You", "He", "She", "They", "It", "My", "Our", "Your", "The", "This", "That", "There"}


def _third_person(s: str) -> list[Claim]:
    for pattern in PATTERNS:
        if m := pattern.match(s):
            value = clean(m["value"])
            entity = m["entity"].strip()
            if value and not NOT_A_VALUE.match(value) and entity.split()[0] not in NOT_ENTITIES:
                return [Claim(entity, m["property"].strip(), value)]
            return []
    if (m := THIRD_PERSON.match(s)) and m["entity"].split()[0] not in NOT_ENTITIES:
        prop = "works at" if m["verb"] in ("works at", "works for", "joined") else "lives in"
        value = clean(m["value"])
        return [Claim(m["entity"], prop, value)] if value else []
    return []


QUESTION = re.compile(
    r"^(?:do|does|did|is|are|was|were|can|could|will|would|have|has|had|what|where|when|who|why|how|which|so|"
    r"and|or|but|right|really)\b",
    re.I,
)


def claims(text: str, speaker: str | None = None) -> list[Claim]:
    """Every claim the utterance states, in order, without duplicates. `speaker` is used when the text
    has no `Name:` prefix."""
    prefixed, body = split_speaker(text)
    who = prefixed or speaker
    found: list[Claim] = []
    for sentence in SENTENCE.split(body):
        sentence = sentence.strip()
        if not sentence or HEDGED.search(sentence):
            continue
        clauses = CLAUSE.split(sentence)
        if sentence.endswith("?"):  # "We moved to Linear, did you get the invite?": only the question goes
            clauses = clauses[:-1] if len(clauses) > 1 and not QUESTION.match(clauses[0]) else []
        for clause in clauses:
            if not clause or NEGATED.search(clause):
                continue
            clause = clause[0].upper() + clause[1:] if clause[:2] != "I'" else clause
            if who and re.match(r"(?:I|We|My|Our)\b", clause):
                found.extend(_first_person(clause, who))
            else:
                found.extend(_third_person(clause))
    return list(dict.fromkeys(c for c in found if c.value and c.entity))
