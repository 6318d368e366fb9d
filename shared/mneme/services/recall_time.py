"""What a recall query says about time, read against `occurred_at` rather than the words of a text.

`query_time(query)` gives the query's time window, when it names one ("in 2023", "in May 2024",
"the autumn of 2024", "Christmas 2022", "the first half of September 2024"), and its order
preference: `latest` for a question about the present state of something ("now", "currently", "at
the moment", "these days", "the latest"), `earliest` for a question about a first time ("first",
"originally"). The recall pipeline's `time` stage turns these into score factors (a soft window and
a recency / earliness prior), so an old value never hides the new one and nothing is filtered out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")  # fmt: skip
_MONTH = "|".join(MONTHS)
_YEAR = r"(?P<y>(?:19|20)\d\d)"
SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12), "winter": (12, 15)}
LATEST = re.compile(
    r"\b(now|nowadays|currently|current|these days|at the moment|at present|presently|today|latest|"
    r"most recent(?:ly)?|still|any more|anymore|so far|by now)\b"
)
EARLIEST = re.compile(r"\b(first|earliest|originally|initially|at first|to begin with|in the beginning)\b")
_WINDOWS = [  # most specific first; each gives (start month offset, end month offset) within a year
    re.compile(rf"\b(?P<half>first|second) half of (?P<mon>{_MONTH}),? {_YEAR}\b"),
    re.compile(rf"\b(?P<part>early|mid|late)[- ](?P<mon>{_MONTH}),? {_YEAR}\b"),
    re.compile(rf"\b(?P<mon>{_MONTH}),? (?:of )?{_YEAR}\b"),
    re.compile(r"\b(?P<y2>(?:19|20)\d\d)-(?P<m2>0[1-9]|1[0-2])\b"),
    re.compile(rf"\b(?P<season>{'|'.join(SEASONS)}) (?:of )?{_YEAR}\b"),
    re.compile(rf"\b(?:christmas|xmas|new year'?s? eve) (?:of )?{_YEAR}\b"),
    re.compile(rf"\b(?P<part>early|mid|late)[- ]{_YEAR}\b"),
    re.compile(rf"\b{_YEAR}\b"),
]


@dataclass(frozen=True)
class QueryTime:
    since: datetime | None = None  # the window, half-open: since <= occurred_at < until
    until: datetime | None = None
    prefer: str | None = None  # latest | earliest
    said: str | None = None  # the words the window was read from

    def __bool__(self) -> bool:
        return self.since is not None or self.prefer is not None


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


def query_time(query: str) -> QueryTime:
    text = " ".join(query.lower().replace("’", "'").split())
    since = until = said = None
    for pattern in _WINDOWS:
        m = pattern.search(text)
        if m:
            since, until = _window(m)
            said = m[0]
            break
    rest = text.replace(said, " ") if said else text  # 'the first half of May 2024' is a window, not an order
    prefer = "latest" if LATEST.search(rest) else "earliest" if EARLIEST.search(rest) else None
    return QueryTime(since, until, prefer, said)
