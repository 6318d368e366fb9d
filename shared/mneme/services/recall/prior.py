"""Priors on what a candidate says, whatever the query's words: recall's fuse stage applies them.

A conversation's turns are not all memories. A turn of a few words or one that hands the conversation
over with a question ("Ha! Poor Leo.", "How are the kids?") shares the query's words and meaning with
the turns that answer it and rarely answers anything itself (`substance`); a chat assistant's turn
advises, echoes and asks, while what the user said is what a memory of the conversation is for
(`assistant`). A question about how things are that asks for a value ("Where does the team log bugs?") is
answered by a turn that names one; a turn naming none ("Save-the-dates next, then.") rarely answers it
(`answerless`); one asking for an amount, a count or a time of day ("How much rent does she pay?") is answered by
a turn that tells a number (`quantityless`). All only lower a score, only for episodes, and say so in `scores`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mneme.language import changes
from mneme.language.text import meaningful_words
from mneme.models import Episode
from mneme.services.indexing import speaker
from mneme.services.recall.time import TOLD

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate

SUBSTANCE_WORDS = 7  # an episode with fewer meaningful words than this says little (see `substance`)
SUBSTANCE_FLOOR = 0.3  # ... it ranks ×(FLOOR + (1 - FLOOR) × words / SUBSTANCE_WORDS)
QUESTION_FACTOR = 0.7  # an episode that ends by asking ("And Léa?", "How are the kids?") ranks this much lower
ASSISTANT_FACTOR = 0.6  # a chat assistant's turn, unless the query asks about what the assistant said
ASKS_ASSISTANT = re.compile(r"\b(you|your|recommend\w*|suggest\w*|assistant|advi[cs]e\w*)\b", re.IGNORECASE)
ANSWERLESS_FACTOR = 0.7  # a turn naming no value, for a question about the present asking for one
ASKS_VALUE = re.compile(  # which / what / who / where, one question: not "…, and why did he not run it?"
    r"^\W*(?:which|what|who|where)\b(?!.*\band (?:why|how|what|when|where|who|which|did|does|do|is|was)\b)",
    re.IGNORECASE,
)
ASKS_QUANTITY = re.compile(  # how much / how many / what time / how old / what dose: answered by a number
    r"^\W*(?:how (?:many|old)|what (?:time|dose|dosage)|what is the (?:price|cost|rent|fee|salary)"
    r"|how much\b(?!.*\b(?:care|cares|like|likes|love|loves|enjoy|enjoys|mind|minds|value|values|look|looks|help|"
    r"helps|trust|trusts|miss|misses|want|wants|matter|matters|know|knows|worry|worries|think|thinks)\b))\b",
    re.IGNORECASE,
)
QUANTITY_WORDS = re.compile(
    r"\b(?:noon|midday|midnight|dozen|couple|pair|both|none|single|once|twice|double|triple|"
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|zero|thirteen|fourteen|sixteen|seventeen|"
    r"eighteen|nineteen|sixty|seventy|eighty|ninety|million|billion|quarter|quid)\b",
    re.IGNORECASE,
)


def weigh(candidate: Candidate, about_assistant: bool) -> None:
    """Both priors; `about_assistant` (`asks_about_assistant`, read once a query) spares the assistant's turns."""
    substance(candidate)
    if not about_assistant:
        assistant(candidate)


def asks_about_assistant(query: str) -> bool:
    """Does the query ask about the assistant's own words ("what did you recommend")?"""
    return ASKS_ASSISTANT.search(query) is not None


def assistant(candidate: Candidate) -> None:
    """A chat assistant's turn (role or speaker `assistant`) advises, echoes and asks; what the user said
    is what a memory of the conversation is for. It ranks ×ASSISTANT_FACTOR (`scores.assistant`); `weigh`
    leaves it alone when the query asks about the assistant's own words."""
    record = candidate.record
    if not isinstance(record, Episode):
        return
    if "assistant" not in (record.metadata.get("role"), (speaker(record) or "").lower()):
        return
    candidate.scores["assistant"] = ASSISTANT_FACTOR
    candidate.score *= ASSISTANT_FACTOR


def substance(candidate: Candidate) -> None:
    """What an episode says, as a prior: a turn of a few words ("Ha! Poor Leo.", "Tell me everything.")
    or one that hands the conversation over with a question shares the query's words and meaning with the
    turns that answer it, and rarely answers anything itself. An episode with fewer than SUBSTANCE_WORDS
    meaningful words ranks lower in proportion, one that ends with a question ×QUESTION_FACTOR
    (`scores.substance`: the factor)."""
    record = candidate.record
    if not isinstance(record, Episode):
        return
    text = (record.search_text or record.content).strip()
    factor = min(1.0, SUBSTANCE_FLOOR + (1 - SUBSTANCE_FLOOR) * len(meaningful_words(text)) / SUBSTANCE_WORDS)
    if text.endswith("?"):
        factor *= QUESTION_FACTOR
    if factor < 1:
        candidate.scores["substance"] = round(factor, 6)
        candidate.score *= factor


def asks_value(query: str, truth: str | None) -> bool:
    """Does the query ask for a value of how things are now (`truth`: `time.truth_mode`, "present")? When and
    past-tense questions are the time stage's ("says when", the value before a change)."""
    return truth == "present" and ASKS_VALUE.match(query) is not None


def asks_quantity(query: str) -> bool:
    """Does the query ask for a quantity: an amount, a count, an age, a dose or a time of day?"""
    return ASKS_QUANTITY.match(query) is not None


def quantityless(candidate: Candidate) -> None:
    """For a question `asks_quantity` says asks for an amount, a count or a time of day: an episode that tells
    no number ("Draft a challenge please." beside "£875 a month, as before"; the "one" of "a firm one" is none,
    that of "just one" is) rarely answers it. It ranks ×ANSWERLESS_FACTOR (`scores.quantityless`)."""
    record = candidate.record
    if not isinstance(record, Episode):
        return
    text = changes.told(record.search_text or record.content)
    if changes.NUMBER.search(text) or QUANTITY_WORDS.search(text) or changes.numbers_told(text):
        return
    candidate.scores["quantityless"] = ANSWERLESS_FACTOR
    candidate.score *= ANSWERLESS_FACTOR


def asks_person(query: str) -> bool:
    """Does the query ask who is someone now ("Who walks the dog?"), answered by a name and never by a number alone?
    Not who did something ("Who moved in with them in August?": the turns after it say "she")."""
    asks = re.match(r"^\W*(?:who|whom|whose)\s+(\w+)", query, re.IGNORECASE)
    return asks is not None and TOLD.fullmatch(asks[1].lower()) is None


def answerless(candidate: Candidate, person: bool = False) -> None:
    """For a question `asks_value` says asks for a value: an episode that names none (no name past a sentence's
    first word, no number, no value word such as "vegan") in what it tells rarely answers it: "Save-the-dates next,
    then." beside "half my family have booked flights for the 12th"; nor does one naming values only in what it
    asks ("what's the fastest way from Amersfoort to Papendorp?"). Asked who (`person`: `asks_person`), numbers name
    nobody. It ranks ×ANSWERLESS_FACTOR (`scores.answerless`)."""
    record = candidate.record
    if not isinstance(record, Episode):
        return
    text = changes.told(record.search_text or record.content)
    named = changes.values(text) - changes.by_place(text)
    if person:  # asked who, a number names nobody: "Knee's at about 90%." beside "My physio Ingrid Vos says…"
        named -= changes.numbers(named)
    if not named:
        candidate.scores["answerless"] = ANSWERLESS_FACTOR
        candidate.score *= ANSWERLESS_FACTOR
