"""One turn of a conversation as `claims` reads it: its speaker, its sentences, and of each sentence the
clauses that assert something, with the people it mentions (whom a later "he" or "she" may mean).

Nothing asserts in a question ("We moved to Linear, did you get the invite?" keeps its first clause), a
hedge or hypothetical (its clause and what follows; all of a sentence whose first clause hedges, or
that ends in "…, I think"), a plan or suggestion ("I'll", "next week", "let's"), a negation or an old
value ("no longer", "used to", "left"), a joke ("lol"), or what someone else said ("she said…", and
all after it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from mneme.consolidation.claim_values import FAMILY, KNOWN_TOOLS, NAME, is_entity
from mneme.grounding import split_speaker
from mneme.text import STOPWORDS

EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]+")
ABBREVIATION = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|St|Mt|vs|etc|approx|e\.g|i\.e|No|Jr|Sr)|\b[A-Z])\.$")
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|(?<=[!?])(?=[A-Za-z])")
CLAUSE = re.compile(
    r",\s+|;\s*|:\s+|\s[-–—]\s|\s\((?:[^)]*)\)|\s+but\s+|"
    r"\s+(?:and|so|because|cos|as|while|though|although|whereas|plus)\s+"
    r"(?=(?:I|i|we|he|she|they|it|my|our|is|are|was|has|have|had|am|got|just|now|still|also|then|never|"
    r"haven't|hasn't|don't|doesn't|didn't|can't|isn't|wasn't|won't)\b)"
)
QUESTION = re.compile(
    r"^(?:what|where|when|who|whose|why|how|which|do|does|did|is|are|was|were|can|could|will|would|have|has|"
    r"shall|should|any|anyone|anybody|so|and|or|but|right|really|still)\b",
    re.I,
)
TAG = re.compile(
    r"^(?:right|yeah|yes|no|innit|isn't it|aren't we|don't we|didn't we|correct|ok|eh|huh|or not|true)\W*$", re.I
)
HEDGED = re.compile(
    r"\b(?:might|(?-i:may)|maybe|perhaps|would|could|should|wanna|want(?:s|ed)? to|hope|hoping|hopefully|wish|"
    r"plan(?:s|ning)? (?:to|on)|thinking (?:of|about)|if|unless|probably|possibly|guess|think|thought|suppose|"
    r"assume|reckon|considering|imagine|pretend|hypothetically|someday|one day|not sure|unsure|dunno|no idea|"
    r"kind of|sort of|supposed to|fingers crossed|apparently|allegedly|supposedly|rumou?r|seems|pretty sure|"
    r"i heard|they say|in theory|ideally|might've|could've|would've)\b|'d\b",
    re.I,
)
NEGATED = re.compile(
    r"\b(?:not|never|no longer|no more|nope|anymore|any more|used to|stopped|quit|ex|former(?:ly)?|left|"
    r"without|neither|nor|none)\b|n't\b|\bex-",
    re.I,
)
PLANNED = re.compile(
    r"\b(?:will|shall|gonna|going to|about to|tomorrow|soon|starting|from (?:monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|next)|next (?:week|month|year|spring|summer|autumn|winter|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|term)|let's|lets|try|trying|hoping|might|once)\b|'ll\b",
    re.I,
)
REPORTED = re.compile(r"\b(?:said|says|saying|told me|tells me|mentioned|reckons|heard|claims|according to)\b", re.I)
JOKING = re.compile(r"\b(?:lol|lmao|rofl|haha\w*|hehe\w*|jk|kidding|joking|/s)\b|;\)|:p\b", re.I)
TAIL = re.compile(r"(?:,?\s+(?:btw|tbh|fyi|by the way|honestly|obviously|though|x+))+$", re.I)
LAUGH = re.compile(r"^(?:ha+|hah|haha\w*|hehe\w*|lol|lmao)\b[\s,!.]*", re.I)
FILLER = re.compile(
    r"^(?:and|so|oh|well|yeah|yes|yep|yup|yea|ye|ya|yeh|yah|ok|okay|actually|also|btw|fyi|anyway|honestly|cheers|"
    r"thanks|"
    r"hey|hi|great|cool|nice|sure|right|confirmed|update|plus|but|um|umm|hmm|ah|aha|ooh|wow|then|still|"
    r"heads up|oh and|oh also|oh nice|oh wow|good news|big news|news|quick update|fun fact)\b[\s,:!.-]*",
    re.I,
)
CONTRACTIONS = (
    (re.compile(r"\b[Ii]'m\b|\b[Ii]m\b(?= [a-z])"), "I am"),
    (re.compile(r"\b[Ii]'ve\b"), "I have"),
    (re.compile(r"\bi\b"), "I"),
    (re.compile(r"\b([Ww]e)'re\b"), r"\1 are"),
    (re.compile(r"\b([Ww]e)'ve\b"), r"\1 have"),
    (re.compile(r"\b([Tt]hey)'re\b"), r"\1 are"),
    (re.compile(r"\b([Ii]t)'s\b"), r"\1 is"),
)
CAPITALISE = re.compile(r"^(?:i|we|my|our|he|she|the|his|her|its|it|they)\b")
# A sentence-initial name counts as a person for sure only when a person's verb or relation follows it.
PERSON_VERB = re.compile(
    r"(?:'s (?:new |little |big )?(?:mum|mom|dad|wife|husband|partner|sister|brother|son|daughter|kids|boyfriend|"
    r"girlfriend|birthday|family|flat|house|job|an?|the|so|really|very|such|just|now|still|been|got|from)|"
    r"\s+(?:moved|works|worked|lives|lived|joined|started|said|says|told|"
    r"got|just|and I|and me|is from|texted|called|rang|messaged))\b"
)
NAMES = re.compile(rf"(?<![\w'])({NAME})")
RELATION = re.compile(rf"\b[Mm]y ({'|'.join(FAMILY)})\b(?! {NAME})")
SHE_WORDS = frozenset(
    "mum mom mother sister wife daughter girlfriend fiancée fiancee aunt niece grandma grandmother stepmum".split()
)
HE_WORDS = frozenset(
    "dad father brother husband son boyfriend fiancé fiance uncle nephew grandpa grandfather stepdad".split()
)


LABELS = frozenset(
    "note notes update reminder ps edit fyi q a re todo action summary decision risk next important warning tip "
    "answer question context deadline owner status agenda minutes".split()
)
NOT_A_PERSON = re.compile(
    r"\b(?:in|at|to|from|near|into|for|on|via|the|with|by|of|my|our|use|using|uses|love|loved|like|watch|watched|"
    r"watching|play|played|playing|read|reading|visit|visited|visiting|bought|ordered|order|tried|eat|drink|"
    r"listen to|listening to|switched|moved|joined|downloaded|installed)$",
    re.I,
)
ASSISTANTS = frozenset("assistant ai bot chatbot system agent model copilot".split())


class Mention(NamedTuple):
    """Someone a turn names: 'Farah', or 'Ana's sister' from 'my sister'. `certain`: named as a person for
    sure (not a capitalised first word); `pronoun`: 'he'/'she' when the words say, else ''."""

    name: str
    certain: bool
    pronoun: str = ""


@dataclass
class Turn:
    """One turn as read: its speaker and its asserting clauses, sentence by sentence."""

    speaker: str | None
    text: str
    sentences: list[list[str]] = field(default_factory=list)  # asserting clauses, per sentence
    questions: list[str] = field(default_factory=list)  # its questions, whole
    mentions: list[Mention] = field(default_factory=list)  # people it names, and whom its pronouns meant
    first: str = ""  # its first sentence, as written
    said: list[str] = field(default_factory=list)  # its sentences, as written

    @property
    def owner(self) -> str | None:
        """Who owns the turn's "I": its speaker, unless an assistant ("I'm an AI assistant" is no fact to keep,
        and "as your assistant I use British spelling" none about the user)."""
        return None if (self.speaker or "").lower() in ASSISTANTS else self.speaker


def _speaker(speaker: str | None, text: str) -> tuple[str | None, str]:
    """The turn's speaker and its words: a `Name:` prefix wins, a label ("Reminder:", "Note:") is no one."""
    prefixed, body = split_speaker(text)
    if prefixed and prefixed.lower() in LABELS:
        prefixed = None
    who = prefixed or speaker
    if who and who[:1].islower():
        who = " ".join(w[:1].upper() + w[1:] for w in who.split())
    return who, body


