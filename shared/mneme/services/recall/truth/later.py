"""For a question about the present, a person's later statement of the same kind comes before their earlier one,
even when no word of change ties them ("I do the weekly shop at the Aldi on Mill Road" … months later … "Lidl by
the retail park for the weekly shop, empty on Saturday mornings").

`time.current_truth` reads change in words (`mneme.language.changes`): when it finds one, the later statement
supersedes the earlier, which is marked as changed. Much change is said in words no rule knows; this is the weaker,
wordless rule, for what the words left alone. Among the LATER_WINDOW best answers, when the best is one person's
statement that no change was read of (or the latest of a change that was), the latest of theirs among the others
that was said in a later conversation, is of the same kind (cosine at least LATER_KIND) and scores at least
LATER_SHARE of the best ranks just above it (`scores.later`), if it tells something new as how things are
(`_tells_new`), is about that person or what the question asks about (`_of_them`), and is not followed by a
statement of theirs naming the first value again (`_restated`) or calling it off (`_called_off`: "I said no to
Kinetik" after their offer). It reorders only answers already among the best, so what a search finds is the same,
and it marks nothing as changed: both may be true. For a question about the past, `earlier_first` is its mirror:
the person's statement of the same kind said before the best answer ranks just above it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from mneme.language import changes, nochange, questions, reverts
from mneme.language.changes import numbers
from mneme.language.text import CLOCK, meaningful_words, stem, terms
from mneme.models import Episode, context_session, session_position
from mneme.records import Fact
from mneme.search_models import has_metadata
from mneme.services.recall.run import pair_cosine, stored_vectors

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

LATER_WINDOW = 6  # the best answers the rule reorders
LATER_SHARE = 0.05  # ... a later statement scoring at least this share of the best one
LATER_KIND = 0.2  # ... and saying the same kind of thing: this cosine or more between the two
REPLY_TURNS = 3  # the turns before a statement read for someone else's news it answers
FOUND_SHARE = 0.25  # of several later statements, those scoring at least this share of the best of them
ABOVE = 1.01  # the later statement's score: just above the best one's
# "I'm still chained to my audit spreadsheets": the first holds; not "the card still hasn't turned up", of what waits
STILL = re.compile(r"\bstill\b(?! (?:not|no|waiting|(?:has|have|is|are|does|do|did|was|were|wo|ca)n't)\b)")
UNDECIDED = re.compile(r"\bthink (?:about|it over)\b")  # "they offered me plot 22 … I said I'd think about it"
ENDS_IT = ("cancelled", "closed", "sold", "ditched", "scrapped", "shut")  # the end of what the first names
ENDED = (*ENDS_IT, "returned", "kept", "replaced", "dropped")
CLOSED = re.compile(rf"\b(?:{'|'.join(ENDS_IT)})\b")
OLD = r"\b(?:my|our|his|her|their|the) (?:old|former|previous|ex)\b"
BEFORE = re.compile(rf"{OLD}|\b(?:used to|back (?:then|when)|by then)\b")  # of the past: "my old team"
# the end of the old, which tells of the change: "since they shut the old office", "closed the account at the old bank"
OLD_ENDED = re.compile(rf"\b(?:{'|'.join(ENDED)})\b[^.!?;,]{{0,80}}?{OLD}")
WHAT_TIME = re.compile(r"\bwhat time\b|\bhow (?:early|late)\b", re.I)  # asks a time of day
WHO_IS = re.compile(r"^\W*who(?:'s| is| are)\b", re.I)
YES_NO = re.compile(r"^\W*(?:is|are|am|do|does|has|have|can|will|would|should)\b", re.I)
NOT_NOW = (STILL, BEFORE, UNDECIDED, changes.HEDGE, nochange.FUTURE)  # anywhere in it: not how things are now


def later_first(run: Run, read: list[dict[str, object]], says_when: re.Pattern[str] | None) -> dict[str, object] | None:
    """The later statement of the best answer's person raised just above it (`scores.later`): which, over which, at
    what cosine; None when there is none. `read`: the changes `current_truth` read (ids and their updaters), which
    this rule leaves alone but for the latest of a chain, which a later statement may update again, and an updater
    read over another speaker's words (`_across`), which may still be the later statement. `says_when`: for a
    question asking when, the words of a text that says when. A claim fact at the top is read as the turn it was
    drawn from (`drawn_from`), and the later statement ranks just above the fact."""
    best = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))[:LATER_WINDOW]
    superseded = {str(one["id"]) for one in read}
    if len(best) < 2 or not _statement(best[0]) or best[0].id in superseded:
        return None
    shown, top = best[0], drawn_from(run, best[0])
    if top.id in superseded:
        return None
    best = [top, *(one for one in best[1:] if one.id != top.id)]
    assert isinstance(top.record, Episode | Fact)
    first, asked = changes.said(top.record), _Asked.of(run.request.query or "", says_when)
    whose = changes.owners(top.record) - {changes.UNKNOWN}
    if changes.speaker(top.record) == "assistant":
        whose |= {"user"}  # "Noted: your broadband is Lumenet Heron from March": the user's, recapped
    elif changes.speaker(top.record) is None:  # an agent's note: of the people asked about that it names
        whose |= {person for person in asked.about if _noted(top.record, frozenset({person}))}
    if not changes.may_be_updated(first) or not (whose or asked.thing):
        return None
    gone, mine = _superseded_values(run, read, top), changes.speaker(top.record)
    if any("'s " in person for person in asked.about & whose):  # "My brother Rory lives in Melbourne", asked where
        # the user's brother lives: Rory's later word is of him too
        asked = replace(asked, about=asked.about | (whose - {mine, "user", "assistant"}))
    # a change read within one speaker's words is left alone; asked about a group's thing, the latest of another's
    # chain may still be the later word on the best answer ("every PR builds on Gantry CI" … Bram: "we cut over to
    # Runwell", after his own "from Monday the pipelines live on Plinth")
    chained = superseded | {
        str(one["by"])
        for one in read
        if not _across(run, one) and not (asked.group and _another(run, one, mine)) and not _same_said(run, one, first)
    }
    kin = [
        later
        for later in _theirs(best, whose, chained, before=False, thing=asked.thing, anyone=asked.group)
        if _tells_new(first, changes.said(later.record), asked, gone) and _of_them(run, top, later, asked)  # type: ignore[arg-type]
    ]
    found = same_kind(run, top, kin)
    kind = {one.id for one, _ in found}
    found += _answered(run, top, [one for one in kin if one.id not in kind], asked)
    if not found:
        return None
    later, similarity = _latest(found)
    if _restated(best, top, later, asked.about) or _called_off(run, later):
        return None
    return above(later, shown, "later", similarity)


def drawn_from(run: Run, top: Candidate) -> Candidate:
    """A claim fact is read as the latest of the turns it was drawn from that is among the candidates: its summary
    says less than the turn ("Elif is vegetarian." from "I'm vegetarian, so anywhere with halloumi works"), and a
    later word is later than the turn. Anything else is read as itself."""
    fact = top.record
    if not isinstance(fact, Fact):
        return top
    sources = [run.candidates[i] for i in fact.source_episode_ids if i in run.candidates]
    return max(sources, key=said_at, default=top)


@dataclass(frozen=True)
class _Asked:
    """What a question asks, as `later_first` reads it: the people (`about`), slots and words it names, the thing it
    asks about when not a person (`_thing`), for a yes/no question the stems of what it asks whether (`whether`), for
    one asking when the words of a text that says when, whether it asks a time of day (`clock`), whether it asks
    about something a group shares ("the team", "we", "our": `group`), which anyone in it may say changed."""

    about: frozenset[str]
    slots: frozenset[str]
    words: frozenset[str]
    thing: frozenset[str]
    whether: frozenset[str] | None
    says_when: re.Pattern[str] | None
    clock: bool
    group: bool

    @classmethod
    def of(cls, query: str, says_when: re.Pattern[str] | None) -> _Asked:
        about, words = questions.people(query), frozenset(meaningful_words(query))
        if WHO_IS.match(query):  # "Who is Ayo's partner?": who it is, Ayo says ("I've been seeing Rowan")
            about |= {person.partition("'s ")[0] for person in about if "'s " in person}
        # a yes/no question asks whether what it names holds: only a statement that names it can say otherwise
        whether = frozenset(stem(w) for w in words - about) if YES_NO.match(query) else None
        slots = questions.question_slots(query)
        clock, group = bool(WHAT_TIME.search(query)), bool(GROUP.search(query))
        return cls(about, slots, words, _thing(query), whether, says_when, clock, group)


def _tells_new(first: changes.Said, then: changes.Said, asked: _Asked, gone: frozenset[str] | None) -> bool:
    """The later statement says something new of what the first says, as how things are: it names a value the first
    does not (not only a number for a name; naming none, it says a change of what the question asks about in words
    of its own: "First week as a forklift instructor, new hi-vis", asked about a job), states it (no question,
    maybe, plan, "still", "my old …", "by then"), does not say what is asked about stayed, and names what a yes/no
    question asks about; when the first is itself a change (`gone`: the values it superseded), it says a change and
    names none of them; when it says a change of something the first names beside others, it is a partial change
    (`current_truth`'s); asked when, it says when if the first does ("book club is moving to the library"), and
    asked what time, a time of day if the first names one ("haven't been in at that hour since Easter" after "the
    6:15 lane session")."""
    new, old = then.reading, first.reading
    named = new.values - old.values - changes.by_place(then.text)
    if not named and (new.ends or new.cue) and asked.slots & new.slots and (fresh := new.content - old.content):
        named = fresh  # "First week as a forklift instructor, new hi-vis": a job
    if not changes.may_update(then, present=True) or not named:
        return False  # a question, a plan, or nothing new named
    if named == numbers(named) and (names := old.values - changes.openers(first.text)) and not numbers(names):
        return False  # only a count or a time for a name ("The bank rec takes ten minutes now")
    if gone is not None and (named & gone or not (new.ends or new.cue)):
        return False  # "why we left Azure" after "we went with Google Cloud": of the change told
    if asked.whether is not None and not asked.whether & new.content:
        return False  # "Is Ruth a vegetarian?": "Pepper's got a lump on his leg" says nothing of it
    if (new.ends or new.cue) and (shared := (new.values & old.values) - asked.words) and shared != numbers(shared):
        # a change of one of the first's values beside others is `current_truth`'s partial change ("Cancelled Netflix …
        # Got Disney+ instead" after "I pay for Spotify and Netflix"); a number both name is none ("put me on the night
        # rota, 10pm till 6" after "I work earlies, 6 till 2"), nor is one that ends all the first names ("The Gazette
        # went online only" after "I read the Gazette")
        others = old.values - shared - asked.words - changes.openers(first.text)
        if others - numbers(others):
            return False
    lowered = then.text.lower()
    told = changes.told(then.text).lower()  # "it's £47,500 from May. How much more will I take home?": no plan
    now = OLD_ENDED.sub(" ", told)  # "closed the account at the old bank" tells the change, not the past
    if any(p.search(now) for p in NOT_NOW) or nochange.kept(then.text, asked.slots, asked.words):
        return False  # the first holds, of the past ("my old team"), a maybe, a plan, or what is asked about stayed
    if nochange.called_off(told):
        return False  # "Told the conductor no, I'm staying in the seconds": a change called off (`stands.py`)
    if asked.clock and CLOCK.search(first.text.lower()) and not CLOCK.search(told):
        return False  # asked what time, "haven't been at that hour since Easter" says none after "the 6:15 session"
    return not (asked.says_when and asked.says_when.search(first.text.lower()) and not asked.says_when.search(lowered))


def _latest(found: list[tuple[Candidate, float]]) -> tuple[Candidate, float]:
    """Of several later statements, the latest of those saying a change, else the latest, among those scoring at
    least FOUND_SHARE of the best of them: "Better since I moved to the sports clinic, Harriet's brilliant" over a
    later "She's given me glute exercises"; not a passing "June, at St John's." over "I auditioned for Canton
    Chamber Singers and got in"."""
    floor = FOUND_SHARE * max(one.score for one, _ in found)
    kept = [pair for pair in found if pair[0].score >= floor]
    said = [pair for pair in kept if _tells_change(pair[0])]
    return max(said or kept, key=lambda pair: said_at(pair[0]))


def _tells_change(candidate: Candidate) -> bool:
    """Its sentences that ask nothing say a change ("Join me after the school run instead?" does not)."""
    told = changes.told(changes.said(candidate.record).text).lower()  # type: ignore[arg-type]
    return bool(changes.ENDS.search(told) or changes.CHANGES.search(told))


def _of_them(run: Run, top: Candidate, later: Candidate, asked: _Asked) -> bool:
    """The later statement is about the person the question names (or, naming none, its speaker), or names the
    thing asked about, and does not answer someone else's news (`_replies`). A statement all of "he" or "she" in a
    person's own turn is of their things ("she's doubled it: 100 mg"), and of the person asked about when their
    first statement named them ("Our eldest, Théo, goes to …" … "he has decided he's a chemist"); so is an answer
    to someone's question about the person asked about ("How is Théo finding the big move up?"). Asked about a
    group's thing, so is anyone else's word on it (an assistant's notes are anyone's); and a note naming every
    person the question names (`_noted`)."""
    then = changes.said(later.record)  # type: ignore[arg-type]
    speaker, before = _turns_before(run, later, REPLY_TURNS)  # read once, for `_answers` and `_replies`
    whom = changes.owners(then.record)
    if changes.UNKNOWN in whom and then.speaker:
        if whom == {changes.UNKNOWN}:
            whom = frozenset({then.speaker})
        if changes.speaker(top.record) == then.speaker and _mentions(changes.said(top.record).text, asked.about):  # type: ignore[arg-type]
            whom |= asked.about
    if asked.about and _answers(run, speaker, before[:1], asked.about):
        whom |= asked.about
    anyones = bool(asked.thing) and _names(later, asked.thing)  # of the thing asked about, whoever says it
    if then.speaker is None or then.speaker in changes.NOTE_TAKERS:  # a note: of whom it names
        anyones |= bool(asked.about) and all(_noted(then.record, frozenset({one})) for one in asked.about)
    anyones |= asked.group and _other_speaker(changes.speaker(top.record), speaker)  # type: ignore[arg-type]
    return (anyones or bool((asked.about or {then.speaker}) & whom)) and not _replies(run, speaker, before)


def earlier_first(run: Run, read: list[dict[str, object]]) -> dict[str, object] | None:
    """For a question about the past, the mirror of `later_first`: when the best answer is a person's statement
    that no change was read of, their latest statement before it among the LATER_WINDOW best, said in an earlier
    conversation, of the same kind (cosine at least LATER_KIND), naming something the best does not, stating
    something (no question, maybe or plan) and about that person, ranks just above it (`scores.earlier`)
    ("Pottery class on Saturday mornings is my therapy" … "Studio closed for good, so Saturday mornings are for
    sourdough", asked what she used to do on Saturdays). Which, over which, at what cosine; None when none."""
    best = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))[:LATER_WINDOW]
    chained = {str(one[key]) for one in read for key in ("id", "by")}
    if len(best) < 2:
        return None
    top = best[0]
    if not isinstance(top.record, Episode) or top.changed is not None or top.id in chained:
        return None
    first = changes.said(top.record)
    whose = changes.owners(top.record) - {changes.UNKNOWN}
    about = questions.people(run.request.query or "")
    kin: list[Candidate] = []
    for earlier in _theirs(best, whose, chained, before=True):
        then = changes.said(earlier.record)  # type: ignore[arg-type]
        named = then.reading.values - first.reading.values - changes.by_place(then.text)
        if not changes.may_be_updated(then) or then.reading.hedged or not named:
            continue  # a question, a maybe, or nothing else named
        if any(p.search(then.text.lower()) for p in (changes.HEDGE, nochange.FUTURE, UNDECIDED)):
            continue
        if (about or {then.speaker}) & changes.owners(then.record):
            kin.append(earlier)
    found = same_kind(run, top, kin)
    if not found:
        return None
    earlier, similarity = max(found, key=lambda one: said_at(one[0]))  # of several, the one just before
    return above(earlier, top, "earlier", similarity)


