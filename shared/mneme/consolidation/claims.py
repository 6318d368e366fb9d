"""Claims from conversation, true as written: hand-written patterns, no model (chosen over a spaCy parse
by measurement; bench/claims.py gives precision and recall on labelled utterances and conversations).

A claim is (entity, property, value). The speaker owns first-person statements: "I work at Acme" said
by Sol is Sol / works at / Acme; the speaker comes from the turn's `Name:` prefix or its given speaker,
and without one first-person statements yield nothing. A turn is read sentence by sentence, clause by
clause; nothing comes from questions, hedges and hypotheticals ("might", "if", "I think"), plans and
suggestions ("I'll", "next week", "let's"), negations and old values ("no longer", "used to"), jokes
("lol"), or what others said ("apparently", "she said"). The rules themselves are in `claim_rules`,
what a value may be in `claim_values`.

`window_claims` reads a window of turns (a session in order) and may use the turns before a turn, only
where the reading is plain: the answer to a question ("Where are you working these days?" / "Acme,
since May." -> the answerer works at Acme), "he"/"she" when exactly one person was named just before,
"she's called Pickle" right after "we got a kitten", "the deadline is 14 March" right after the one
piece of work it belongs to. When unsure, nothing: a wrong fact is worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from mneme.consolidation.claim_answers import answer_claims, asked
from mneme.consolidation.claim_rules import HE, SHE, THAT, TOPIC, Found, clause_claims
from mneme.consolidation.claim_values import NAME, is_entity, value
from mneme.grounding import split_speaker


class Claim(NamedTuple):
    entity: str
    property: str
    value: str


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
TAG = re.compile(r"^(?:right|yeah|yes|no|innit|isn't it|aren't we|don't we|didn't we|correct|ok|eh|huh|or not|true)\W*$", re.I)
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
FILLER = re.compile(
    r"^(?:and|so|oh|well|yeah|yes|yep|yup|yea|ok|okay|actually|also|btw|fyi|anyway|honestly|cheers|thanks|"
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
# "she's called Pickle", "her name is Bea" (who: the one just introduced), "a greyhound called Rocket".
CALLED = re.compile(rf"^(?:(?:He|She|It|They)(?:'s| is| are)(?: called| named)|(?:His|Her|Its|Their) name is) (?P<v>{NAME})")
CALLED_KIND = re.compile(rf"^an? (?:[a-z]+ )?(?P<k>[a-z]+) (?:called|named) (?P<v>{NAME})")
INTRODUCED = re.compile(
    r"^(?:(?P<we>I|We)(?: have| just| finally| also| now)*(?: got| have got| have| adopted| rescued| bought| got ourselves)"
    r" (?:an?|another) (?:(?:new|little|tiny|rescue|baby|second) )*(?P<k>[a-z]+(?: [a-z]+)?)(?: now| too| in the end|"
    r" last \w+| this \w+)*$|(?P<my>My|Our) (?:new )?(?P<m>[a-z]+(?: [a-z]+)?) (?:is|was|has|seems|just|started))"
)
# A sentence-initial name counts as a person only when a person's verb or relation follows it.
PERSON_VERB = (
    r"(?:'s (?:new |little |big )?(?:mum|mom|dad|wife|husband|partner|sister|brother|son|daughter|kids|boyfriend|"
    r"girlfriend|birthday|family|flat|house|job)|\s+(?:moved|works|worked|lives|lived|joined|started|said|says|told|"
    r"got|just|and I|and me|is from|texted|called|rang|messaged))\b"
)
TOPICAL = ("deadline", "due date", "launch date", "go-live date", "release date", "budget")


@dataclass
class Turn:
    """One turn as read: its speaker and its asserting clauses, sentence by sentence."""

    speaker: str | None
    text: str
    sentences: list[list[str]] = field(default_factory=list)  # asserting clauses, per sentence
    questions: list[str] = field(default_factory=list)  # its questions, whole
    names: list[str] = field(default_factory=list)  # people it names (and those its pronouns resolved to)


def _speaker(speaker: str | None, text: str) -> tuple[str | None, str]:
    prefixed, body = split_speaker(text)
    who = prefixed or speaker
    if who and who[:1].islower():
        who = " ".join(w[:1].upper() + w[1:] for w in who.split())
    return who, body


def _sentences(body: str) -> list[str]:
    body = EMOJI.sub(". ", body.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"'))
    pieces: list[str] = []
    for piece in SENTENCE.split(body):
        piece = piece.strip()
        if pieces and ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        elif piece and re.search(r"\w", piece):
            pieces.append(piece)
    return pieces


def _normalise(clause: str) -> str:
    for pattern, replacement in CONTRACTIONS:
        clause = pattern.sub(replacement, clause)
    previous = None
    while previous != clause:
        previous, clause = clause, FILLER.sub("", clause).strip()
    clause = clause.strip(" .!\"'")
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
    if len(_unhedged(clauses)) < len(clauses) and sentence.rstrip().endswith("?"):
        return [], sentence
    clauses = _unhedged(clauses)
    question = sentence.rstrip().endswith("?") or bool(re.match(r"(?:what|where|when|who|why|how|which)\b", sentence, re.I))
    if question:
        if not clauses or TAG.match(clauses[-1]) or QUESTION.match(_normalise(clauses[0]) or "?") or len(clauses) < 2:
            return [], sentence
        clauses = clauses[:-1]  # "We moved to Linear, did you get the invite?": only the question goes
        return _kept(clauses), sentence
    return _kept(clauses), None


def _kept(clauses: list[str]) -> list[str]:
    kept: list[str] = []
    for clause in clauses:
        if REPORTED.search(clause):
            break  # what someone said, and all that follows it
        if not (NEGATED.search(clause) or PLANNED.search(clause) or JOKING.search(clause)):
            kept.append(_normalise(clause))
    return [c for c in kept if c]


def read(speaker: str | None, text: str) -> Turn:
    who, body = _speaker(speaker, text)
    turn = Turn(who, body)
    for sentence in _sentences(body):
        clauses, question = _asserting(sentence)
        turn.sentences.append(clauses)
        if question:
            turn.questions.append(question)
        turn.names.extend(_people(sentence))
    return turn


def _people(sentence: str) -> list[str]:
    """Names a pronoun may refer to: capitalised names not after a place preposition, not fillers."""
    found = []
    for match in re.finditer(rf"(?<![\w'])({NAME})", sentence):
        start, parts = match.start(), match[1].split()
        while parts and not is_entity(re.sub(r"'s$", "", parts[0])):  # "How's Ewan": Ewan
            start += len(parts.pop(0)) + 1
        name = re.sub(r"'s$", "", " ".join(parts))
        before = sentence[:start].rstrip().lower()
        if not name or re.search(r"\b(?:in|at|to|from|near|into|for|on|via|the|with|by|of)$", before):
            continue
        if start == 0 and not re.match(rf"{re.escape(name)}{PERSON_VERB}", sentence):
            continue  # a sentence's first word is capitalised anyway: "Work is quiet" names nobody
        found.append(name)
    return found


def _referent(turns: list[Turn], i: int, before: list[str]) -> str | None:
    """The one person named in this turn's earlier sentences or the two turns before it, else None."""
    names = {n for t in turns[max(0, i - 2) : i] for n in t.names} | {n for s in before for n in _people(s)}
    names -= {t.speaker for t in turns if t.speaker}
    return names.pop() if len(names) == 1 else None


