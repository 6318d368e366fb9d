"""What a question asks about, in the words `mneme.language.changes` reads statements with: the people
(`people`) and the subjects (`question_slots`)."""

from __future__ import annotations

import re

from mneme.language.changes import COMMON, NUMBER, PEOPLE, read

POSSESSIVE = re.compile(rf"\b((?:the )?[\w'-]+)'s ({'|'.join(sorted(PEOPLE))})\b")


def people(question: str) -> frozenset[str]:
    """Whom and what a question asks about, as `owners` and `read` name them: "Where does Maya's sister live?"
    → maya's sister; "Who is Ravi's manager?" → ravi; "Where does the user work?" → user; "order 1417" → 1417."""
    found = {f"{m[1].lower().removeprefix('the ')}'s {m[2]}" for m in POSSESSIVE.finditer(question)}
    rest = POSSESSIVE.sub(" ", question)
    found |= {m[1].lower() for m in re.finditer(r"\b([A-Z][\w-]+)", rest) if m[1].lower() not in COMMON}
    found |= {"user"} if re.search(r"\bthe user\b", rest, re.I) else set()
    found |= {m[0] for m in NUMBER.finditer(rest)}
    return frozenset(found - QUESTION_WORDS)


QUESTION_WORDS = frozenset("what where when who whom whose why how which is are does do did can could".split())


ASKED = (  # the bare words a question uses for a slot ("where does she work?")
    ("employer", r"work|job|employ\w*|where (?:\w+ ){1,3}working"), ("home", r"live|living|lives"),
    ("diet", r"eat|eats|diet"), ("vehicle", r"drive|drives"), ("tool", r"use|uses|using"), ("name", r"called|name"),
    ("school", r"study|studies"), ("role", r"do for (?:a )?living|job title|position"),
    ("schedule", r"when is|what time|which day"),
)  # fmt: skip
ASKED_RULES = tuple((name, re.compile(rf"\b(?:{words})\b")) for name, words in ASKED)


def question_slots(question: str) -> frozenset[str]:
    """The slots a question asks about: its slot words, and the bare words questions use for them."""
    lowered = question.lower()
    return read(question).slots | {name for name, rule in ASKED_RULES if rule.search(lowered)}
