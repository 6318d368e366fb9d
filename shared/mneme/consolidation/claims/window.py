"""Claims from conversation, true as written: hand-written patterns, no model (chosen over a spaCy parse
by measurement; bench/claims.py gives precision and recall on labelled utterances and conversations).

A claim is (entity, property, value). The speaker owns first-person statements: "I work at Acme" said
by Sol is Sol / works at / Acme; the speaker comes from the turn's `Name:` prefix or its given speaker,
and without one first-person statements yield nothing. Nothing comes from questions, hedges,
hypotheticals, plans, negations and old values, passing states, jokes, what others said (retold or
quoted), or an assistant's turn (`turns` reads a turn down to the clauses that assert something);
the rules are in `rules`, what a value may be in `values`.

`window_claims` reads a window of turns (a session in order) and may use the turns before a turn, only
where the reading is plain: the answer to a question or a confirmation of one (`answers`: "Where
are you working these days?" / "Acme, since May." -> the answerer works at Acme), "he"/"she" when exactly
one person was named in the turns just before, "she's called Pickle" from whoever just said "we got a
kitten", "the deadline is 14 March" from whoever just named the one piece of work it belongs to; and a
speaker's correction or retraction ("sorry, I meant Bristol", "jk": `corrections`) replaces or
takes back what they just said. When unsure, nothing: a wrong fact is worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from mneme.consolidation.claims.answers import answer_claims, asked, bounced
from mneme.consolidation.claims.corrections import corrected
from mneme.consolidation.claims.rules import CALLED_KIND, HE, SHE, THAT, TOPIC, Found, appositions, clause_claims
from mneme.consolidation.claims.turns import Mention, Turn, mentions, read
from mneme.consolidation.claims.values import NAME, value


class Claim(NamedTuple):
    entity: str
    property: str
    value: str


# "she's called Pickle", "her name is Bea" (who: the one just introduced), "a greyhound called Rocket".
CALLED = re.compile(
    rf"^(?:(?:He|She|It|They)(?:'s| is| are)(?: called| named)|(?:His|Her|Its|Their) name is) (?P<v>{NAME})"
)
INTRODUCED = re.compile(
    r"^(?:(?:I|We)(?: have| just| finally| also| now)*(?: got| have got| have| adopted| rescued| bought| got ourselves)"
    r" (?:an?|another) (?:(?:new|little|tiny|rescue|baby|second) )*(?P<k>[a-z]+(?: (?!now|too|in|last|this)[a-z]+)?)"
    r"(?: now| too| in the end|"
    r" last \w+| this \w+)*$|(?:My|Our) (?:new )?(?P<m>[a-z]+(?: [a-z]+)?) (?:is|was|has|seems|just|started))"
)
TOPICAL = ("deadline", "due date", "budget")  # what a bare "the deadline is…" may be of the work just named
TOPIC_PROPERTIES = ("owns", "responsible for")


class Antecedent(NamedTuple):
    """Something a speaker just introduced ('we got a kitten'), which 'she's called Pickle' may name."""

    turn: int
    speaker: str
    kind: str


