"""What a recall query says about time, read against `occurred_at` rather than the words of a text.

`query_time(query)` gives the query's time window, when it names one ("in 2023", "in May 2024",
"the autumn of 2024", "Christmas 2022", "the first half of September 2024"), and its order
preference: `latest` for a question about the present state of something ("now", "currently", "at
the moment", "these days", "the latest"), `earliest` for a question about a first time ("first",
"originally"). A relative period ("last May", "last year", "two years ago", "yesterday") is read
against a reference time: the request's `as_of` when it gives one, else the time of the request.
The recall pipeline's `time` stage (`time_stage`, here) turns these into score
factors (a soft window, a recency / earliness prior, a preference for the texts that say when, for
a question asking when) and, for a question about the present, lets
a later statement supersede an earlier one that says the same kind of thing (`supersede`): an old
value never hides the new one, and nothing is filtered out.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from mneme.language import changes, questions, reverts
from mneme.language.text import MONTH, MONTHS, meaningful_words, terms
from mneme.models import Episode, session_position
from mneme.records import Fact
from mneme.services.recall.records import STALE, Record
from mneme.services.recall.run import QueryTime, pair_cosine, stored_vectors
from mneme.services.recall.truth.later import LATER_KIND, drawn_from, earlier_first, later_first
from mneme.services.recall.truth.stands import first_returned, first_stands, plain_over_considered

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    from mneme.services.recall.run import Candidate, Run

_YEAR = r"(?P<y>(?:19|20)\d\d)"
SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12), "winter": (12, 15)}
LATEST = re.compile(
    r"\b(now|nowadays|currently|current|these days|at the moment|at present|presently|today|latest|"
    r"most recent(?:ly)?|still|any more|anymore|so far|by now)\b"
)
BEFORE_NOW = re.compile(r"\b(?:before|prior to) (?:the|my|his|her|their|our|its) (?:current|latest|present)\b")
EARLIEST = re.compile(
    r"\b(first|earliest|originally|initially|at first|to begin with|in the beginning|start(?:ed)? out|"
    r"started (?:on|with)|did [\w' ]{1,30} start (?:on|with))\b"  # "what salary did Leon start on?"
)
_WINDOWS = [  # most specific first; each gives (start month offset, end month offset) within a year
    re.compile(rf"\b(?P<half>first|second) half of (?P<mon>{MONTH}),? {_YEAR}\b"),
    re.compile(rf"\b(?P<part>early|mid|late)[- ](?P<mon>{MONTH}),? {_YEAR}\b"),
    re.compile(rf"\b(?P<mon>{MONTH}),? (?:of )?{_YEAR}\b"),
    re.compile(r"\b(?P<y2>(?:19|20)\d\d)-(?P<m2>0[1-9]|1[0-2])\b"),
    re.compile(rf"\b(?P<season>{'|'.join(SEASONS)}) (?:of )?{_YEAR}\b"),
    re.compile(rf"\b(?:christmas|xmas|new year'?s? eve) (?:of )?{_YEAR}\b"),
    re.compile(rf"\b(?P<part>early|mid|late)[- ]{_YEAR}\b"),
    re.compile(rf"\b{_YEAR}\b"),
]


_WEEKDAY = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
ASKS_WHEN = re.compile(
    r"\b(when (?:did|was|were|is|are|does|do|will|has|have|had|can|could|should)|what date|which date|what day|"
    r"which day|what time|how long ago|how many (?:days|weeks|months|years) ago)\b"
)
SAYS_WHEN = re.compile(  # a text that says when something happened or will (the answer to a 'when' question)
    rf"\b(?:{_WEEKDAY}|{MONTH}|yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening)|"
    rf"(?:last|next|this) (?:week|weekend|month|year|night|{'|'.join(SEASONS)})|ago|"
    r"(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th)|(?:first|second|third|fourth|fifth|tenth|twentieth) of|"
    r"christmas|easter|new year)\b"
)


def _month(year: int, month: int) -> datetime:
    """The first of a month counted from January of `year` (13 = January of the next year)."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _window(m: re.Match[str]) -> tuple[datetime, datetime]:
    g = m.groupdict()
    if g.get("y2"):
        year, month = int(g["y2"]), int(g["m2"])
        return _month(year, month), _month(year, month + 1)
    year = int(g["y"])
    if g.get("mon"):
        start = _month(year, MONTHS.index(g["mon"]) + 1)
        end = _month(year, MONTHS.index(g["mon"]) + 2)
        if g.get("half") or g.get("part"):
            which = str(g.get("half") or g.get("part"))
            middle = start.replace(day=16)
            start, end = {
                "first": (start, middle),
                "second": (middle, end),
                "early": (start, start.replace(day=11)),
                "mid": (start.replace(day=11), start.replace(day=21)),
                "late": (start.replace(day=21), end),
            }[which]
        return start, end
    if g.get("season"):
        first, last = SEASONS[g["season"]]
        return _month(year, first), _month(year, last)
    if "christmas" in m[0] or "xmas" in m[0] or "new year" in m[0]:
        return datetime(year, 12, 20, tzinfo=UTC), datetime(year + 1, 1, 3, tzinfo=UTC)
    if g.get("part"):
        first = {"early": 1, "mid": 5, "late": 9}[g["part"]]
        return _month(year, first), _month(year, first + 4)
    return _month(year, 1), _month(year + 1, 1)


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}  # fmt: skip
_RELATIVE = [  # periods counted back from the reference time (the request's as_of, else now)
    re.compile(rf"\b(?:last|past) (?P<mon>{MONTH})\b"),
    re.compile(rf"\b(?:last|past) (?P<season>{'|'.join(SEASONS)})\b"),
    re.compile(r"\b(?:last|past|previous) (?P<unit>year|month|week)\b"),
    re.compile(rf"\b(?P<n>\d{{1,2}}|{'|'.join(_NUMBERS)}) (?P<unit>year|month|week|day)s? ago\b"),
    re.compile(r"\b(?P<yesterday>yesterday)\b"),
]