def _theirs(
    best: list[Candidate],
    whose: frozenset[str],
    chained: set[str],
    *,
    before: bool,
    thing: frozenset[str] = frozenset(),
    anyone: bool = False,
) -> Iterator[Candidate]:
    """The other best answers, in order while they score at least LATER_SHARE of the best, that its person said
    in a later conversation (`before`: an earlier one), of no change already read; for a question about a thing
    (`thing`: its words), also anyone's that names it; for one about a group's thing (`anyone`), anyone's."""
    top = best[0]
    for other in best[1:]:
        if other.score < LATER_SHARE * top.score:
            return
        if (
            other.id not in chained
            and (_by(other, whose, top) or (bool(thing) and _names(other, thing)) or (anyone and _said(other)))
            and (after(other, top) if before else after(top, other))
        ):
            yield other


def same_kind(run: Run, top: Candidate, kin: list[Candidate]) -> list[tuple[Candidate, float]]:
    """Of `kin`, those whose stored vector's cosine with the best answer's is at least LATER_KIND (one read)."""
    if not kin:
        return []
    vectors = stored_vectors(run, [top, *kin])
    return [(one, cosine) for one in kin if (cosine := pair_cosine(vectors, top, one)) >= LATER_KIND]


def _answered(run: Run, top: Candidate, kin: list[Candidate], asked: _Asked) -> list[tuple[Candidate, float]]:
    """Of `kin`, the answers to someone else's question of what the question asks (`asked.slots`) whose stored
    vector's cosine with the best answer's is at least LATER_KIND: an answer's kind is its question's ("Where are
    you working these days?" … "Brightline, since March.")."""
    vectors, model, found = stored_vectors(run, [top]), run.deps.embedder.model_id, []
    if top.id not in vectors or not asked.slots:
        return []
    for one in kin:
        speaker, before = _turns_before(run, one, 1)
        for turn in before:
            question = changes.statement(turn).rstrip()  # its last sentence asks: "Long time! Where are you …?"
            if changes.speaker(turn) == speaker or not question.endswith("?"):
                continue
            if not questions.question_slots(changes.sentences(question)[-1]) & asked.slots:
                continue
            if turn.vector is None or turn.model_id != model or turn.archived:
                continue
            if not has_metadata(turn.metadata, run.flt):
                continue
            if (cosine := float(np.dot(np.asarray(turn.vector, dtype=np.float32), vectors[top.id]))) >= LATER_KIND:
                found.append((one, cosine))
    return found


