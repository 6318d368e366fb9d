"""For a question about the present, a person's later statement of the same kind comes before their earlier one,
even when no word of change ties them ("I do the weekly shop at the Aldi on Mill Road" … months later … "Lidl by
the retail park for the weekly shop, empty on Saturday mornings").

`time.current_truth` reads change in words (`mneme.language.changes`): when it finds one, the later statement
supersedes the earlier, which is marked as changed. Much change is said in words no rule knows; this is the weaker,
wordless rule, for what the words left alone. Among the LATER_WINDOW best answers, when the best is one person's
statement that no change was read of, the latest of theirs among the others that was said in a later conversation,
is of the same kind (cosine at least LATER_KIND) and scores at least LATER_SHARE of the best ranks just above it
(`scores.later`), if it names something the first did not, has no maybe, plan or promise, "still" or "my old …"
anywhere, does not say what is asked about stayed, is about that person (or the person the question names), does
not answer someone else's news (`_replies`), says when if the question asks when and the first does, is not followed
by a statement of theirs naming the first value again (`_restated`) or calling it off (`_called_off`: "I said no to
Kinetik" after their offer), and, when it says a change the rules left alone ("Since I moved my membership there"),
does not name a value of the first (a change of one of several things the first names: the rest stands). In the
person's own turn, a statement whose every clause is about "he" or "she" ("she's doubled it: 100 mg") is of their
things; asked about a thing, not a person ("When is the Verity Freight audit pack due?"), anyone's statement that
names it counts too; for a yes/no question ("Is Ruth a vegetarian?"), only a statement naming what it asks about
counts. It reorders only answers already among the best, so what a search finds is the same, and it marks nothing
as changed: both may be true. For a question about the past, `earlier_first` is its mirror: the person's statement
of the same kind said before the best answer ranks just above it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from mneme.language import changes, nochange, questions, reverts
from mneme.language.slots import VALUE_WORDS
from mneme.language.text import meaningful_words, stem, terms
from mneme.models import Episode, context_session, session_position
from mneme.records import Fact
from mneme.search_models import has_metadata
from mneme.services.recall.run import pair_cosine, stored_vectors

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

LATER_WINDOW = 4  # the best answers the rule reorders
LATER_SHARE = 0.1  # ... a later statement scoring at least this share of the best one
LATER_KIND = 0.2  # ... and saying the same kind of thing: this cosine or more between the two
REPLY_TURNS = 3  # the turns before a statement read for someone else's news it answers
ABOVE = 1.01  # the later statement's score: just above the best one's
STILL = re.compile(r"\bstill\b")  # "I'm still chained to my audit spreadsheets": the first holds
UNDECIDED = re.compile(r"\bthink (?:about|it over)\b")  # "they offered me plot 22 … I said I'd think about it"
BEFORE = re.compile(r"\b(?:(?:my|our|his|her|their|the) (?:old|former|previous|ex)\b|used to|back (?:then|when))")
YES_NO = re.compile(r"^\W*(?:is|are|am|do|does|has|have|can|will|would|should)\b", re.I)
NOT_NOW = (STILL, BEFORE, UNDECIDED, changes.HEDGE, nochange.FUTURE)  # anywhere in it: not how things are now


def later_first(run: Run, read: list[dict[str, object]], says_when: re.Pattern[str] | None) -> dict[str, object] | None:
    """The later statement of the best answer's person raised just above it (`scores.later`): which, over which, at
    what cosine; None when there is none. `read`: the changes `current_truth` read (ids and their updaters), which
    this rule leaves alone. `says_when`: for a question asking when, the words of a text that says when."""
    best = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))[:LATER_WINDOW]
    chained = {str(one[key]) for one in read for key in ("id", "by")}
    if len(best) < 2 or not _statement(best[0]) or best[0].id in chained:
        return None
    top = best[0]
    assert isinstance(top.record, Episode | Fact)
    first = changes.said(top.record)
    query = run.request.query or ""
    thing = _thing(query)
    whose = changes.owners(top.record) - {changes.UNKNOWN}
    if not changes.may_be_updated(first) or not (whose or thing):
        return None
    about, asked, words = questions.people(query), questions.question_slots(query), frozenset(meaningful_words(query))
    # a yes/no question asks whether what it names holds: only a statement that names it can say otherwise
    named_in_question = {stem(w) for w in words - about} if YES_NO.match(query) else None
    kin: list[Candidate] = []
    for later in _theirs(best, whose, chained, before=False, thing=thing):
        then = changes.said(later.record)  # type: ignore[arg-type]
        new, old = then.reading, first.reading
        named = new.values - old.values - (changes.openers(then.text) - VALUE_WORDS)
        if not changes.may_update(then, present=True) or not named:
            continue  # a question, a plan, or nothing new named
        if named_in_question is not None and not named_in_question & new.content:
            continue  # "Is Ruth a vegetarian?": "Pepper's got a lump on his leg" says nothing of it
        if (new.ends or new.cue) and (new.values & old.values) - words:
            continue  # a change of something the first names beside others: a partial change, read by `current_truth`
        lowered = then.text.lower()
        if any(p.search(lowered) for p in NOT_NOW) or nochange.kept(then.text, asked, words):
            continue  # the first holds, of the past ("my old team"), a maybe, a plan, or what is asked about stayed
        if says_when and says_when.search(first.text.lower()) and not says_when.search(lowered):
            continue  # asked when, the first says when and this one not ("book club is moving to the library")
        whom = changes.owners(then.record)
        if whom == {changes.UNKNOWN} and then.speaker:
            whom = frozenset({then.speaker})  # "she's doubled it: 100 mg" in their own turn: of their things
        anyones = bool(thing) and _names(later, thing)  # of the thing asked about, whoever says it
        if (not anyones and not (about or {then.speaker}) & whom) or _replies(run, later):
            continue  # about someone else ("Orla's moved to Berlin" for "Where does Tess live?"), or their news
        kin.append(later)
    found = _same_kind(run, top, kin)
    if not found:
        return None
    later, similarity = max(found, key=lambda one: _when(one[0]))  # of several, the latest
    if _restated(best, top, later) or _called_off(run, later):
        return None
    return _above(later, top, "later", similarity)


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
        named = then.reading.values - first.reading.values - (changes.openers(then.text) - VALUE_WORDS)
        if not changes.may_be_updated(then) or then.reading.hedged or not named:
            continue  # a question, a maybe, or nothing else named
        if any(p.search(then.text.lower()) for p in (changes.HEDGE, nochange.FUTURE, UNDECIDED)):
            continue
        if (about or {then.speaker}) & changes.owners(then.record):
            kin.append(earlier)
    found = _same_kind(run, top, kin)
    if not found:
        return None
    earlier, similarity = max(found, key=lambda one: _when(one[0]))  # of several, the one just before
    return _above(earlier, top, "earlier", similarity)


def _theirs(
    best: list[Candidate],
    whose: frozenset[str],
    chained: set[str],
    *,
    before: bool,
    thing: frozenset[str] = frozenset(),
) -> Iterator[Candidate]:
    """The other best answers, in order while they score at least LATER_SHARE of the best, that its person said
    in a later conversation (`before`: an earlier one), of no change already read; for a question about a thing
    (`thing`: its words), also anyone's that names it."""
    top = best[0]
    for other in best[1:]:
        if other.score < LATER_SHARE * top.score:
            return
        if (
            other.id not in chained
            and (_by(other, whose, top) or (bool(thing) and _names(other, thing)))
            and (_after(other, top) if before else _after(top, other))
        ):
            yield other