def _relative(m: re.Match[str], reference: datetime) -> tuple[datetime, datetime]:
    """The window a relative period names, counted back from `reference`: 'last May' is the latest
    May that ended before the reference's month, 'last summer' the latest summer that began before
    it, 'last year/month/week' the calendar unit before the reference's, 'two years ago' the calendar
    year two before, 'three weeks ago' the week around that day, 'yesterday' the day before."""
    g = m.groupdict()
    ref = reference.astimezone(UTC)
    day = datetime(ref.year, ref.month, ref.day, tzinfo=UTC)
    if g.get("mon"):
        month = MONTHS.index(g["mon"]) + 1
        year = ref.year if month < ref.month else ref.year - 1
        return _month(year, month), _month(year, month + 1)
    if g.get("season"):
        first, last = SEASONS[g["season"]]
        year = ref.year if _month(ref.year, first) < _month(ref.year, ref.month) else ref.year - 1
        return _month(year, first), _month(year, last)
    if g.get("yesterday"):
        return day - timedelta(days=1), day
    n = 1 if not g.get("n") else _NUMBERS.get(g["n"]) or int(g["n"])
    unit = g["unit"]
    if unit == "year":
        return _month(ref.year - n, 1), _month(ref.year - n + 1, 1)
    if unit == "month":
        return _month(ref.year, ref.month - n), _month(ref.year, ref.month - n + 1)
    if unit == "week" and not g.get("n"):  # last week: the Monday-to-Monday week before this one
        monday = day - timedelta(days=day.weekday())
        return monday - timedelta(days=7), monday
    span = timedelta(days=7 if unit == "week" else 1) * n
    if unit == "week":
        return day - span - timedelta(days=4), day - span + timedelta(days=4)
    return day - span, day - span + timedelta(days=1)


# an order word inside a name ("the Ladies' First XI", "Second Avenue") asks for no order
NAMED_ORDER = re.compile(r"(?<=[\w',] )(?:First|Second|Third|Last|Latest|Current|Original)(?= [A-Z0-9])")


def plain(query: str) -> str:
    """The query as the time rules read it: lower case, straight quotes, single spaces, without the order words
    of a name."""
    return " ".join(NAMED_ORDER.sub("", query).lower().replace("’", "'").split())