def _introduced(clause: str, speaker: str | None) -> tuple[str, str] | None:
    """(owner, kind) when the clause introduces one thing of the speaker's: 'we got a kitten', 'my manager is…'."""
    found = INTRODUCED.match(clause)
    if not found or not speaker:
        return None
    return speaker, (found["k"] or found["m"])


def _context_claims(clause: str, speaker: str | None, antecedent: tuple[str, str] | None) -> list[Found]:
    if (found := CALLED.match(clause)) and antecedent and (name := value("name", found["v"])):
        return [Found(antecedent[0], f"{antecedent[1]}'s name", name)]
    if (found := CALLED_KIND.match(clause)) and antecedent and (name := value("name", found["v"])):
        return [Found(antecedent[0], f"{found['k']}'s name", name)]
    return []


class _Reader:
    """Reads a window turn by turn, keeping what a later turn may refer back to."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.topics: list[tuple[int, str]] = []  # (turn, thing) a deadline or budget may belong to
        self.antecedent: tuple[int, tuple[str, str]] | None = None

    def turn(self, i: int) -> list[Found]:
        turn, out = self.turns[i], []
        previous = self.turns[i - 1] if i else None
        if previous and previous.speaker != turn.speaker:
            self.antecedent = None
        for s, clauses in enumerate(turn.sentences):
            for c, clause in enumerate(clauses):
                here = self._clause(i, clause, turn, [*(", ".join(x) for x in turn.sentences[:s]), *clauses[:c]])
                out.extend(here)
                introduced = _introduced(clause, turn.speaker)
                self.antecedent = (i, introduced) if introduced else None if here else self.antecedent
        if previous and previous.speaker and turn.speaker and previous.speaker != turn.speaker:
            out.extend(answer_claims(previous.questions, turn, self.topic(i, force=True)))
        return list(dict.fromkeys(c for c in out if c.entity and c.value))

    def _clause(self, i: int, clause: str, turn: Turn, before: list[str]) -> list[Found]:
        antecedent = self.antecedent[1] if self.antecedent else None
        found = _context_claims(clause, turn.speaker, antecedent) or clause_claims(clause, turn.speaker)
        resolved = []
        for claim in found:
            entity: str | None = claim.entity
            if entity in (HE, SHE):
                entity = _referent(self.turns, i, before)
                if entity:
                    turn.names.append(entity)
            elif entity == TOPIC:
                entity = self.topic(i, force=False)
            elif entity == THAT:
                entity = None
            if entity:
                resolved.append(Found(entity, claim.property, claim.value))
                if claim.property == "owns" or entity.startswith("the "):
                    self.topics.append((i, claim.value if claim.property == "owns" else entity))
        return resolved

    def topic(self, i: int, *, force: bool) -> str | None:
        """The one piece of work a bare 'the deadline is…' belongs to: named in this turn, or (answering a
        question about it) up to three turns back."""
        previous = self.turns[i - 1] if i else None
        recent = {t for at, t in self.topics if at == i or (at >= i - 3 and (force or _asks_topical(previous)))}
        return recent.pop() if len(recent) == 1 else None


def _asks_topical(turn: Turn | None) -> bool:
    return bool(turn) and any(asked(q, TOPICAL) for q in turn.questions)  # type: ignore[union-attr]


def window_claims(turns: Sequence[tuple[str | None, str]]) -> list[tuple[int, Claim]]:
    """Every claim a window of turns states, each with the index of the turn that states it, in order.

    Each turn is (speaker, text); the speaker may also be the text's `Name:` prefix (which wins). A turn
    may take its meaning from the turns just before it where the reading is plain (see the module's
    docstring); a claim stated twice is returned for each turn that states it."""
    read_turns = [read(speaker, text) for speaker, text in turns]
    reader = _Reader(read_turns)
    return [(i, Claim(*claim)) for i in range(len(read_turns)) for claim in reader.turn(i)]


def claims(text: str, speaker: str | None = None) -> list[Claim]:
    """Every claim the utterance states, in order, without duplicates. `speaker` is used when the text
    has no `Name:` prefix."""
    return list(dict.fromkeys(claim for _, claim in window_claims([(speaker, text)])))

