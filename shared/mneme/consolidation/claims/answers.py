"""Answers to questions: the one place a claim comes from two turns together.

"Where are you working these days?" / "Acme, since May." states that the answerer works at Acme, though
neither turn does alone. Only plain readings count: the previous turn, by someone else, asks exactly one
question of a known shape ("where do you live", "what's your dog called", "who owns the billing
migration", "what's the deadline for X"), addressed to nobody else by name; the answer's first clause is
the value itself ("Acme", "in York", "Product designer", "me"), of the kind the question asks for. A
hedge, a question back, a joke or a negation gives nothing (`claims` has already dropped those clauses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from mneme.consolidation.claims.rules import CALLED_KIND, THAT, TOPIC, Found, clause_claims
from mneme.consolidation.claims.turns import HEDGED, JOKING, NEGATED, Turn, normalise
from mneme.consolidation.claims.values import FAMILY, NAME, clean, is_entity, is_property, value

GUARDED = re.compile(f"{HEDGED.pattern}|{NEGATED.pattern}|{JOKING.pattern}", re.I)


class Asked(NamedTuple):
    entity: str | None  # None: the answerer (or, for "owns", the person the answer names)
    property: str
    kind: str  # the kind of value the answer must be; "owner": the answer names who
    thing: str | None = None  # what is owned, for "who owns X"


THING = rf"(?P<x>the [a-z][\w -]*?|{NAME})"
SKIP_PROPERTIES = frozenset(
    "plan plans problem deal point take excuse secret opinion guess issue question status situation eta "
    "thoughts view mood vibe story news weekend day week".split()
)
SHAPES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern, re.I), prop, kind)
    for pattern, prop, kind in (
        (r"\bwhere (?:are|do) you (?:work|working)(?: now| these days| at the moment)?\W*$", "works at", "org"),
        (r"\bwho (?:do|are) you (?:work|working) for(?: now| these days)?\W*$", "works at", "org"),
        (r"\bwhere (?:do|are) you (?:live|living|based)(?: now| these days| at the moment)?\W*$", "lives in", "place"),
        (r"\bwhere(?:'s| is) home(?: now| these days)?\W*$", "lives in", "place"),
        (r"\bwhere are you (?:originally )?from\W*$|\bwhere did you grow up\W*$", "from", "place"),
        (r"\bwhat do you do(?: for (?:work|a living)| there| now| these days| exactly)?\W*$", "works as", "role"),
        (r"\bwhat(?:'s| is) your (?:job|role|job title)(?: now| these days| there)?\W*$", "works as", "role"),
        (r"\bhow old are you\W*$", "age", "age"),
        (r"\bwhat (?:do|does) (?:you|your team) use(?: for [\w ]+)?\W*$", "uses", "product"),
    )
)
YOUR = re.compile(
    r"\b(?:what|who)(?:'s| is| are) your (?:new |current )?(?P<p>[a-z][\w'-]*(?: [a-z][\w'-]*){0,2}?)"
    r"(?P<called> called|'s name)?\W*$",
    re.I,
)
WHO_OWNS = re.compile(
    rf"\bwho(?:'s| is)? (?:picking up|taking|handling|running|leading|owning|owns|looking after|in charge of|"
    rf"responsible for) {THING}\W*$",
    re.I,
)
WHATS_THE = re.compile(
    rf"\b(?:what|when)(?:'s| is) the (?P<p>deadline|due date|launch date|go-live date|release date|budget)"
    rf"(?: for {THING})?\W*$",
    re.I,
)
CARED_FOR = frozenset([*FAMILY, *"grandad granddad gran granny nan nana baby dog dogs cat cats pets kids".split()])
ME = re.compile(r"^(?:me|I do|I am|I will|mine|myself|that's me|that is me|me again)$", re.I)


ADDRESSED_FIRST, ADDRESSED_LAST = re.compile(rf"^({NAME}),"), re.compile(rf",\s*({NAME})\W*$")
HOW_OLD = re.compile(rf"\bhow old (?:is|are) your (?P<rel>{'|'.join(FAMILY)})\W*$", re.I)
WHAT_CALLED = re.compile(
    r"\bwhat(?:'s| is| are)(?: (?:he|she|it|they) called| (?:his|her|its|their) names?)\W*$"
    r"|\bwhat did you (?:call|name) (?:him|her|it|them)\W*$",
    re.I,
)
YES = re.compile(
    r"^(?:yes|yep|yeah|yup|yea|correct|exactly|indeed|that's right|that is right|right|sure is|sure)\b", re.I
)
TAGGED = re.compile(
    r"^(?:so |and |oh )?(?P<s>.+?),? (?:right|yeah|no|correct|yes|innit|isn't it|aren't you|don't you|didn't you|"
    r"don't we|didn't we|aren't we|isn't that right|am I right)\W*$",
    re.I,
)
INVERTED = (
    (re.compile(r"^(?:so |and )?(?:do|does) you (?P<s>.+?)\W*$", re.I), "I "),
    (re.compile(r"^(?:so |and )?are you (?P<s>.+?)\W*$", re.I), "I am "),
    (re.compile(r"^(?:so |and )?have you (?:got )?(?P<s>.+?)\W*$", re.I), "I have "),
    (re.compile(r"^(?:so |and )?is your (?P<s>.+?)\W*$", re.I), "My "),
)
SECOND_PERSON = ((r"\byou're\b", "I am"), (r"\byou are\b", "I am"), (r"\byour\b", "my"), (r"\byours\b", "mine"),
                 (r"\byou\b", "I"))  # fmt: skip


def asked(question: str, properties: Sequence[str]) -> bool:
    """Does the question ask for one of these properties ("what's the deadline?")?"""
    found = WHATS_THE.search(question)
    return found is not None and found["p"].lower() in properties


PETS = re.compile(r"\bdo you have (?:any )?(?:pets?|animals|a (?:dog|cat|pet))\W*$", re.I)
COURTESY = re.compile(
    r",?\s+(?:if (?:you don't|u dont) mind[\w ]*|out of (?:interest|curiosity)|if I may ask)\W*$", re.I
)
SCOFF = re.compile(
    r"^(?:(?:yeah|yes|yep|sure|right),? (?:right|sure|yeah|no)\b|as if\b|i wish\b|if only\b|in my dreams\b)", re.I
)
PREDICATE = re.compile(
    r"\s*(?:'s\b|(?:is|are|was|were|has|have|had|does|do|did|will|would|can|could|should|keeps?|goes|went|says|"
    r"said|seems|looks|sounds|feels|loves|hates|gets|got|makes|made|never|always|just|really)\b)",
    re.I,
)
PARTLY = re.compile(r"\b(?:mostly|partly|ish|more or less|almost|nearly|in a way|technically|half)\b", re.I)
BOUNCE = re.compile(r"^(?:and |what about |how about )?(?:you|u|yourself)\W*$", re.I)


def bounced(question: str) -> bool:
    """'you?', 'and you?': the question just answered, asked back."""
    return bool(BOUNCE.match(question.strip().split(", ")[-1]))


def _shape(question: str, answerer: str) -> Asked | None:
    question = COURTESY.sub("", question)
    question = re.sub(
        r"\s+(?:again|then|btw|by the way|now|originally|exactly|these days|at the moment)?\W*$", "", question
    )
    if PETS.search(question):
        return Asked(None, "{k}'s name", "pet")
    for pattern, prop, kind in SHAPES:
        if pattern.search(question):
            return Asked(None, prop, kind)
    if (found := WHO_OWNS.search(question)) and not _cared_for(found["x"]):
        return Asked(None, "owns", "owner", clean(found["x"]))  # "who's taking the X account now Sam's left"
    if (found := WHATS_THE.search(question)) and (
        found["x"] or found["p"].lower() in ("deadline", "due date", "budget")
    ):
        return Asked(found["x"] or TOPIC, found["p"].lower(), "answer")  # "the launch date" names no owner
    if found := HOW_OLD.search(question):
        return Asked(f"{answerer}'s {found['rel'].lower()}", "age", "age")
    if WHAT_CALLED.search(question):
        return Asked(THAT, "{k}'s name", "name")
    if (found := YOUR.search(question)) and is_property(found["p"]) and found["p"] not in SKIP_PROPERTIES:
        if found["called"]:
            return Asked(None, f"{found['p']}'s name", "name")
        return Asked(None, found["p"], "answer")
    return None


def _cared_for(thing: str) -> bool:
    """Someone looked after is no piece of work owned: "Who's looking after Grandad then?" / "Dr Oyelaran" is not
    "Dr Oyelaran owns Grandad"."""
    return thing.lower().rsplit(maxsplit=1)[-1] in CARED_FOR


def _addressed_elsewhere(question: str, answerer: str) -> bool:
    """'Tomasz, where do you work?' answered by someone else is not their answer."""
    found = ADDRESSED_FIRST.match(question) or ADDRESSED_LAST.search(question)
    return found is not None and found[1] != answerer and is_entity(found[1])


def _answer_value(asked: Asked, clause: str) -> str | None:
    """The value the answer gives: the clause itself or its head ("Acme since May"), never the subject of a
    sentence of its own ("Slack is down again" answers no "where do you live?")."""
    if asked.kind == "place":
        clause = re.sub(r"^(?:I am |we are |We are )?(?:in|near|just outside|outside|based in) ", "", clause)
    if asked.kind == "org":
        clause = re.sub(r"^(?:I am |We are |I work )?(?:at|for|with) ", "", clause)
    said = value(asked.kind, clause, asked.property)
    at = clause.find(said) if said else -1
    return said if said and not (at >= 0 and PREDICATE.match(clause, at + len(said))) else None


def _confirmed(question: str, answer: Turn, hints: str) -> list[Found]:
    """'So you live in Berlin, right?' / 'Yes!': what the question says, said by the one who confirms it
    ('yeah right', 'as if', a yes that asks back are no yes)."""
    first = answer.first.strip()
    if not YES.match(first) or len(first.split()) > 8 or GUARDED.search(first) or SCOFF.match(first):
        return []
    if any(GUARDED.search(said) or PARTLY.search(said) for said in answer.said):
        return []  # "yes! well, mostly"
    if first.endswith("?"):
        return []
    statement = None
    if found := TAGGED.match(question):
        statement = found["s"]
    for pattern, opening in INVERTED:
        if statement is None and (found := pattern.match(question)):
            statement = opening + found["s"]
    if not statement or GUARDED.search(statement):
        return []
    for person, replacement in SECOND_PERSON:
        statement = re.sub(person, replacement, statement, flags=re.I)
    return clause_claims(normalise(statement), answer.owner, hints)


def answer_claims(questions: Sequence[str], answer: Turn, hints: str) -> list[Found]:
    """What the answer's first clause states, read as the answer to the one question asked before it (a
    topic or a thing just introduced stay placeholders for the reader to resolve). A hedge or a joke
    anywhere in the answer's first sentence, or a negation in its first clause, and nothing."""
    if not answer.owner or not answer.sentences or HEDGED.search(answer.first) or JOKING.search(answer.first):
        return []
    shapes = [(q, s) for q in questions if (s := _shape(q, answer.owner))]
    if not shapes and questions and not _addressed_elsewhere(questions[-1], answer.owner):
        return _confirmed(questions[-1], answer, hints)  # "yes" answers the last question asked
    if len(shapes) != 1 or not answer.sentences[0] or _addressed_elsewhere(shapes[0][0], answer.owner):
        return []
    shape, clause = shapes[0][1], answer.sentences[0][0]
    if shape.kind == "pet":  # "do you have any pets?" / "a very old cat called Dennis"
        pet = CALLED_KIND.match(clause)
        named = value("name", pet["v"]) if pet else None
        return [Found(answer.owner, f"{pet['k']}'s name", named)] if pet and named else []
    if shape.kind == "owner":
        owner = answer.owner if ME.match(clause) else re.sub(r" (?:does|is|will|has it)$", "", clause)
        ok = shape.thing and (owner == answer.owner or is_entity(owner))
        return [Found(owner, "owns", shape.thing)] if ok and shape.thing else []
    said = _answer_value(shape, clause)
    entity = shape.entity or answer.owner
    return [Found(entity, shape.property, said)] if said else []