def query_time(query: str, reference: datetime | None = None) -> QueryTime:
    """The query's window and order preference. A relative period ('last May', 'two years ago') is
    read only with a `reference` time: recall passes the request's `as_of`, else the current time."""
    text = plain(query)
    since = until = said = None
    for pattern in _WINDOWS:
        m = pattern.search(text)
        if m:
            since, until = _window(m)
            said = m[0]
            break
    for pattern in _RELATIVE if said is None and reference is not None else []:
        m = pattern.search(text)
        if m and reference is not None:
            try:
                since, until = _relative(m, reference)
            except (OverflowError, ValueError):  # a period before year 1 (as_of near 0001-01-01): no window
                break
            said = m[0]
            break
    rest = text.replace(said, " ") if said else text  # 'the first half of May 2024' is a window, not an order
    rest = BEFORE_NOW.sub("before", rest)  # 'before the current one' asks what held before it: not an order
    prefer = "latest" if LATEST.search(rest) else "earliest" if EARLIEST.search(rest) else None
    return QueryTime(since, until, prefer, said, bool(ASKS_WHEN.search(text)))


TIME_WINDOW_BOOST = 1.3  # an episode inside the time window the query names ("in May 2024")
TIME_ORDER_WEIGHT = 1.0  # "now" / "first" questions: the latest (earliest) candidate x(1 + this)
SAYS_WHEN_BOOST = 1.7  # a 'when' question: an episode whose text says when (a day, a date, 'last week', 'ago')
SUPERSEDE_POOL = 50  # supersession is looked for among this many best-scored episodes


def time_stage(run: Run) -> None:
    """The query's time, read against `occurred_at` (a fact's `valid_from`: `happened`): an episode
    or fact inside the window the query names scores TIME_WINDOW_BOOST times higher; a question
    about the present ('now', 'currently') favours the later of the candidates, one about a first
    time the earlier (up to ×(1 + TIME_ORDER_WEIGHT), by rank in time among the candidates); a
    question that asks when ('when did…', 'on what date…') favours the episodes that say when
    (SAYS_WHEN: a weekday, a month, a date, 'yesterday', 'last week', 'ago'; ×SAYS_WHEN_BOOST,
    `scores.says_when`): in a conversation the answer to 'when' is the turn that says 'on Tuesday',
    read with its occurred_at; and a question about a present state lets a newer statement of the
    same thing supersede an older one (`supersede`). Nothing is dropped."""
    took = len(run.candidates)
    when = run.when
    times = {c.id: t for c in run.candidates.values() if (t := happened(c.record)) is not None}
    timed = [c for c in run.candidates.values() if c.id in times]
    dated = [c for c in timed if isinstance(c.record, Episode)]
    inside = 0
    if when.since is not None and when.until is not None:
        for candidate in timed:
            if when.since <= times[candidate.id] < when.until:
                candidate.scores["window"] = TIME_WINDOW_BOOST
                candidate.score *= TIME_WINDOW_BOOST
                inside += 1
    if when.prefer and len(timed) > 1:
        order = sorted(timed, key=lambda c: (times[c.id], *_written(c.record), c.id))
        for position, candidate in enumerate(order):
            share = position / (len(order) - 1)
            factor = 1 + TIME_ORDER_WEIGHT * (share if when.prefer == "latest" else 1 - share)
            candidate.scores["recency" if when.prefer == "latest" else "earliness"] = round(factor, 6)
            candidate.score *= factor
    says_when = 0
    if when.asks_when:
        for candidate in dated:
            assert isinstance(candidate.record, Episode)
            if SAYS_WHEN.search(candidate.record.content.lower()):
                candidate.scores["says_when"] = SAYS_WHEN_BOOST
                candidate.score *= SAYS_WHEN_BOOST
                says_when += 1
    truth = truth_mode(run)
    if truth == "present":
        _changed_weigh_less(run)
        _no_fresher_than_sources(run)
    named_change = before_change(run) if truth == "past" else 0
    superseded = current_truth(run, truth) if truth is not None else []
    later = later_first(run, superseded, SAYS_WHEN if when.asks_when else None) if truth == "present" else None
    stands = first_stands(run, superseded) if truth == "present" and later is None else None
    returned = first_returned(run, later) if truth == "present" and stands is None else None
    plain = truth == "present" and later is None and stands is None and returned is None
    considered = plain_over_considered(run) if plain else None
    earlier = earlier_first(run, superseded) if truth == "past" else None
    window = [when.since.isoformat(), when.until.isoformat()] if when.since and when.until else None
    run.note(
        "time",
        took,
        [],
        window=window,
        said=when.said,
        prefer=when.prefer,
        inside=inside,
        says_when=says_when,
        truth=truth,
        named_change=named_change,
        superseded=superseded,
        later=later,
        stands=stands,
        returned=returned,
        considered=considered,
        earlier=earlier,
    )


