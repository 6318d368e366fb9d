"""One turn of a conversation as `claims` reads it: its speaker, its sentences, and of each sentence the
clauses that assert something, with the people it mentions (whom a later "he" or "she" may mean).

Nothing asserts in a question ("We moved to Linear, did you get the invite?" keeps its first clause), a
hedge or hypothetical (its clause and what follows; all of a sentence whose first clause hedges, or
that ends in "…, I think"), a plan or suggestion ("I'll", "next week", "let's"), a negation or an old
value ("no longer", "used to", "left"), a temporary state ("for the summer", "until June"), a joke ("lol",
"😂"), or what someone else said ("she said…", "he goes…", and all after it; a quoted sentence, a quoted
message "> …").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from mneme.consolidation.claims.values import FAMILY, KNOWN_TOOLS, NAME, PERSONAL, VERBISH, is_entity
from mneme.language.grounding import split_speaker
from mneme.language.text import STOPWORDS

EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]+")
JOKE_EMOJI = re.compile("[\U0001f602\U0001f923\U0001f61c\U0001f61d\U0001f609\U0001f643\U0001f60f\U0001f644\U0001f606"
                        "\U0001f480\U0001f92a\U0001f639]|(?<!\\w)(?:xD|:P|;\\))(?!\\w)")  # fmt: skip
# Someone else's words: a quoted message line ("> I live in Leeds"), a quoted sentence ('she goes "I'm
# quitting"', "his words were 'I own it'"; unclosed, to the end). A quoted name or title stays: "Circe".
QUOTED_LINE = re.compile(r"^\s*>.*$", re.M)
QUOTED = re.compile(r'"([^"]*)(?:"|$)|(?<![\w\'])\'(?=\w)(.+?)(?<=[\w.!?,])\'(?!\w)')
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
    r"i heard|they say|in theory|ideally|might've|could've|would've|believe|believes|iirc|afaik|as far as i know|"
    r"i gather|presumably|word is|bet|looks like|sounds like|must be|if i remember|doubt|except|apart from|"
    r"other than|dream|dreams|dreaming|fantasy)\b|'d\b",
    re.I,
)
NEGATED = re.compile(
    r"\b(?:not|never|no longer|no more|nope|anymore|any more|used to|stopped|quit|gave up|give up|ex|former(?:ly)?|"
    r"left|without|neither|nor|none)\b|n't\b|\bex-",
    re.I,
)
PLANNED = re.compile(
    r"\b(?:will|shall|gonna|going to|about to|tomorrow|soon|starting|from (?:monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|next)|next (?:week|month|year|spring|summer|autumn|winter|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|term)|let's|lets|try|trying|hoping|might|once)\b|'ll\b",
    re.I,
)
REPORTED = re.compile(
    r"\b(?:said|says|saying|told|tells|mentioned|reckons|heard|claims|claimed|according to|swears|swore|"
    r"insists|insisted)\b|"
    r"\b(?:goes|went|wrote|writes|texted|posted|messaged|emailed|announced|(?:is|was|'s|are|were|am|be) like)"
    r"(?=\s*[,:]|\s*$|\s+(?:I|I'm|me|my|we|our|he|she|they|his|her|that)\b)",  # 'she goes, I'm quitting'
    re.I,
)
# A state that holds only for a while: "I'm living in Leeds for the summer", "my manager is Sam for now",
# "I moved to Leeds for six months" (not "I've lived in Leeds for six months"); "I'm in the Leeds office this
# week" (not "I moved to Leeds this week").
FOR_A_WHILE = re.compile(
    r"\b(?:until|till|'til|for now|for the time being|temporarily|for the (?:summer|winter|spring|autumn|week|"
    r"weekend|month|holidays|term|semester|day|night)|for a (?:bit|while(?! now)|few days|few weeks|"
    r"couple of (?:days|weeks)|week|fortnight)|"
    r"for (?:\d+|one|two|three|four|five|six|a few|a couple of|several) (?:days|weeks|months))\b",
    re.I,
)
THIS_WEEK = re.compile(r"\b(?:this (?:week|weekend|month|term|afternoon|morning|evening)|tonight)\b", re.I)
PERFECT = re.compile(r"\b(?:have|has|had|since)\b|'ve\b", re.I)
CHANGED = re.compile(r"\b(?:moved|relocated|started|joined|switched|got|began|turned|became|bought|adopted)\b", re.I)
JOKING = re.compile(r"\b(?:lol|lmao|rofl|haha\w*|hehe\w*|jk|kidding|joking)\b|;\)|:p\b|/s\b", re.I)
# What takes back all of its sentence: "I'm allergic to cats, jk", "I love Mondays, said no one (ever)".
RETRACTED = re.compile(r"\b(?:jk|j/k|kidding|joking|said no ?(?:one|body)(?: ever)?)\b|/s\b|\bnot!", re.I)
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
OWNED_RELATION = re.compile(rf" ({'|'.join(FAMILY)})\b")
RELATION = re.compile(rf"\b[Mm]y ({'|'.join(FAMILY)})\b(?! {NAME})")
SHE_WORDS = frozenset(
    "mum mom mother sister wife daughter girlfriend fiancée fiancee aunt niece grandma grandmother stepmum".split()
)
HE_WORDS = frozenset(
    "dad father brother husband son boyfriend fiancé fiance uncle nephew grandpa grandfather stepdad".split()
)


PERSONAL_WORDS = PERSONAL | VERBISH
LABELS = frozenset(
    "note notes update reminder ps edit fyi q a re todo action summary decision risk next important warning tip "
    "answer question context deadline owner status agenda minutes noted done fixed confirmed tldr nb result "
    "outcome correction example".split()
)
NOT_A_PERSON = re.compile(
    r"\b(?:in|at|to|from|near|into|for|on|via|the|with|by|of|my|our|use|using|uses|love|loved|like|watch|watched|"
    r"watching|play|played|playing|read|reading|visit|visited|visiting|bought|ordered|order|tried|eat|drink|"
    r"listen to|listening to|switched|moved|joined|downloaded|installed)$",
    re.I,
)
ASSISTANTS = frozenset(
    "assistant ai bot chatbot system agent model copilot chatgpt gpt claude gemini siri alexa".split()
)


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
    def assistant(self) -> bool:
        """An assistant's turn states nothing to keep: not of itself ("I'm an AI assistant", "as your assistant
        I use British spelling"), nor of the user or anyone ("Noted: Dave lives in Ripon") — that is the
        user's to say."""
        return (self.speaker or "").lower() in ASSISTANTS

    @property
    def owner(self) -> str | None:
        """Who owns the turn's "I": its speaker, unless an assistant."""
        return None if self.assistant else self.speaker