def above(one: Candidate, top: Candidate, key: str, similarity: float) -> dict[str, object]:
    """`one` ranks just above the best answer (`scores[key]`); the trace of it."""
    one.scores[key] = round(top.score * ABOVE / max(one.score, 1e-9), 6)
    one.score = top.score * ABOVE
    return {"id": one.id, "over": top.id, "similarity": round(similarity, 6)}


def _same_said(run: Run, change: dict[str, object], first: changes.Said) -> bool:
    """A change read ended a value the best answer names too ("user takes levothyroxine 75 micrograms" … "GP
    increased user's tablet to 100 micrograms", over the user's own "I take 75 micrograms"): its later statement
    changed what the best answer says, and may be the later word on it."""
    earlier, later = run.candidates.get(str(change["id"])), run.candidates.get(str(change["by"]))
    if earlier is None or later is None:
        return False
    ended = changes.said(earlier.record).reading.values - changes.said(later.record).reading.values  # type: ignore[arg-type]
    return bool(ended & first.reading.values)


def _across(run: Run, change: dict[str, object]) -> bool:
    """A change read against another speaker's words (the user's news over an assistant's draft): the later
    statement is still its speaker's latest word on the best answer's thing."""
    earlier, later = run.candidates.get(str(change["id"])), run.candidates.get(str(change["by"]))
    if earlier is None or later is None:
        return False
    assert isinstance(earlier.record, Episode | Fact) and isinstance(later.record, Episode | Fact)
    return changes.speaker(earlier.record) != changes.speaker(later.record)