def _written(record: object) -> tuple[datetime, int]:
    """The order records of one time were written in: an exported log gives every turn of a session the session's
    one time, and its later turn is the later word (one call's turns by their sequence)."""
    assert isinstance(record, Episode | Fact)
    return record.created_at, record.sequence if isinstance(record, Episode) else 0


def happened(record: object) -> datetime | None:
    """When what a record says happened: an episode's `occurred_at`, a fact's `valid_from` (since when
    its value holds); a memory is a curated document with no such time."""
    if isinstance(record, Episode):
        return record.occurred_at
    if isinstance(record, Fact):
        return record.valid_from
    return None


# A question about the past asks for the value before a change; one about an event ("what did she say")
# or a run of them ("what has he tried") asks for neither end of a change.
PAST = re.compile(
    r"\b(before|previously|formerly|used to|original(?:ly)?|initially|at first|prior to|back then|back when|"
    r"in the past|to begin with)\b"
)
PAST_THING = re.compile(r"\b(?<!how )(old|former|previous)\b")  # "the old rent" is the past only beside a past verb
PAST_VERB = re.compile(
    r"\b(did|was|were|had|happened)\b|\b(has|have|'ve)\b(?: \w+){0,3} (ever|been|done|tried|visited|had|"
    r"talked|spoken|mentioned|said|told|shared|discussed|described|brought up|dealt with|faced|gone through)\b"
)  # "what health problems has he talked about?" asks what was said, not how things are
TOLD = re.compile(  # a verb in the past tense: beside "old" or "former", an event ("what broke on her old car?")
    r"\b(?:broke|went|got|came|took|gave|left|bought|sold|lost|won|ran|began|ate|drove|wrote|fell|found|made|"
    r"paid|cost|kept|meant|felt|thought|knew|saw|chose|spent|[a-z]{3,}ed)\b"
)
TOPICAL_SHARE = 0.3  # ... those scoring at least this share of the best one
TOPICAL = 10  # the best answers to a question: two of them about one owner are about what it asks
NEWER = 1.01  # the later statement of a change ranks just above the earlier one it updates
EARLIER = 0.9  # ... and the earlier one just below it


def truth_mode(run: Run) -> str | None:
    """`present` for a question about how things are (in the present tense, whether or not it says "now"),
    `past` for one about how they were before ("before York", "originally", "used to"), None when the
    question names a period or `as_of`, or is about an event ("when did…", "what did she say"): then changes
    only mark the earlier statements."""
    when, query = run.when, plain(run.request.query or "")
    if run.request.as_of is not None or when.since is not None:
        return None
    if when.prefer == "latest":
        return "present"
    past_verb = PAST_VERB.search(query)
    if PAST.search(query) or (past_verb and PAST_THING.search(query)):
        return "past"
    if TOLD.search(query) and PAST_THING.search(query):
        return None  # an event of an old thing: "what broke on her old car?", "who bought his old Renault?"
    return None if past_verb or when.prefer == "earliest" else "present"  # "when is it due?" asks about now


# "Where did Idris live before Cardiff?": the answer is what held before the change the question names
BEFORE = re.compile(r"\bbefore\s+(?P<change>[^?.!,;]+)")
CHANGE_VERBS = frozenset(  # the words around the change's name: "before she joined Arup", "before moving to York"
    "join joined joining moved moving started starting switch switched switching become became get got getting go "
    "went going take took taking sign signed signing upgraded upgrading the her his their".split()
)
AFTER_CHANGE = 0.2  # the candidates from the first one that names the change on
BEFORE_CHANGE = 1.3  # the candidates said before it


def before_change(run: Run) -> int:
    """A question about the past that names the change it asks before ("where did she work before she joined
    Arup?", "which version was prod on before the upgrade?") asks for what held before it, which the turns
    that tell the change rarely say: from the first candidate that names the change (every word of it after
    'before', but the verbs around it) on, candidates weigh ×AFTER_CHANGE (`scores.after_change`), and those
    said before it ×BEFORE_CHANGE (`scores.before_change`). A time after 'before' ("before 2024") is a window,
    read by `query_time`. Returns how many candidates name the change."""
    m = BEFORE.search(" ".join((run.request.query or "").lower().replace("’", "'").split()))
    named = terms(" ".join(w for w in meaningful_words(m["change"]) if w not in CHANGE_VERBS)) if m else set()
    if not named or run.when.since is not None:
        return 0
    told = {
        c.id: (when, named <= terms(changes.statement(c.record)))
        for c in run.candidates.values()
        if isinstance(c.record, Episode | Fact) and (when := happened(c.record)) is not None
    }
    naming = [when for when, names in told.values() if names]
    if not naming:
        return 0
    change = min(naming)
    for candidate in run.candidates.values():
        if candidate.id in told:
            name, factor = (
                ("before_change", BEFORE_CHANGE) if told[candidate.id][0] < change else ("after_change", AFTER_CHANGE)
            )
            candidate.scores[name] = factor
            candidate.score *= factor
    return len(naming)


