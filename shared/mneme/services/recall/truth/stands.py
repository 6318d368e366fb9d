"""For a question about the present, a change only considered and then called off leaves the first statement
standing: "My current account's with Nationwide" … "Monzo's offering a switching bonus, I'm thinking of moving to
Monzo" … "Gave up on switching, my bank's been fine for fifteen years". The call-off rarely names the value and the
considered change shares the question's words, so both outrank the statement that answers; no change was read, so
`time.current_truth` and the later-statement rule (`later.py`) have nothing to undo.

When one of the LATER_WINDOW best answers calls a change off (`nochange.called_off`, in what it tells, hedging
nothing), the earliest statement of its speaker's among the candidates scoring at least LATER_SHARE of the best,
said in an earlier conversation, of the same kind (cosine at least LATER_KIND with the call-off, or with the change
it calls off: what its speaker asked or hedged before it in its conversation, `_considered`), naming a value
and none the call-off names but what the question names, considering, asking or planning nothing, and of no change
read, ranks just above the best (`scores.stands`): the value that stands. The earliest, because the change
considered may be stated as plainly as the first ("Riverside Medical Centre is taking new patients"); a change that
happened in between was read as one, and its statements are left out.

When there is none and the best answer is the change considered itself, asked or hedged by the call-off's speaker
before it, while the call-off names a value it does not ("Orbit Mobile sent me a quote … Should I switch?" …
"Decided to stay put, Tidewave matched it at £10"), the call-off itself ranks just above it (`_keeps`). Either way
the rule only reorders what recall found and marks nothing.

A return to what was before, said without naming it ("rejoined my old gym", "everything moves back to the old
tracker"), is the other way a first statement stands again (`first_returned`): its speaker's earliest statement of a
value among the best answers or of the same kind ranks first and is no longer marked as changed; a return that names
the value beside it ("back to plain vegetarian") ranks first itself.

A change only considered and never called off ("Thinking of moving to Vodafone, they've got a deal") names a value
and shares the question's words; when it is the best answer, its speaker's latest plain statement of a value of that
kind said before it ranks above it (`plain_over_considered`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mneme.language import changes, nochange, questions, reverts
from mneme.language.text import meaningful_words
from mneme.models import Episode
from mneme.services.recall.run import pair_cosine, stored_vectors
from mneme.services.recall.truth.later import LATER_KIND, LATER_SHARE, LATER_WINDOW, above, after, said_at

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

# A change only considered: a maybe, a plan not made, a trial, a rumour. Narrower than `changes.HEDGE` on purpose:
# "could you …", "going to", "suggested" and "if" also come with changes that happened (measured on the update sets).
CONSIDERS = re.compile(
    r"\b(?:might|maybe|perhaps|thinking (?:of|about)|considering|planning to|hoping|tempted|debating|"
    r"wondering|not sure|rumou?r|apparently|probably|possibly|not yet|trial(?:l?ing|l?ed)?|trying (?:out )?|"
    r"looking (?:at|into))\b"
)


def first_stands(run: Run, read: list[dict[str, object]]) -> dict[str, object] | None:
    """The earliest statement of a call-off's speaker raised just above the best answer (`scores.stands`): which,
    over which, called off by which, at what cosine; None when there is none. `read`: the changes
    `current_truth` read, whose statements this rule leaves alone."""
    ranked = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))
    if len(ranked) < 2:
        return None
    top, chained = ranked[0], {str(one[key]) for one in read for key in ("id", "by")}
    asked = frozenset(meaningful_words(run.request.query or ""))
    for off in ranked[:LATER_WINDOW]:
        said = _episode(off)
        if said is None or not _calls_off(said):
            continue
        called = said.reading.values - asked  # what the call-off names, but what the question names
        kin = [
            one
            for one in ranked
            if one.score >= LATER_SHARE * top.score
            and one.id not in chained
            and (theirs := _episode(one)) is not None
            and theirs.speaker == said.speaker
            and after(one, off)
            and _states(theirs, called)
        ]
        found = _of_kind(run, [off, *_considered(ranked, off, said)], kin) if kin else []
        if not found and _keeps(top, off, said, called):
            found = _of_kind(run, [top], [off])  # the call-off names what stays: "Tidewave matched it at £10"
        if found:
            first, similarity = min(found, key=lambda pair: said_at(pair[0]))
            if first is top:
                return None
            return {**above(first, top, "stands", similarity), "called_off_by": off.id}
    return None


def first_returned(run: Run, later: dict[str, object] | None) -> dict[str, object] | None:
    """The earliest statement of what a return goes back to, raised just above the best answer
    (`scores.returned`) and no longer marked as changed: which, over which, `returned_by` which, at what cosine;
    None when there is none. A return says what it goes back to without naming it ("rejoined my old gym", "my
    old boss is back", "the pipelines go back to the old build server": `reverts.goes_back`), so it outranks the
    statement that names the value, which holds again, and which the change words of the return ("back to",
    "instead") may have read as changed by it. For a return among the LATER_WINDOW best answers, hedging nothing: the
    earliest statement of its speaker's (or an agent's note or an assistant's recap) said in an earlier conversation,
    naming a value and asking nothing, that is among the best answers or of the same kind (cosine at least LATER_KIND
    with the return, scoring at least LATER_SHARE of the best). `later`: what the later-statement rule raised
    (`later.later_first`), if anything; then only a return it raised is read ("Lasted eleven days vegan, I'm happier
    as I was" raised over "I've been vegetarian for years"). A return that names the value beside it ("the Halden
    Lumo is back on my bedside table", `reverts.named_back`), which its speaker named in an earlier conversation, is
    itself raised: it says how things are."""
    ranked = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))
    best = ranked[:LATER_WINDOW]
    for back in best:
        if not isinstance(back.record, Episode) or back.changed is not None or (later and later["id"] != back.id):
            continue
        said = changes.said(back.record)
        if said.reading.hedged or said.reading.asks:
            continue
        if not reverts.goes_back(said.text):
            named = _named_back(said, best, back, run.request.query or "")
            if named is not None:  # it names what it returns to: it is the answer
                back.changed = None
                similarity = pair_cosine(stored_vectors(run, [named, back]), named, back)
                return {**above(back, ranked[0], "returned", similarity), "returned_by": back.id}
            continue
        kin = [
            one
            for one in ranked
            if one.score >= LATER_SHARE * ranked[0].score
            and isinstance(one.record, Episode)
            and after(one, back)
            and changes.speaker(one.record) in {said.speaker, None, "assistant"}
            and _was(changes.said(one.record))
        ]
        vectors = stored_vectors(run, [back, *kin])
        found = [
            (one, cosine) for one in kin if (cosine := pair_cosine(vectors, one, back)) >= LATER_KIND or one in best
        ]
        if found:
            first, similarity = min(found, key=lambda pair: said_at(pair[0]))
            if first is ranked[0]:
                return None
            first.changed = None  # what was gone back to holds again
            return {**above(first, ranked[0], "returned", similarity), "returned_by": back.id}
    return None


def plain_over_considered(run: Run) -> dict[str, object] | None:
    """An earlier plain statement of a value, raised just above a best answer that only considers another
    (`scores.considered`): which, over which, at what cosine; None when there is none. "Thinking of moving to
    Vodafone, they've got a deal with free roaming", "There's a rumour our squad would report to Kwame", "Is Notion
    any better than what I use for notes?" share the question's words and name a value, so they outrank the
    statement of how things are ("My phone is with Lebara, £10 a month"), which nothing changed. For a best answer every
    sentence of which that names a value is a maybe, a plan, a trial, a rumour or a question (`_considers`), naming
    one the question does not: of its speaker's statements (or an agent's note) of no change read, said in an
    earlier conversation, scoring at least LATER_SHARE of it, that state a value of its kind as how things are and
    none it considers (`_alike`), and are among the LATER_WINDOW best or of the same kind (cosine at least
    LATER_KIND), the latest."""
    ranked = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))
    top = ranked[0] if ranked else None
    said = _episode(top) if top is not None else None
    if top is None or said is None:
        return None
    considered = _considers(said.text) - frozenset(meaningful_words(run.request.query or ""))
    if not considered:
        return None
    kin = [
        one
        for one in ranked[1:]
        if one.score >= LATER_SHARE * top.score
        and (theirs := _episode(one)) is not None
        and theirs.speaker in {said.speaker, None}
        and after(one, top)
        and _states(theirs, considered)  # asking nothing, hedging nothing
        and _alike(theirs.reading.values, considered)
    ]
    if not kin:
        return None
    vectors, best = stored_vectors(run, [top, *kin]), ranked[:LATER_WINDOW]
    found = [(one, cosine) for one in kin if (cosine := pair_cosine(vectors, one, top)) >= LATER_KIND or one in best]
    if not found:
        return None
    plain, similarity = max(found, key=lambda pair: said_at(pair[0]))
    return above(plain, top, "considered", similarity)


def _considers(text: str) -> frozenset[str]:
    """The values a text only considers: every sentence of it that names one is a maybe, a plan, a trial, a rumour
    (CONSIDERS) or a question that is no request ("My salary landed in the new Nationwide account, so can you help me
    with a budget?" says Nationwide plainly); empty when any sentence naming a value says it plainly."""
    named: set[str] = set()
    for sentence in changes.sentences(text):
        found = changes.values(sentence) - changes.openers(sentence)
        if not found:
            continue
        lowered = sentence.lower().strip()
        asked = lowered.endswith("?") and not changes.ASKS_YOU.search(lowered)  # a request ("can you …?") tells
        if not (asked or CONSIDERS.search(lowered)):
            return frozenset()
        named |= found
    return frozenset(named)


def _alike(named: frozenset[str], considered: frozenset[str]) -> bool:
    """A plain statement names a value of the kind considered: a number for a number ("the 100 mg dose might be
    part of it" is not answered by "the GP doubled my sertraline"), a name or word for one."""
    if changes.numbers(considered) == considered:
        return bool(changes.numbers(named))
    return bool(named - changes.numbers(named))


def _named_back(said: changes.Said, best: list[Candidate], back: Candidate, query: str) -> Candidate | None:
    """Among the best answers, the statement of a value a return names beside it (`reverts.named_back`) that its
    speaker said in an earlier conversation, if any: the return goes back to it. None for a return that is the best
    answer already, or says a slot the question does not ask of ("Grace moved back to Paisley", asked Efua's job)."""
    named = reverts.named_back(said)
    if not named or back is best[0]:
        return None
    asked = questions.question_slots(query)  # read only for a named return, not for every best answer
    if asked and said.reading.slots and not asked & said.reading.slots:
        return None
    theirs = [one for one in best if isinstance(one.record, Episode) and changes.speaker(one.record) == said.speaker]
    return next((one for one in theirs if after(one, back) and changes.said(one.record).reading.values & named), None)  # type: ignore[arg-type]


def _keeps(top: Candidate, off: Candidate, said: changes.Said, called: frozenset[str]) -> bool:
    """The best answer is its speaker's change only considered ("Orbit sent me a quote: £9 a month. Should I
    switch?"), said before the call-off, which names a value it does not: the one that stays ("Decided to stay put,
    Tidewave matched it at £10")."""
    considered = _episode(top)
    return (
        considered is not None
        and considered.speaker == said.speaker
        and said_at(top) < said_at(off)
        and ("?" in considered.text or considered.reading.hedged)
        and bool(called - considered.reading.values - changes.openers(said.text))
    )


def _of_kind(run: Run, references: list[Candidate], kin: list[Candidate]) -> list[tuple[Candidate, float]]:
    """Of `kin`, those of the same kind (cosine at least LATER_KIND, the stored vectors read once) as the call-off or
    the change it calls off (`references`; the higher cosine): a call-off says little ("Right, so it's a loss. I'll
    stay where I am."), the change considered says what of ("E.ON Next quoted me £1,620 a year against my £1,710")."""
    vectors = stored_vectors(run, [*references, *kin])
    cosines = [(one, max(pair_cosine(vectors, reference, one) for reference in references)) for one in kin]
    return [(one, cosine) for one, cosine in cosines if cosine >= LATER_KIND]


def _considered(ranked: list[Candidate], off: Candidate, said: changes.Said) -> list[Candidate]:
    """The change a call-off calls off, as far as recall found it: its speaker's turns before it in its
    conversation that ask or hedge ("Should I switch clubs mid-season?", "E.ON quoted me …, is £90 worth it?")."""
    found = []
    for one in ranked:
        theirs = _episode(one)
        if (
            theirs is not None
            and theirs.speaker == said.speaker
            and changes.one_conversation(theirs.record, said.record)
            and said_at(one) < said_at(off)
            and ("?" in theirs.text or theirs.reading.hedged)
        ):
            found.append(one)
    return found


def _episode(candidate: Candidate) -> changes.Said | None:
    """An episode of no change read, read once (`changes.said`); None for anything else."""
    record = candidate.record
    if not isinstance(record, Episode) or candidate.changed is not None:
        return None
    return changes.said(record)


def _calls_off(said: changes.Said) -> bool:
    """Its told sentences call a change off, and it hedges nothing."""
    return nochange.called_off(changes.told(said.text).lower()) and not said.reading.hedged


def _was(said: changes.Said) -> bool:
    """It names a value and asks nothing: a request that names one counts ("Can you help me with an agenda for my
    review with my manager, Priyanka Shah?"), as it says how things were."""
    named = said.reading.values - changes.by_place(said.text) - changes.openers(said.text)
    return bool(named) and not said.reading.asks


def _states(said: changes.Said, called: frozenset[str]) -> bool:
    """It states a value as how things are (no maybe, plan or question only), none the call-off names but what the
    question names (`called`): "Kinetik offered me a lead role" is what "I said no to Kinetik" calls off; "the
    Halden Foundation's date stands" is of what was asked."""
    told = changes.told(said.text).lower()
    if not changes.may_be_updated(said) or said.reading.hedged or nochange.FUTURE.search(told):
        return False
    named = said.reading.values - changes.by_place(said.text)
    return bool(named) and not named & called