def said_at(candidate: Candidate) -> tuple[datetime, datetime, int]:
    record = candidate.record
    assert isinstance(record, Episode)
    return session_position(record)


def _restated(best: list[Candidate], top: Candidate, later: Candidate, people: frozenset[str]) -> bool:
    """A statement of the later one's speaker after it names again what the best answer said and it did not ("due
    31 March" … "extension to 30 April" … "correction: ours stays 31 March"): the first value stands."""
    first, then = changes.said(top.record).reading, changes.said(later.record).reading  # type: ignore[arg-type]
    gone = first.values - then.values - people  # "Miso bit the nurse" names the cat, not the old vets
    # a question restates nothing ("which day do the bins go out on Cragg Street?" after a move up the hill), nor does
    # the end of the first ("got a Nationwide letter even though I closed that account months ago")
    return any(
        gone & (said := changes.said(record)).reading.values
        and not (said.reading.asks or CLOSED.search(changes.told(said.text).lower()))
        for record in _said_after(best, later)
    )


def _called_off(run: Run, later: Candidate) -> bool:
    """A statement of the later one's speaker after it calls it off ("Kinetik offered me a lead role" … "I said no
    to Kinetik"): the first value stands."""
    return any(
        reverts.undoes(later.record, record) is not None  # type: ignore[arg-type]
        for record in _said_after(run.candidates.values(), later)
    )