def position(record: Record) -> tuple[datetime, datetime, int]:
    if isinstance(record, Episode):
        return session_position(record)
    assert isinstance(record, Fact)
    return (record.valid_from, record.valid_from, -1)


def current_truth(run: Run, mode: str) -> list[dict[str, object]]:
    """Among the SUPERSEDE_POOL best episodes and claim facts, a later statement that updates an earlier one
    (`mneme.language.changes.update_reason`: one owner, one subject, a change) supersedes it, and the earlier one is
    marked `since_changed`. Chains end at the latest statement, the current one. For a question about the
    present the current statement ranks just above every statement it superseded (`scores.newer`), which rank
    just below it (`scores.superseded`); for one about the past, the statement just before the current one
    (the first one, for "originally") ranks just above it (`scores.earlier`). Returns who superseded whom."""
    ranked = sorted(run.candidates.values(), key=lambda c: (-c.score, c.id))[:SUPERSEDE_POOL]
    records = {
        c.id: r for c in ranked if isinstance(r := c.record, Episode) or (isinstance(r, Fact) and r.tier == "raw")
    }
    pool = [c for c in ranked if c.id in records]
    floor = TOPICAL_SHARE * max((c.score for c in pool), default=0.0)
    best = {c.id for c in pool[:TOPICAL] if c.score >= floor}  # the question's answers: it says what they are about
    at = {c.id: position(records[c.id]) for c in pool}  # each once, compared pair by pair below
    pool.sort(key=lambda c: (at[c.id], c.id))
    query = run.request.query or ""
    present, about, asked = mode == "present", questions.people(query), questions.question_slots(query)
    words = frozenset(meaningful_words(query))

    said = [changes.said(records[c.id]) for c in pool]  # each read once, compared with every other

    def reason(i: int, j: int, similarity: float) -> str | None:
        topical = pool[i].id in best and pool[j].id in best
        return changes.update_reason(
            said[i], said[j], similarity, present=present, topical=topical, asked=asked, about=about, words=words
        )

    updaters = [changes.may_update(one, present=present) for one in said]  # screened once, not per pair
    updated = [changes.may_be_updated(one) for one in said]
    pairs = [
        (i, j)
        for j in range(len(pool))
        if updaters[j]
        for i in range(j)
        if updated[i]
        and at[pool[i].id] < at[pool[j].id]
        and not _grounds(records, pool[i].id, pool[j].id)
        and reason(i, j, 1.0)
    ]
    marked = _consolidated(run, mode)
    if not pairs:
        return marked
    involved = [pool[k] for k in sorted({k for pair in pairs for k in pair})]
    run.with_vectors(involved)
    vectors = stored_vectors(run, involved)
    winner = _latest_updaters(pool, pairs, vectors, reason)
    restored = _reverted(run, pool, said, at, winner)
    _drawn_from_chains(pool, winner, _rank_chains(run, pool, winner, mode))
    for i, k in restored if mode == "present" else []:
        _above(pool[i], pool[k], "restored", "superseded")  # what a change called off had superseded, above it
    out: list[dict[str, object]] = []
    for i, (j, why, similarity) in sorted(winner.items()):
        later = pool[j]
        pool[i].changed = {"by": later.id, "at": position(records[later.id])[0].date().isoformat(), "why": why}
        out.append({"id": pool[i].id, "by": later.id, "why": why, "similarity": round(similarity, 6)})
    if mode == "present":
        out += _claims_follow(run, pool, winner, {i for i, _ in restored})
    found = {str(one["id"]) for one in out}
    return [m for m in marked if m["id"] not in found] + out


