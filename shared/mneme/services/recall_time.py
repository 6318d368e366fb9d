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

from mneme.models import Episode
from mneme.records import Fact
from mneme.services.indexing import speaker
from mneme.services.recall_run import QueryTime
from mneme.text import MONTH, MONTHS

if TYPE_CHECKING:
    from mneme.services.recall_run import Candidate, Run

_YEAR = r"(?P<y>(?:19|20)\d\d)"
SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12), "winter": (12, 15)}
LATEST = re.compile(
    r"\b(now|nowadays|currently|current|these days|at the moment|at present|presently|today|latest|"
    r"most recent(?:ly)?|still|any more|anymore|so far|by now)\b"
)
EARLIEST = re.compile(r"\b(first|earliest|originally|initially|at first|to begin with|in the beginning)\b")
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


def query_time(query: str, reference: datetime | None = None) -> QueryTime:
    """The query's window and order preference. A relative period ('last May', 'two years ago') is
    read only with a `reference` time: recall passes the request's `as_of`, else the current time."""
    text = " ".join(query.lower().replace("’", "'").split())
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
    prefer = "latest" if LATEST.search(rest) else "earliest" if EARLIEST.search(rest) else None
    return QueryTime(since, until, prefer, said, bool(ASKS_WHEN.search(text)))


TIME_WINDOW_BOOST = 1.3  # an episode inside the time window the query names ("in May 2024")
TIME_ORDER_WEIGHT = 1.0  # "now" / "first" questions: the latest (earliest) candidate x(1 + this)
SAYS_WHEN_BOOST = 1.7  # a 'when' question: an episode whose text says when (a day, a date, 'last week', 'ago')
SAME_THING = 0.5  # two turns of one speaker whose stored vectors' cosine is at least this say the same kind of thing
SUPERSEDED = 0.8  # an earlier statement superseded by a later one, for a question about the present
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
        order = sorted(timed, key=lambda c: (times[c.id], c.id))
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
    superseded = supersede(run, dated) if when.prefer == "latest" else []
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
        superseded=superseded,
    )


def happened(record: object) -> datetime | None:
    """When what a record says happened: an episode's `occurred_at`, a fact's `valid_from` (since when
    its value holds); a memory is a curated document with no such time."""
    if isinstance(record, Episode):
        return record.occurred_at
    if isinstance(record, Fact):
        return record.valid_from
    return None


def supersede(run: Run, candidates: list[Candidate]) -> list[dict[str, object]]:
    """The latest value wins, at read time (the seeds' supersession, applied to episodes): among the
    SUPERSEDE_POOL best-scored episodes, a statement followed later by one of the same speaker that
    says the same kind of thing (stored vectors' cosine >= SAME_THING) is superseded by the latest
    such one: it scores ×SUPERSEDED (`scores.superseded`), and the later one takes at least the score
    the earlier had (`scores.newer`: the factor it gained). Returns who superseded whom, for explain."""
    model = run.deps.embedder.model_id
    best = sorted(candidates, key=lambda c: (-c.score, c.id))[:SUPERSEDE_POOL]
    run.with_vectors(best)  # recall loads episodes bare; only "now" questions read these
    pool = [
        c for c in best if isinstance(c.record, Episode) and c.record.vector is not None and c.record.model_id == model
    ]
    if len(pool) < 2:
        return []
    episodes = [c.record for c in pool if isinstance(c.record, Episode)]
    vectors = np.asarray([e.vector for e in episodes], dtype=np.float32)
    times = np.asarray([e.occurred_at.timestamp() for e in episodes])
    speakers = [speaker(e) for e in episodes]
    same = np.asarray([[a == b for b in speakers] for a in speakers])
    similar = vectors @ vectors.T
    later = (times[None, :] > times[:, None]) & same & (similar >= SAME_THING)
    taken: dict[int, float] = {}
    out: list[dict[str, object]] = []
    for i in np.flatnonzero(later.any(axis=1)):
        j = int(np.flatnonzero(later[i])[np.argmax(times[later[i]])])  # the latest that says the same
        older = pool[i]
        out.append({"id": older.id, "by": pool[j].id, "similarity": round(float(similar[i, j]), 6)})
        taken[j] = max(taken.get(j, 0.0), older.score)
        older.scores["superseded"] = SUPERSEDED
        older.score *= SUPERSEDED
    for j, score in taken.items():
        newer = pool[j]
        if score > newer.score > 0:
            newer.scores["newer"] = round(score / newer.score, 6)
            newer.score = score
    return out