def _same_kind(run: Run, top: Candidate, kin: list[Candidate]) -> list[tuple[Candidate, float]]:
    """Of `kin`, those whose stored vector's cosine with the best answer's is at least LATER_KIND (one read)."""
    if not kin:
        return []
    vectors = stored_vectors(run, [top, *kin])
    return [(one, cosine) for one in kin if (cosine := pair_cosine(vectors, top, one)) >= LATER_KIND]


def _above(one: Candidate, top: Candidate, key: str, similarity: float) -> dict[str, object]:
    """`one` ranks just above the best answer (`scores[key]`); the trace of it."""
    one.scores[key] = round(top.score * ABOVE / max(one.score, 1e-9), 6)
    one.score = top.score * ABOVE
    return {"id": one.id, "over": top.id, "similarity": round(similarity, 6)}


def _when(candidate: Candidate) -> tuple[datetime, datetime, int]:
    record = candidate.record
    assert isinstance(record, Episode)
    return session_position(record)


def _restated(best: list[Candidate], top: Candidate, later: Candidate) -> bool:
    """A statement of the later one's speaker after it names again what the best answer said and it did not ("due
    31 March" … "extension to 30 April" … "correction: ours stays 31 March"): the first value stands."""
    first, then = changes.said(top.record).reading, changes.said(later.record).reading  # type: ignore[arg-type]
    gone = first.values - then.values
    return any(gone & changes.said(record).reading.values for record in _said_after(best, later))


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
        if isinstance(record, Episode) and changes.speaker(record) == speaker and _when(other) > _when(later):
            yield record