def _claims_follow(
    run: Run, pool: list[Candidate], winner: dict[int, tuple[int, str, float]], restored: set[int]
) -> list[dict[str, object]]:
    """For a question about the present, a claim fact drawn from a turn a later one superseded is superseded by the
    chain's latest statement too, when it is of the slot the change was read of: "User lives in Leeds." from "I live
    in Leeds and work at Acme", after "we moved to York" superseded that turn; not "User works at Acme.", nor
    anything after a change read only as the same kind of thing ("Meet Amaretto, our new rescue bunny!" changed "We
    have two cats and a rabbit called Biscotti", not "Chiara has two cats.")."""
    index = {one.id: k for k, one in enumerate(pool)}
    out: list[dict[str, object]] = []
    for candidate in list(run.candidates.values()):
        fact = candidate.record
        if not isinstance(fact, Fact) or fact.tier != "raw" or candidate.changed is not None:
            continue
        i = index.get(drawn_from(run, candidate).id)
        if i is None or i not in winner or i in restored:
            continue  # its turn was not superseded, or a change called off restored it
        head, why = _head(winner, i), winner[i][1]
        later = pool[head]
        if later.id in fact.source_episode_ids:
            continue
        if why.partition(":")[0] in changes.said(fact).reading.slots:
            at = position(later.record)[0].date().isoformat()  # type: ignore[arg-type]
            candidate.changed = {"by": later.id, "at": at, "why": f"its source, {why}"}
            _above(later, candidate, "newer", "superseded")
            out.append({"id": candidate.id, "by": later.id, "why": f"its source, {why}"})
    return out


def _latest_updaters(
    pool: list[Candidate],
    pairs: list[tuple[int, int]],
    vectors: dict[str, NDArray[np.float32]],
    reason: Callable[[int, int, float], str | None],
) -> dict[int, tuple[int, str, float]]:
    """Of the pairs the words allow (at cosine 1), each earlier statement's latest updater at the pair's real
    cosine: (its index, why, cosine). Its later statements are tried latest first, so the first that updates
    it is the one kept — unless a statement of the same conversation says more (`changes.strength`: "deadline: brought
    forward" over "same answer: moved", two notes of one meeting) — and earliest first up to the first that
    does: the earlier statements come in the order of their first updater (as if every pair were read in order
    of the later one, which `_reverted` reads in)."""
    laters: dict[int, list[int]] = {}
    for i, j in pairs:
        laters.setdefault(i, []).append(j)

    def updates(i: int, j: int) -> tuple[int, str, float] | None:
        similarity = pair_cosine(vectors, pool[i], pool[j])
        why = reason(i, j, similarity)
        return (j, why, similarity) if why else None

    def latest_of(i: int, found: list[int]) -> tuple[int, str, float] | None:
        latest: tuple[int, str, float] | None = None
        for j in reversed(found):
            if latest is not None and not _one_conversation(pool[j], pool[latest[0]]):
                break  # an earlier conversation: the latest one's update stands
            hit = updates(i, j)
            if hit is not None and (latest is None or changes.strength(hit[1]) > changes.strength(latest[1])):
                latest = hit
        return latest

    winner: dict[int, tuple[int, str, float]] = {}
    first: dict[int, int] = {}
    for i, found in laters.items():
        latest = latest_of(i, found)
        if latest is not None:
            winner[i] = latest
            first[i] = next(j for j in found if j == latest[0] or updates(i, j))
    return {i: winner[i] for i in sorted(winner, key=lambda i: (first[i], i))}


def _one_conversation(one: Candidate, other: Candidate) -> bool:
    a, b = one.record, other.record
    return isinstance(a, Episode) and isinstance(b, Episode) and changes.one_conversation(a, b)


def _reverted(
    run: Run,
    pool: list[Candidate],
    said: list[changes.Said],
    at: dict[str, tuple[datetime, datetime, int]],
    winner: dict[int, tuple[int, str, float]],
) -> list[tuple[int, int]]:
    """A change undone: a later statement that goes back to the value of a statement since changed ("I've gone
    back to my own surname") updates the change (`reverts.returns_to`), which then no longer ends the chain; one
    that calls the change off ("changed my mind, we're staying put": `reverts.undoes`) updates it too, and the
    statements it had superseded stand again: returned as (statement, change) pairs."""
    called_off: set[int] = set()
    for i, (k, _, _) in list(winner.items()):
        if k in winner:
            continue
        later = [j for j in range(len(pool)) if at[pool[j].id] > at[pool[k].id]]
        for j in reversed(later):  # the latest return first
            back = reverts.returns_to(said[i], said[j])
            off = None if back else reverts.undoes(said[k], said[j], said[i])
            if why := back or off:
                run.with_vectors([pool[k], pool[j]])
                winner[k] = (j, why, pair_cosine(stored_vectors(run, [pool[k], pool[j]]), pool[k], pool[j]))
                if off:
                    called_off.add(k)
                break
    restored = [(i, k) for i, (k, _, _) in winner.items() if k in called_off]
    for i, _ in restored:
        del winner[i]
    return restored