def sentences(body: str) -> list[str]:
    body = EMOJI.sub(". ", body.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"'))
    pieces: list[str] = []
    for piece in SENTENCE.split(body):
        piece = piece.strip()
        if pieces and ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        elif piece and re.search(r"\w", piece):
            pieces.append(piece)
    return pieces


def normalise(clause: str) -> str:
    """Contractions spelled out ("I'm" -> "I am"), leading fillers gone ("yeah, so"), I/we/my capitalised."""
    for pattern, replacement in CONTRACTIONS:
        clause = pattern.sub(replacement, clause)
    previous = None
    while previous != clause:
        previous, clause = clause, FILLER.sub("", clause).strip()
    clause = TAIL.sub("", clause.strip(" .!\"'")).strip(" .!\"'")
    return clause[0].upper() + clause[1:] if CAPITALISE.match(clause) else clause


def _unhedged(clauses: list[str]) -> list[str]:
    """A hedge takes its clause and all after it; in the first clause, or alone ("…, I think"), all of them."""
    for k, clause in enumerate(clauses):
        if HEDGED.search(clause):
            return [] if k == 0 or len(clause.split()) <= 3 else clauses[:k]
    return clauses


def _asserting(sentence: str) -> tuple[list[str], str | None]:
    """The clauses of a sentence that assert something, and the sentence itself if it is a question."""
    clauses = [c.strip() for c in CLAUSE.split(sentence.rstrip(" .!?")) if c and c.strip()]
    asking = sentence.rstrip().endswith("?") or bool(
        re.match(r"(?:what|where|when|who|why|how|which)\b", sentence, re.I)
    )
    if len(_unhedged(clauses)) < len(clauses) and asking:
        return [], sentence
    clauses = _unhedged(clauses)
    if not asking:
        return _kept(clauses), None
    if len(clauses) < 2 or TAG.match(clauses[-1]) or QUESTION.match(normalise(clauses[0]) or "?"):
        return [], sentence
    return _kept(clauses[:-1]), sentence  # "We moved to Linear, did you get the invite?": the question goes


def _kept(clauses: list[str]) -> list[str]:
    kept: list[str] = []
    for clause in clauses:
        if REPORTED.search(clause):
            break  # what someone said, and all that follows it
        said = LAUGH.sub("", clause)  # "haha I'm from Slough": a laugh at what was said before, not a joke
        if not (NEGATED.search(said) or PLANNED.search(said) or JOKING.search(said)):
            kept.append(normalise(said))
    return [c for c in kept if c]


def mentions(sentence: str, speaker: str | None) -> list[Mention]:
    """The people a sentence names: capitalised names not after a place preposition, and the speaker's
    relations ("my sister" -> "Ana's sister", a 'she'). "How's Ewan" names Ewan; "Work is quiet" nobody
    for sure (a sentence's first word is capitalised anyway)."""
    found = []
    for match in NAMES.finditer(sentence):
        start, parts = match.start(), match[1].split()
        while parts and not is_entity(re.sub(r"'s$", "", parts[0])):
            start += len(parts.pop(0)) + 1
        name = re.sub(r"'s$", "", " ".join(parts))
        before = sentence[:start].rstrip().lower()
        if not name or NOT_A_PERSON.search(before) or name.lower().split()[0] in KNOWN_TOOLS:
            continue  # "in Leeds", "at Acme", "I love Netflix": a place, an employer, a thing
        certain = start > 0 or bool(PERSON_VERB.match(sentence, len(name)))
        if certain or name.lower() not in STOPWORDS:  # "Did you hear…" names nobody; "Sam and Tom…" may
            found.append(Mention(name, certain))
    if speaker:
        for relation in RELATION.finditer(sentence):
            pronoun = "she" if relation[1] in SHE_WORDS else "he" if relation[1] in HE_WORDS else ""
            found.append(Mention(f"{speaker}'s {relation[1]}", True, pronoun))
    return found


def read(speaker: str | None, text: str) -> Turn:
    who, body = _speaker(speaker, text)
    turn = Turn(who, body)
    for sentence in sentences(body):
        clauses, question = _asserting(sentence)
        turn.sentences.append(clauses)
        turn.first = turn.first or sentence
        turn.said.append(sentence)
        if question:
            turn.questions.append(question)
        turn.mentions.extend(mentions(sentence, who))
    return turn