class _Reader:
    """Reads a window turn by turn, keeping what a later turn may refer back to."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.topics: list[tuple[int, str]] = []  # (turn, thing) a deadline or budget may belong to
        self.antecedent: Antecedent | None = None

    def turn(self, i: int) -> list[Found]:
        turn, out = self.turns[i], []
        if turn.assistant:
            return []
        for s, clauses in enumerate(turn.sentences):
            for c, clause in enumerate(clauses):
                out.extend(self._clause(i, clause, [*(", ".join(x) for x in turn.sentences[:s]), *clauses[:c]]))
                if turn.owner and (found := INTRODUCED.match(clause)):
                    self.antecedent = Antecedent(i, turn.owner, found["k"] or found["m"])
        out += [claim for sentence in turn.said for claim in appositions(sentence, turn.owner)]
        previous = self.turns[i - 1] if i else None
        if previous and previous.speaker and turn.owner and previous.speaker != turn.speaker:
            for claim in answer_claims(self._asked(i, previous.questions), turn, self._hints(i)):
                out.extend(self._resolved(i, claim, [], force=True))
        return list(dict.fromkeys(c for c in out if c.entity and c.value))

    def _asked(self, i: int, questions: list[str]) -> list[str]:
        """The questions a turn answers; 'you?' asks back what the answerer asked a few turns before."""
        if not questions or not bounced(questions[-1]):
            return questions
        speaker = self.turns[i].speaker
        earlier = [t.questions[-1] for t in self.turns[max(0, i - 4) : i - 1] if t.speaker == speaker and t.questions]
        return earlier[-1:]

    def _hints(self, i: int) -> str:
        return " ".join(t.text for t in self.turns[max(0, i - 1) : i + 1])  # this turn and the one before

    def _clause(self, i: int, clause: str, before: list[str]) -> list[Found]:
        speaker = self.turns[i].owner
        found = _called(clause) or clause_claims(clause, speaker, self._hints(i))
        return [claim for found_claim in found for claim in self._resolved(i, found_claim, before, force=False)]

    def _resolved(self, i: int, claim: Found, before: list[str], *, force: bool) -> list[Found]:
        """The claim with its entity resolved (he/she, the topic, the thing just introduced), or nothing."""
        entity: str | None = claim.entity
        prop = claim.property
        if entity in (HE, SHE):
            entity = self._referent(i, before, "he" if entity == HE else "she")
        elif entity == TOPIC:
            entity = self._topic(i, force=force)
        elif entity == THAT:
            entity, prop = self._named(i, prop)
        if not entity:
            return []
        if prop in TOPIC_PROPERTIES or entity.startswith("the "):
            self.topics.append((i, claim.value if prop in TOPIC_PROPERTIES else entity))
        return [Found(entity, prop, claim.value)]

    def _named(self, i: int, prop: str) -> tuple[str | None, str]:
        """'she's called Pickle' by whoever introduced a kitten in this turn or the two before: their
        kitten's name ('a greyhound called Rocket' names its own kind)."""
        found = self.antecedent
        if not found or found.speaker != self.turns[i].speaker or i - found.turn > 2:
            return None, prop
        return found.speaker, prop.replace("{k}", found.kind)

    def _referent(self, i: int, before: list[str], pronoun: str) -> str | None:
        """The one person named in this turn's earlier sentences or the two turns before it, else None.
        Names the words mark as the other pronoun's ('my brother' for 'she') do not count; a capitalised
        first word that may be a name ('Sam and Tom came over') makes it ambiguous."""
        speaker = self.turns[i].speaker
        found = [m for t in self.turns[max(0, i - 2) : i] for m in t.mentions]
        found += [m for text in before for m in mentions(text, speaker)]
        speakers = {t.speaker for t in self.turns if t.speaker}
        found = [m for m in found if m.name not in speakers and m.pronoun in ("", pronoun)]
        names = {m.name for m in found}
        if len(names) != 1 or not any(m.certain for m in found):
            return None
        name = names.pop()
        self.turns[i].mentions.append(Mention(name, True, pronoun))
        return name

    def _topic(self, i: int, *, force: bool) -> str | None:
        """The one piece of work a bare 'the deadline is…' belongs to: named in this turn, or (answering a
        question about it) up to three turns back."""
        previous = self.turns[i - 1] if i else None
        asking = force or bool(previous and any(asked(q, TOPICAL) for q in previous.questions))
        recent = {t for at, t in self.topics if at == i or (at >= i - 3 and asking)}
        return recent.pop() if len(recent) == 1 else None


def _called(clause: str) -> list[Found]:
    if (found := CALLED.match(clause)) and (name := value("name", found["v"])):
        return [Found(THAT, "{k}'s name", name)]
    if (found := CALLED_KIND.match(clause)) and (name := value("name", found["v"])):
        return [Found(THAT, f"{found['k']}'s name", name)]
    return []


def window_claims(turns: Sequence[tuple[str | None, str]]) -> list[tuple[int, Claim]]:
    """Every claim a window of turns states, each with the index of the turn that states it, in order.

    Each turn is (speaker, text); the speaker may also be the text's `Name:` prefix (which wins). A turn
    may take its meaning from the turns just before it where the reading is plain (see the module's
    docstring), and corrects what the speaker just said ("sorry, I meant Bristol": `corrections`); a
    claim stated twice is returned for each turn that states it."""
    read_turns = [read(speaker, text) for speaker, text in turns]
    reader = _Reader(read_turns)
    found = [(i, claim) for i in range(len(read_turns)) for claim in reader.turn(i)]

    def before(i: int, words: str) -> list[Found]:  # what turn i says before its correction
        words = words.rstrip(" ,;:-–—")
        return [Found(*c) for j, c in window_claims([*turns[:i], (read_turns[i].speaker, words)]) if j == i]

    return [(i, Claim(*claim)) for i, claim in corrected(read_turns, found, before)]


def claims(text: str, speaker: str | None = None) -> list[Claim]:
    """Every claim the utterance states, in order, without duplicates. `speaker` is used when the text
    has no `Name:` prefix."""
    return list(dict.fromkeys(claim for _, claim in window_claims([(speaker, text)])))