def _rank_chains(
    run: Run, pool: list[Candidate], winner: dict[int, tuple[int, str, float]], mode: str
) -> dict[int, int]:
    """For the present, each chain's current statement just above every one it superseded; for the past, the
    statement just before the chain's change (the first, for "originally") just above the current one — the change
    is the chain's strongest link (`changes.strength`): "Ghent" before "the van leaves for Utrecht", not the move
    before a restatement read after it ("same answer") — of the turns of its conversation, the one that names a
    value and answers the question best ("My ThinkPad X1 fan sounds like a jet engine", not the "It's five years
    old." said after it, which ranks below it, `scores.vaguer`). Returns, for the past, each current statement's
    earlier one put above it."""
    head = {i: _head(winner, i) for i in winner}  # the current statement each chain ends at
    if mode == "present":
        for i in sorted(winner):  # oldest first
            _above(pool[head[i]], pool[i], "newer", "superseded")
        return {}
    first = run.when.prefer == "earliest" or bool(FIRST_TIME.search(plain(run.request.query or "")))
    chosen: dict[int, int] = {}
    for h in set(head.values()):
        chain = sorted(i for i in winner if head[i] == h)
        strongest = max(changes.strength(winner[i][1]) for i in chain)  # the change itself, not a restatement
        end = chain[0] if first else max(i for i in chain if changes.strength(winner[i][1]) == strongest)
        told = [i for i in chain if i == end or _one_conversation(pool[i], pool[end])]
        valued = {i: _names_a_value(pool[i]) for i in told}
        chosen[h] = max(told, key=lambda i: (valued[i], pool[i].score, -i))
        _above(pool[chosen[h]], pool[h], "earlier", "later")
        for i in told:  # what says no value of that conversation ranks below the statement that does
            if i != chosen[h] and valued[chosen[h]] and not valued[i]:
                _above(pool[chosen[h]], pool[i], "earlier", "vaguer")
    return chosen


def _names_a_value(candidate: Candidate) -> bool:
    """The statement names a value (a name, a number, a value word), not only its kind ("First proper preventer
    I've had." after "The nurse has me on Clenil")."""
    told = changes.said(candidate.record)  # type: ignore[arg-type]
    return bool(told.reading.values - changes.openers(told.text))


def _drawn_from_chains(
    pool: list[Candidate], winner: dict[int, tuple[int, str, float]], chosen: dict[int, int]
) -> None:
    """For a question about the past, a claim fact drawn from a chain's current statement, of which no change
    was read itself, ranks just below the earlier statement the question asks for, as that turn does ("The
    report's due date is 3 May." from "the report is due 3 May instead", below "due by 12 April"). Not for the
    present: a turn superseded for one subject may hold a claim about another."""
    for k, candidate in enumerate(pool):
        fact = candidate.record
        if not isinstance(fact, Fact) or k in winner or k in chosen:
            continue
        head = next((h for h in chosen if pool[h].id in fact.source_episode_ids), None)
        if head is not None:
            _above(pool[chosen[head]], candidate, "earlier", "later")


def _changed_weigh_less(run: Run) -> None:
    """For a question about the present, a claim a later turn changed (`Fact.changed_by`) weighs ×STALE
    (`scores.stale`); for one about the past or about events it is the history asked for, at its full score
    (`records.lifecycle` leaves it to this stage)."""
    for candidate in run.candidates.values():
        if isinstance(candidate.record, Fact) and candidate.record.changed_by is not None:
            candidate.scores["stale"] = STALE
            candidate.score *= STALE