def _said_after(candidates: Iterable[Candidate], later: Candidate) -> Iterator[Episode]:
    """The episodes among `candidates` that the later statement's speaker said after it."""
    speaker = changes.speaker(later.record)  # type: ignore[arg-type]
    for other in candidates:
        record = other.record
        if isinstance(record, Episode) and changes.speaker(record) == speaker and said_at(other) > said_at(later):
            yield record


def _answers(run: Run, speaker: str | None, turns: list[Episode], people: frozenset[str]) -> bool:
    """A statement of `speaker` answers someone else's question about one of the people, asked in the turn just
    before it (`turns`: that turn; one the caller may read, not forgotten)."""
    return any(
        not turn.archived
        and changes.speaker(turn) not in (None, speaker)
        and has_metadata(turn.metadata, run.flt)
        and changes.said(turn).reading.asks
        and _mentions(turn.content, people)
        for turn in turns
    )


def _replies(run: Run, speaker: str | None, turns: list[Episode]) -> bool:
    """A statement of `speaker` answers someone else's news: one of `turns` (the REPLY_TURNS before it in its
    conversation, read from the store: the news rarely answers the question itself), another person's that the
    caller may read, says a change and asks nothing ("I've relocated to Amsterdam" … "Neighbours! Only forty
    minutes on the train"; not "How's Daniel? Haven't seen him in ages"); an agent's or assistant's note answers
    no one."""
    if speaker is None or speaker in changes.NOTE_TAKERS:
        return False  # a note ("Data platform team run by Chidi Eze from 7 October") answers no one
    for turn in turns:
        other = changes.speaker(turn)
        if turn.archived or other in (None, speaker) or other in changes.NOTE_TAKERS:
            continue
        news = changes.said(turn).reading
        if has_metadata(turn.metadata, run.flt) and (news.ends or news.cue) and "?" not in turn.content:
            return True
    return False