def _replies(run: Run, later: Candidate) -> bool:
    """`later` answers someone else's news: one of the REPLY_TURNS turns before it in its conversation, another
    person's that the caller may read, says a change ("I've relocated to Amsterdam" … "Neighbours! Only forty
    minutes on the train"). Read from the store: the news rarely answers the question itself."""
    record = later.record
    assert isinstance(record, Episode)
    session = context_session(record)
    if session is None:
        return False
    speaker, at = changes.speaker(record), session_position(record)
    for turn in run.deps.store.session_episodes(run.flt.tenant, record.scope_id, session, at, REPLY_TURNS):
        other = changes.speaker(turn)
        if turn.archived or other in (None, speaker) or other in changes.NOTE_TAKERS:
            continue
        news = changes.said(turn).reading
        if has_metadata(turn.metadata, run.flt) and (news.ends or news.cue) and not news.asks:
            return True
    return False


PERSONAL = re.compile(r"'s\b|\b(?:the user|i|me|my|mine|you|your|he|she|his|her|they|their)\b", re.I)
THING = re.compile(r"\bthe ([\w&'-]+(?: [\w&'-]+){0,3})", re.I)
THING_SHARED = 2  # the thing's words a statement about it names


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
    record = candidate.record
    if not isinstance(record, Episode) or candidate.changed is not None:
        return False
    return len(thing & terms(changes.statement(record))) >= THING_SHARED


def _statement(top: Candidate) -> bool:
    """An episode, or a claim fact, that no change was read of."""
    record = top.record
    return (isinstance(record, Episode) or (isinstance(record, Fact) and record.tier == "raw")) and top.changed is None


def _by(later: Candidate, whose: frozenset[str], top: Candidate) -> bool:
    """`later` is an episode whose speaker, a person and not a note taker, is the best answer's speaker, or, for a
    claim fact, the person it is about."""
    record = later.record
    if not isinstance(record, Episode) or later.changed is not None:
        return False
    speaker = changes.speaker(record)
    if speaker is None or speaker in changes.NOTE_TAKERS or speaker not in whose:
        return False
    return isinstance(top.record, Fact) or changes.speaker(top.record) == speaker  # type: ignore[arg-type]


def _after(top: Candidate, later: Candidate) -> bool:
    """`later` was said in a later conversation than the best answer (for a claim fact: after it held, and not one of
    the turns it was drawn from)."""
    one, other = top.record, later.record
    if not isinstance(other, Episode):
        return False
    if isinstance(one, Fact):
        return other.occurred_at > one.valid_from and later.id not in one.source_episode_ids
    assert isinstance(one, Episode)
    return session_position(other) > session_position(one) and not changes.one_conversation(one, other)