def _no_fresher_than_sources(run: Run) -> None:
    """For a question about the present, a claim fact ranks just below the best later turn of its owner that
    outscores the turn it was drawn from (`drawn_from`; a later conversation, of the same kind as that turn by the
    stored vectors, naming a value the claim does not; the claim's own person: "User's sister lives in Bath." is not
    passed by the user's "I moved to Bristol"): a run that wrote "Elif is vegetarian." from "I'm
    vegetarian" does not put it above "since January I've cut out dairy and eggs too, fully vegan", which
    outranked that turn before the run. The claim is no fresher than what it was read from (`scores.source_passed`)."""
    turns = [c for c in run.candidates.values() if isinstance(c.record, Episode)]
    for candidate in list(run.candidates.values()):
        fact = candidate.record
        if not isinstance(fact, Fact) or fact.tier != "raw" or fact.changed_by is not None:
            continue
        source = drawn_from(run, candidate)
        band = [turn for turn in turns if source.score < turn.score < candidate.score]
        if not band:
            continue  # nothing ranks between the claim and its turn (or that turn is not among the candidates)
        whose, claim = changes.owners(fact) - {changes.UNKNOWN}, changes.said(fact)
        passed = [
            turn
            for turn in band
            if turn.id not in fact.source_episode_ids
            and turn.record.occurred_at > fact.valid_from  # type: ignore[union-attr]
            and whose & changes.owners(turn.record)  # type: ignore[arg-type]
            and _names_anew(claim, changes.said(turn.record))  # type: ignore[arg-type]
        ]
        if not passed:
            continue
        vectors = stored_vectors(run, [source, *passed])
        if kin := [turn for turn in passed if pair_cosine(vectors, source, turn) >= LATER_KIND]:
            best = max(kin, key=lambda turn: turn.score)
            candidate.scores["source_passed"] = round(best.score * EARLIER / candidate.score, 6)
            candidate.score = best.score * EARLIER


def _names_anew(claim: changes.Said, turn: changes.Said) -> bool:
    """The turn states something (no question, maybe or plan) naming a value the claim does not."""
    named = turn.reading.values - claim.reading.values - changes.by_place(turn.text)
    return bool(named) and changes.may_update(turn, present=True)


def _consolidated(run: Run, mode: str) -> list[dict[str, object]]:
    """Claim facts consolidation found changed by a later turn (`Fact.changed_by`, where the turn gave no value
    a claim could hold) are marked `since_changed` whether or not that turn was found; when it was, it ranks
    just above the claim for a question about the present, just below it for one about the past. A question
    about another subject than the claim's ("what does he care about in a job?" of "his salary is £29k")
    leaves the claim where its grounding turn stands, flagged stale only."""
    out: list[dict[str, object]] = []
    asked = questions.question_slots(run.request.query or "")
    for candidate in list(run.candidates.values()):
        fact = candidate.record
        if not isinstance(fact, Fact) or fact.changed_by is None or fact.changed_at is None:
            continue
        if asked and (subject := changes.read(changes.statement(fact)).slots) and not asked & subject:
            continue
        candidate.changed = {"by": fact.changed_by, "at": fact.changed_at.date().isoformat(), "why": "consolidation"}
        later = run.candidates.get(fact.changed_by)
        if later is not None and mode == "present":
            _above(later, candidate, "newer", "superseded")
        elif later is not None:
            _above(candidate, later, "earlier", "later")
        out.append({"id": candidate.id, "by": fact.changed_by, "why": "consolidation"})
    return out


FIRST_TIME = re.compile(r"\b(original(?:ly)?|initially|at first|to begin with|first)\b")


def _grounds(records: dict[str, Episode | Fact], a: str, b: str) -> bool:
    """One of the two is a claim fact drawn from the other: a turn never updates the fact it states."""
    first, second = records[a], records[b]
    return (isinstance(first, Fact) and b in first.source_episode_ids) or (
        isinstance(second, Fact) and a in second.source_episode_ids
    )


def _head(winner: dict[int, tuple[int, str, float]], i: int) -> int:
    """The latest statement of the chain of updates `i` starts."""
    seen = {i}
    while i in winner and winner[i][0] not in seen:
        i = winner[i][0]
        seen.add(i)
    return i


def _above(top: Candidate, bottom: Candidate, raised: str, lowered: str) -> None:
    """`top` ranks just above `bottom` (NEWER times its score), `bottom` at most just below it (EARLIER)."""
    if top.score <= bottom.score:
        top.scores[raised] = round(bottom.score * NEWER / max(top.score, 1e-9), 6)
        top.score = bottom.score * NEWER
    if bottom.score > top.score * EARLIER > 0:
        bottom.scores[lowered] = round(top.score * EARLIER / bottom.score, 6)
        bottom.score = top.score * EARLIER