def _turns_before(run: Run, later: Candidate, limit: int) -> tuple[str | None, list[Episode]]:
    """The speaker of `later`, and up to `limit` turns before it in its conversation, latest first (from the store)."""
    record = later.record
    assert isinstance(record, Episode)
    session = context_session(record)
    if session is None:
        return None, []
    found = run.deps.store.session_episodes(run.flt.tenant, record.scope_id, session, session_position(record), limit)
    return changes.speaker(record), found


PERSONAL = re.compile(r"'s\b|\b(?:the user|i|me|my|mine|you|your|he|she|his|her|they|their)\b", re.I)
THING = re.compile(r"\bthe ([\w&'-]+(?: [\w&'-]+){0,5})", re.I)  # "the pager for the search service": all of it
THING_SHARED = 2  # the thing's words a statement about it names
GROUP = re.compile(r"\bteam\b|\b(?:we|us|our)\b", re.I)  # "Which tool does the team file bugs in?", "our builds"


def _thing(query: str) -> frozenset[str]:
    """The words of the thing a question asks about, when it asks about a thing that anyone in the scope may say
    changed ("When is the Verity Freight audit pack due?", "Who is responsible for the billing migration?"), not
    about a person ("Where does Maya live?", "What is the user's rent?"): empty then."""
    if PERSONAL.search(query) or not (found := THING.search(query)):
        return frozenset()
    named = frozenset(stem(w) for w in meaningful_words(found[1]))
    return named if len(named) >= THING_SHARED else frozenset()