def _speaker(speaker: str | None, text: str) -> tuple[str | None, str]:
    """The turn's speaker and its words: a `Name:` prefix wins, a label ("Reminder:", "Note:") is no one, and
    an assistant's words stay its own whatever they open with ("Noted: Dave lives in Ripon")."""
    prefixed, body = split_speaker(text)
    if speaker and speaker.lower() in ASSISTANTS:
        return speaker, body
    if prefixed and prefixed.lower() in LABELS:
        if prefixed.lower() == "correction":
            body = text.strip()  # "Correction: Bristol" corrects (`corrections`)
        prefixed = None
    who = prefixed or speaker
    if who and who[:1].islower():
        who = " ".join(w[:1].upper() + w[1:] for w in who.split())
    return who, body


def _unquoted(match: re.Match[str]) -> str:
    """A quoted sentence is someone else's words (a sentence break in its place); a quoted name stays."""
    quoted = match[1] if match[1] is not None else match[2]
    words = quoted.split()
    speech = len(words) > 4 or any(w.lower().strip(",.!?") in PERSONAL_WORDS for w in words)
    return ". " if speech else quoted


def sentences(body: str) -> list[str]:
    body = body.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    body = QUOTED.sub(_unquoted, QUOTED_LINE.sub(". ", body))
    body = EMOJI.sub(". ", JOKE_EMOJI.sub(" lol", body))
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


def passing(clause: str) -> bool:
    """Does the clause say its state holds only for a while?"""
    return bool(FOR_A_WHILE.search(clause) and not PERFECT.search(clause)) or bool(
        THIS_WEEK.search(clause) and not CHANGED.search(clause)
    )


def _kept(clauses: list[str]) -> list[str]:
    """The clauses that assert: not what someone said (nor all after it), a negation, a plan, a joke or a
    passing state; a clause that only says for how long ("…, for now") takes the one before it, and a
    retraction ("I'm allergic to cats, jk") all of the sentence."""
    said = [LAUGH.sub("", clause) for clause in clauses]  # "haha I'm from Slough": a laugh at what went before
    if any(RETRACTED.search(clause) for clause in said):
        return []
    kept: list[str] = []
    for clause in said:
        if REPORTED.search(clause):
            break  # what someone said, and all that follows it
        if passing(clause) and len(clause.split()) <= 4 and kept:
            kept.pop()  # "I work at Acme, for now"
        if not (NEGATED.search(clause) or PLANNED.search(clause) or JOKING.search(clause) or passing(clause)):
            kept.append(normalise(clause))
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
        if match[1].endswith("'s") and (owned := OWNED_RELATION.match(sentence, match.end())):
            found.append(Mention(f"{name}'s {owned[1]}", True, _pronoun(owned[1])))  # "Tom's brother": a 'he' too
    if speaker:
        for relation in RELATION.finditer(sentence):
            found.append(Mention(f"{speaker}'s {relation[1]}", True, _pronoun(relation[1])))
    return found


def _pronoun(relation: str) -> str:
    return "she" if relation in SHE_WORDS else "he" if relation in HE_WORDS else ""


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