def _names(candidate: Candidate, thing: frozenset[str]) -> bool:
    """An episode, of no change read, that names the thing (THING_SHARED of its words), whoever says it."""
    return _said(candidate) and len(thing & terms(changes.statement(candidate.record))) >= THING_SHARED  # type: ignore[arg-type]


def _said(candidate: Candidate) -> bool:
    """An episode of no change read."""
    return isinstance(candidate.record, Episode) and candidate.changed is None


def _other_speaker(mine: str | None, theirs: str | None) -> bool:
    """Said by someone other than `mine`, or `mine` is a note taker's (an assistant's notes are anyone's)."""
    return theirs != mine or mine in changes.NOTE_TAKERS


def _another(run: Run, change: dict[str, object], mine: str | None) -> bool:
    """A change read whose later statement is `_other_speaker`'s than `mine`."""
    later = run.candidates.get(str(change["by"]))
    return later is not None and _other_speaker(mine, changes.speaker(later.record))  # type: ignore[arg-type]


def _statement(top: Candidate) -> bool:
    """An episode, or a claim fact, that no change was read of."""
    record = top.record
    return (isinstance(record, Episode) or (isinstance(record, Fact) and record.tier == "raw")) and top.changed is None


def _by(later: Candidate, whose: frozenset[str], top: Candidate) -> bool:
    """`later` is an episode whose speaker, a person and not a note taker, is the best answer's speaker (or the user
    an assistant's recap is of), or, for a claim fact, the person it is about; or a note naming that person
    (`_noted`) and saying a change; or the best answer's speaker's word
    on the same person ("Ayla's nursery, Sunnybank, …" … "Ayla's first week at Kestrel Lane Primary"), or any later
    word of theirs when the best answer is about a relative of theirs ("My boyfriend Kenji …" … "I have been seeing
    Rafael since the spring"): `_of_them` then asks whom it is of."""
    record = later.record
    if not isinstance(record, Episode) or later.changed is not None:
        return False
    speaker = changes.speaker(record)
    if speaker is None or speaker in changes.NOTE_TAKERS:  # a note of a change, not "Björn wants an aisle seat"
        return _noted(record, whose) and _tells_change(later)
    if speaker not in whose:
        same = isinstance(top.record, Episode) and changes.speaker(top.record) == speaker
        kin = any(person.startswith(f"{speaker}'s ") for person in whose)
        return same and (kin or bool(changes.owners(record) & whose))
    if not isinstance(top.record, Episode):
        return True  # a claim fact: of the person it is about
    said = changes.speaker(top.record)
    return said == speaker or said == "assistant"  # their own word, or the assistant's recap of it


def _noted(record: Episode | Fact, people: frozenset[str]) -> bool:
    """A note (an agent's, or an assistant's words) that names one of the people ("GP increased user's thyroid
    tablet to 100 micrograms", "Amara Osei: interim line manager Chidi Eze"): a later word on their things."""
    return _mentions(changes.statement(record), people - {changes.UNKNOWN, "assistant"})


def after(top: Candidate, later: Candidate) -> bool:
    """`later` was said in a later conversation than the best answer (for a claim fact: after it held, and not one of
    the turns it was drawn from)."""
    one, other = top.record, later.record
    if not isinstance(other, Episode):
        return False
    if isinstance(one, Fact):
        return other.occurred_at > one.valid_from and later.id not in one.source_episode_ids
    assert isinstance(one, Episode)
    return session_position(other) > session_position(one) and not changes.one_conversation(one, other)


def _superseded_values(run: Run, read: list[dict[str, object]], top: Candidate) -> frozenset[str] | None:
    """The values of the statements the best answer superseded (`read`), None when it superseded none."""
    older = [str(one["id"]) for one in read if one["by"] == top.id]
    if not older:
        return None
    return frozenset().union(
        *(changes.said(run.candidates[one].record).reading.values for one in older if one in run.candidates)  # type: ignore[arg-type]
    )


def _mentions(text: str, people: frozenset[str]) -> bool:
    """The text names one of the people."""
    lowered = text.lower()
    return any(re.search(rf"\b{re.escape(person)}\b", lowered) for person in people)
