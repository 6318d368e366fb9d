"""Knowledge updates: does recall put what is true now first, and keep what was true before?

Every case in bench/updates/<part>/*.txt is one small conversation in its own scope: a statement, a few
filler turns, weeks later (another session) the change in other words, sometimes more, then a question.
The cases go into `mneme serve` (started here on a temporary home, over loopback) in two shapes, the
way exported chat logs arrive with one time per session:

    messages       each session one `remember` with `messages`, a `session_id` and the session's time
                   (`User:` / `Assistant:` turns as the roles user / assistant, others by `name`, an
                   agent note as the role assistant)
    session-time   every turn its own `remember` at its session's time and `session_id`, the speaker in
                   `metadata.speaker` as the messages shape stores it (an agent note with none)

The kinds of question: `current` asks, in the present tense and without saying "now", about something
that changed; `past` asks for the value before a change ("before York", "originally"); `other-person`
asks about someone whose value stayed while another person in the scope changed theirs; `unchanged`
asks about something a later turn restates, or only considers changing (a rumour, a trial, a quote).

Each question is recalled in its case's scope (default scoring, `limit` 5) and the answer scored by
normalised substring match (case, accents, quotes and spacing folded; a value must start and end on a
word boundary) on each result's `content` and on the pack's first block (`context`):

    top     the top result states a right value (`current` / `other-person` / `unchanged`: the value
            true now; `past`: the old value the question asks for)
    pack    the pack's first block states a right value
    stale   the top result states a wrong value and no right one (the earlier value, for `past` the newer)
    reach   some result states a right value

A text that names both values ("from Leeds to York") states the right one; so does the first statement
of a change that was later undone (`reverted`): substring scoring cannot tell those apart.

reported per part, shape and kind of question. The headline figures are the ones issue 41 sets goals
for: current first (`top` and `pack`, over the `current`, `other-person` and `unchanged` cases), stale
first (the same cases), past answered (`top`, over the `past` cases). `--consolidate` asks again after
one `POST /v1/consolidate` over each part and shape's scopes (waited for), side by side. `--misses`
prints each failing case with its top 3 results. `stale facts` counts the facts a run wrote that recall shows (each
once, over the `current` and `unchanged` cases) stating an earlier or only considered value and no current one
without being marked earlier (`since_changed`) or stale: facts not true as written. Not over `other-person` cases,
whose wrong values are the other person's, true of them ("Joaquín lives in Valencia" when Marta is asked about).

    .venv/bin/python bench/updates.py [--part dev|check|dev2|check2|dev3|check3|check4|…|check23|all]
        [--shape messages|session-time|all] [--consolidate] [--misses] [--case REGEX] [--json FILE]

`dev/` is for tuning; `check/` was written after it with other wording, topics and people, and is never
tuned on; `dev2/` was written on 5 Dec 2026 by someone who had not read the rules, to tune on;
`check2/` was written on 5 Dec 2026 by someone who had not read the rules either, and is never tuned on:
the untouched measure, whatever the other parts have been tuned on.
`dev3/` was written on 5 Dec 2026 without reading the rules, to tune on: changes implied by an event,
partial, reverted and successive changes, questions about the value before a change, two people in a
scope, long gaps and asides (its case names start `d3-`).
`check3/` was written on 5 Dec 2026 blind: without reading the recall, language or consolidation code or
the other parts' cases, and without scoring it while it was written; it is never tuned on (its case names
start `c3-`): changes said in other words than the first statement, implied by an event, in passing, as
an answer or after unrelated sessions, long days, three or four sessions, assistants and agent notes,
and `unchanged`, `other-person` and `past` cases so that the latest statement alone cannot pass.
`check2/` and `check3/` were tuned on from 5 Dec 2026 (afternoon): their misses were read.
`check4/` was written on 5 Dec 2026 blind, as `check3/` was (names start `c4-`): changes said in other
words, implied, in passing, as an answer, by an assistant's recap or an agent note; successive and reverted
changes, long days, three or four sessions, two people; the untouched measure until its misses were read on
5 Dec 2026 (evening).
`check5/` was written on 5 Dec 2026 (evening) blind, as `check4/` was (names start `c5-`), with more changes said
in other words and implied, answers, rumours and two people in a scope; the untouched measure until its misses
were read on 5 Dec 2026 (night).
`check6/` was written on 5 Dec 2026 (night) blind, as `check5/` was (names start `c6-`), most of its values said in
passing, a third of its changes implied, answers, assistants' recaps and agent notes; the untouched measure until
its misses were read the same night.
`check7/` was written on 5 Dec 2026 (night) blind (names start `c7-`): most cases a chat between a user and an
assistant, asked about the user in the third person, facts said in passing inside requests; the untouched measure
until its misses were read on 5 Dec 2026 (late night).
`check8/` was written on 5 Dec 2026 (late night) blind, as `check7/` was (names start `c8-`): 40 of 56 cases a
chat between a user and an assistant, 12 between named people, 4 with agent notes; changes in other words, implied,
in passing, as answers, successive, reverted and partial; the untouched measure until its misses were read on 6 Dec
2026.
`check9/` was written the same night blind (names start `c9-`): 30 of 56 a user and an assistant, 18 named people
(often each with their own value of the same thing), 8 with agent notes; mostly three to five sessions; never
read or tuned on: a second untouched measure, for when check8's misses are read; its misses were read on 6 Dec
2026 (morning).
`check10/` was written on 6 Dec 2026 blind (names start `c10-`), when check8's misses were read: 25 of 56 a user and
an assistant, 21 named people, 10 with agent notes; three to five sessions, filler sessions, echoes of the old value
after the change ("still doing the Tuesday runs?") and the old value named again as history; never read or tuned on.
`check11/` was written on 6 Dec 2026 (morning) blind (names start `c11-`), when check9's misses were read: 22 of 56 a
user and an assistant, 22 named people, 12 with agent notes; changes in other words, implied, in passing, as answers,
recaps and agent notes, successive, partial, reverted, considered and called off; echoes and the old value as
history; never read or tuned on.
`check12/` was written the same morning blind, to the same brief as `check11/` (names start `c12-`), to be read and
tuned on while `check11/` stays untouched.
`check13/` was written on 6 Dec 2026, after check12, blind, to check11's brief (names start `c13-`), when check10's
misses were read: 22 of 56 a user and an assistant, 22 named people, 12 with agent notes; a request, advice or filler
that shares the question's words more than the turn stating the answer; its misses were read on 6 Dec 2026
(evening), after check16 was written.
`check14/` was written on 6 Dec 2026 (midday) blind, to check11's brief (names start `c14-`), when check11's misses
were read: 22 of 56 a user and an assistant, 22 named people, 12 with agent notes; filler that shares the question's
words, the old value as history and echoed after the change; its misses were read on 6 Dec 2026 (evening).
`check15/` was written on 6 Dec 2026 (afternoon) blind (names start `c15-`), before check13's or check14's misses
were read: most changes said in other words, 23 cases with two named people, 12 with agent notes, filler that
shares the question's words, echoes and the old value as history; its misses were read on 6 Dec 2026 (evening).
`check16/` was written on 6 Dec 2026 (evening) blind (names start `c16-`), before check13–15's misses were read: 60
cases, most changes said in other words, 13 implied, 21 with two named people, 11 with agent notes, echoes,
successive, reverted and partial changes, filler that shares the question's words; the untouched measure until
its misses were read on 6 Dec 2026 (night).
`check17/` was written on 6 Dec 2026 (night) blind (names start `c17-`), before check16's misses were read: 58 cases,
36 a chat between a user and an assistant, 18 with two named people, 9 with agent notes, 9 long days, most changes
said in other words, echoes of the old value, filler; the untouched measure until its misses were read on 7 Dec 2026.
`check18/` was written on 7 Dec 2026 blind (names start `c18-`), when check17's misses were read: 57 cases, 33 a chat
between a user and an assistant, 24 with two named people, 13 with agent notes, 12 answers, 11 long days, changes in
other words, implied and in passing, echoes, filler; the untouched measure until check19 was written (7 Dec 2026,
morning): its misses may be read from then on.
`check19/` was written on 7 Dec 2026 (morning) blind (names start `c19-`), before check18's misses were read: 56
cases, 35 a chat between a user and an assistant, 21 with two named people, 9 with agent notes, 10 answers, changes
in other words, implied and in passing, successive, reverted and partial changes, echoes, filler; the untouched
measure until check20 was written (7 Dec 2026, second session).
`check20/` was written on 7 Dec 2026 (second session) blind (names start `c20-`), before anything of this session was
measured: 54 cases, 48 a chat between a user and an assistant, 6 with two named people, 8 with agent notes, 16 of
three or four sessions, 6 long days, changes in other words, implied and in passing, successive, reverted and partial
changes, considered changes and rumours, echoes; the untouched measure until check21 was written.
`check21/` was written on 7 Dec 2026 (fourth session) blind (names start `c21-`), before anything of that session was
measured: 56 cases, 38 a chat between a user and an assistant, 18 with two named people, 9 with agent notes, 47 of
three sessions, 6 long days, changes in other words, implied and in passing, answers, successive, reverted and partial
changes, echoes, filler that shares the question's words; the untouched measure until check22 was written (7 Dec
2026, fifth session): its misses may be read from then on.
`check22/` was written on 7 Dec 2026 (fifth session) blind (names start `c22-`), before anything of that session was
measured: 56 cases, 39 a chat between a user and an assistant, 17 with two named people, 10 with agent notes, 48 of
three sessions, 6 long days, changes in other words, implied, in passing, as answers and in assistants' recaps,
successive, reverted and partial changes, considered and called-off changes, echoes, filler that shares the
question's words; the untouched measure until check23 was written (8 Dec 2026): its misses may be read from then on.
`check23/` was written on 8 Dec 2026 blind (names start `c23-`), before anything of that session was measured: 56
cases, 39 a chat between a user and an assistant, 17 with two named people, 10 with agent notes, 48 of three sessions
and 5 of four, 7 long days, changes in other words, implied, in passing, as answers and in assistants' recaps,
successive, reverted and partial changes, considered and called-off changes and rumours, echoes, filler that shares
the question's words; never read or tuned on: the untouched measure.
MNEME_BENCH_CODE=DIR serves the `shared` folder DIR instead of this checkout's.

Case file format (several cases a file; blank lines and other '#' lines are comments):

    # case <name>                          starts a case: [a-z0-9-], unique in its part
    # kind: current|past|other-person|unchanged
    # tags: <shape and topic tags, comma-separated>        (free text: outright, implied, reverted…)
    ## 2025-01-14 19:40                    a session (date, optional time; noon if none)
    Maya: I live in Leeds.                 a turn: speaker, colon, text
    * Billing migration: Priya, due 14 March.   an agent note, no speaker
    ? Where does Maya live?                the question (one a case)
    + York                                 right values: any one counts ('|' between variants)
    - Leeds                                stale (wrong) values; optional only for `unchanged`
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _common as c
import httpx
from conversations import Server, consolidate, written

SET = c.ROOT / "bench" / "updates"
PARTS = (
    "dev",
    "check",
    "dev2",
    "check2",
    "dev3",
    "check3",
    "check4",
    "check5",
    "check6",
    "check7",
    "check8",
    "check9",
    "check10",
    "check11",
    "check12",
    "check13",
    "check14",
    "check15",
    "check16",
    "check17",
    "check18",
    "check19",
    "check20",
    "check21",
    "check22",
    "check23",
)
SHAPES = ("messages", "session-time")
KINDS = ("current", "past", "other-person", "unchanged")
NOW_KINDS = ("current", "other-person", "unchanged")  # asked about the present: current first, stale first
LIMIT = 5
MAX_RUN_SCOPES = 200  # the scopes one consolidation run takes on (MAX_TARGETS_PER_RUN)
CASE = re.compile(r"^#\s*case\s+([a-z0-9][a-z0-9-]{0,40})\s*$")
FIELD = re.compile(r"^#\s*(kind|tags)\s*:\s*(.*?)\s*$")
SESSION = re.compile(r"^##\s*(\d{4}-\d{2}-\d{2})(?:[ T](\d{1,2}:\d{2}))?\s*$")
ROLES = ("user", "assistant")  # speakers sent as a role in the messages shape
# the pack's first item: a body (### header, optional requires line, fenced text) or a card ("- id [tags] summary")
BLOCK = re.compile(
    r"^(?:### \S+ \[[^\n]*\]\n(?:requires: [^\n]*\n)?(`{3,})\n(.*?)\n\1$|- \S+ \[[^\]\n]*\] ([^\n]*))", re.M | re.S
)


@dataclass
class Turn:
    speaker: str | None  # None: an agent note
    text: str


@dataclass
class Session:
    at: datetime
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Case:
    name: str
    part: str
    source: str
    kind: str = ""
    tags: list[str] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    question: str = ""
    right: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    def scope(self, shape: str) -> str:
        return f"root.upd-{self.part}-{shape}.{self.name}"

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


# -- the set ---------------------------------------------------------------------------------------
def parse(path: Path, part: str) -> list[Case]:
    """The cases of one file, each checked (see `check`)."""
    cases: list[Case] = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line, where = raw.strip(), f"{path.name}:{n}"
        if not line:
            continue
        if started := CASE.match(line):
            cases.append(Case(started[1], part, path.name))
            continue
        field_match = FIELD.match(line)
        if line.startswith("#") and not line.startswith("##") and not field_match:
            continue  # a comment
        if not cases:
            raise SystemExit(f"{where}: text before the first '# case'")
        _line(cases[-1], line, where, field_match)
    for case in cases:
        check(case)
    return cases


def _line(case: Case, line: str, where: str, field_match: re.Match[str] | None) -> None:
    """One line of a case: a field, a session, the question, values, a note or a turn."""
    if field_match:
        if field_match[1] == "kind":
            case.kind = field_match[2]
        else:
            case.tags = [t.strip() for t in field_match[2].split(",") if t.strip()]
    elif line.startswith("##"):
        if not (m := SESSION.match(line)):
            raise SystemExit(f"{where}: bad session line {line!r}")
        case.sessions.append(Session(datetime.fromisoformat(f"{m[1]}T{m[2] or '12:00'}").replace(tzinfo=UTC)))
    elif line[0] in "?+-":
        text = line[1:].strip()
        if line[0] == "?":
            if case.question:
                raise SystemExit(f"{where}: a second question in case {case.name}")
            case.question = text
        else:
            values = [v.strip() for v in text.split("|") if v.strip()]
            (case.right if line[0] == "+" else case.stale).extend(values)
    elif not case.sessions:
        raise SystemExit(f"{where}: a turn before the first session of case {case.name}")
    elif line.startswith("*"):
        case.sessions[-1].turns.append(Turn(None, line[1:].strip()))
    else:
        speaker, sep, text = line.partition(":")
        if not sep or not text.strip() or not speaker.strip() or len(speaker) > 40:
            raise SystemExit(f"{where}: a turn is 'Speaker: text' (or '* note'), got {line!r}")
        case.sessions[-1].turns.append(Turn(speaker.strip(), text.strip()))


def check(case: Case) -> None:
    """A case is whole and its values can be scored: a kind, two sessions or more in time order, each
    with turns, a question, right values one of which some turn states, and stale values (optional for
    `unchanged`) one of which some turn states."""
    where = f"{case.source}: case {case.name}"
    if case.kind not in KINDS:
        raise SystemExit(f"{where}: kind {case.kind!r} is not one of {', '.join(KINDS)}")
    times = [s.at for s in case.sessions]
    if len(times) < 2 or times != sorted(times) or len(set(times)) != len(times):
        raise SystemExit(f"{where}: two sessions or more, in time order")
    if not all(s.turns for s in case.sessions):
        raise SystemExit(f"{where}: a session without turns")
    if not case.question or not case.right:
        raise SystemExit(f"{where}: a question ('?') and right values ('+') are needed")
    if not case.stale and case.kind != "unchanged":
        raise SystemExit(f"{where}: stale values ('-') are needed")
    texts = [t.text for t in case.turns]
    for name, values in (("right", case.right), ("stale", case.stale)):
        if values and not any(states(text, values) for text in texts):
            raise SystemExit(f"{where}: no turn states any of its {name} values {values}")


def load(parts: list[str], folder: Path = SET) -> list[Case]:
    cases = [case for part in parts for path in sorted((folder / part).glob("*.txt")) for case in parse(path, part)]
    seen: set[tuple[str, str]] = set()
    for case in cases:
        if (case.part, case.name) in seen:
            raise SystemExit(f"{case.source}: case {case.name} is named twice in {case.part}")
        seen.add((case.part, case.name))
    return cases


# -- scoring ---------------------------------------------------------------------------------------
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


def normal(text: str) -> str:
    """Lower case, no accents, straight quotes and dashes, single spaces."""
    folded = unicodedata.normalize("NFKD", text.translate(QUOTES))
    return " ".join("".join(ch for ch in folded if not unicodedata.combining(ch)).lower().split())


def states(text: str, values: list[str]) -> bool:
    """Whether `text` states one of `values`: a normalised substring starting and ending on a word
    boundary ("York" is not in "Yorkshire", "£950" is in "rent £950 a month")."""
    plain = normal(text)
    return any(re.search(rf"(?<!\w){re.escape(normal(v))}(?!\w)", plain) for v in values)


def first_block(context: str) -> str:
    """The text of the context pack's first item: the first body's fenced text, or the first card's
    summary ('' if the pack shows nothing)."""
    m = BLOCK.search(context)
    return "" if m is None else (m[2] if m[2] is not None else m[3])


@dataclass
class Row:
    case: Case
    shape: str
    top: bool
    pack: bool
    stale: bool
    reach: bool
    results: list[dict[str, Any]]
    block: str


def score(case: Case, shape: str, answer: dict[str, Any]) -> Row:
    results = answer["results"]
    texts = [r["content"] for r in results]
    block = first_block(answer["context"])
    top = bool(texts) and states(texts[0], case.right)
    stale = bool(texts) and not top and states(texts[0], case.stale)
    reach = any(states(t, case.right) for t in texts)
    return Row(case, shape, top, states(block, case.right), stale, reach, results, block)


# -- the run ---------------------------------------------------------------------------------------
def remember(api: httpx.Client, case: Case, shape: str) -> int:
    """The case's sessions through `remember` in `shape`; the number of calls."""
    calls = 0
    for n, session in enumerate(case.sessions, 1):
        common = {
            "scope": case.scope(shape),
            "session_id": f"{case.part}-{case.name}-s{n}",
            "occurred_at": session.at.isoformat().replace("+00:00", "Z"),
            "create_scope": True,
        }
        if shape == "messages":
            bodies = [{**common, "messages": [message(t) for t in session.turns]}]
        else:
            bodies = [
                {**common, "content": t.text, **({"metadata": {"speaker": speaker(t)}} if t.speaker else {})}
                for t in session.turns
            ]
        for body in bodies:
            reply = api.post("/v1/remember", json=body)
            if reply.status_code != 201:
                raise SystemExit(f"remember failed ({case.name}): {reply.status_code} {reply.text[:300]}")
            calls += 1
    return calls


def speaker(turn: Turn) -> str:
    """`metadata.speaker` as the messages shape stores it: a role in lower case, a name as written."""
    name = turn.speaker or "assistant"
    return name.lower() if name.lower() in ROLES else name


def message(turn: Turn) -> dict[str, str]:
    """A turn as a chat message: `User:` / `Assistant:` (and an agent note) by role, others by name."""
    name = speaker(turn)
    return {"role": name, "content": turn.text} if name in ROLES else {"name": name, "content": turn.text}


def ask(api: httpx.Client, cases: list[Case], shape: str) -> list[Row]:
    rows = []
    for case in cases:
        reply = api.post("/v1/recall", json={"query": case.question, "scope": case.scope(shape), "limit": LIMIT})
        if reply.status_code != 200:
            raise SystemExit(f"recall failed ({case.name}): {reply.status_code} {reply.text[:300]}")
        rows.append(score(case, shape, reply.json()))
    return rows


def consolidate_all(api: httpx.Client, cases: list[Case], shapes: list[str]) -> list[dict[str, Any]]:
    """One run over each part and shape's scopes (the subtree root.upd-<part>-<shape>), waited for."""
    runs = []
    for part in dict.fromkeys(case.part for case in cases):
        mine = [case for case in cases if case.part == part]
        if len(mine) > MAX_RUN_SCOPES:
            raise SystemExit(f"{part}: {len(mine)} cases, more than one run takes on ({MAX_RUN_SCOPES})")
        for shape in shapes:
            runs.append(consolidate(api, [mine[0].scope(shape).rpartition(".")[0]]))
    return runs


# -- the report ------------------------------------------------------------------------------------
COLUMNS = ("top", "pack", "stale", "reach")


def counts(rows: list[Row]) -> list[str]:
    return [str(sum(getattr(r, col) for r in rows)) for col in COLUMNS]


def headline(rows: list[Row]) -> dict[str, tuple[int, int]]:
    now = [r for r in rows if r.case.kind in NOW_KINDS]
    past = [r for r in rows if r.case.kind == "past"]
    return {
        "current first": (sum(r.top and r.pack for r in now), len(now)),
        "stale first": (sum(r.stale for r in now), len(now)),
        "past answered": (sum(r.top for r in past), len(past)),
        "reachable": (sum(r.reach for r in rows), len(rows)),
        "stale facts": stale_facts(rows),
    }


def stale_facts(rows: list[Row]) -> tuple[int, int]:
    """Of the facts shown (each once) for a `current` or `unchanged` case, those that state an earlier or only
    considered value and no current one unmarked: neither `since_changed` nor `stale`, so an agent reads them as
    true now."""
    shown: dict[str, bool] = {}
    for row in rows:
        for result in row.results if row.case.kind in ("current", "unchanged") else []:
            if result["kind"] == "fact" and result["id"] not in shown:
                marked = bool(result.get("since_changed") or (result.get("fact") or {}).get("stale"))
                text = result["content"]
                shown[result["id"]] = not marked and states(text, row.case.stale) and not states(text, row.case.right)
    return sum(shown.values()), len(shown)


def ratio(pair: tuple[int, int]) -> str:
    k, n = pair
    return f"{k}/{n} {k / n:.2f}" if n else "-"


GOALS = {"current first": "goal >= 0.90", "stale first": "goal <= 0.05", "past answered": "goal >= 0.90"}


def report(phases: list[tuple[str, list[Row]]]) -> str:
    """Per part and shape: a table per kind (each phase side by side) and the headline figures."""
    first = phases[0][1]
    out = []
    for part, shape in dict.fromkeys((r.case.part, r.shape) for r in first):
        group = [[r for r in rows if (r.case.part, r.shape) == (part, shape)] for _, rows in phases]
        turns = sum(len(r.case.turns) for r in group[0])
        out.append(f"\n{part} / {shape}: {len(group[0])} cases, {turns} turns ({' | '.join(p for p, _ in phases)})")
        body = []
        for kind in [*KINDS, "all"]:
            picked = [[r for r in rows if kind in ("all", r.case.kind)] for rows in group]
            if picked[0]:
                body.append([kind, len(picked[0]), *(cell for rows in picked for cell in [*counts(rows), "|"])][:-1])
        headers = ["kind", "n", *([*COLUMNS, "|"] * len(phases))][:-1]
        out.append(c.table(headers, body))
        heads = [headline(rows) for rows in group]
        for name in heads[0]:
            figures = " -> ".join(ratio(h[name]) for h in heads)
            out.append(f"  {name:<14} {figures}" + (f"   ({GOALS[name]})" if name in GOALS else ""))
    return "\n".join(out)


def failed(row: Row) -> bool:
    past = row.case.kind == "past"
    return not row.reach or row.stale or not row.top or (not past and not row.pack)


def show_misses(phase: str, rows: list[Row]) -> None:
    misses = [r for r in rows if failed(r)]
    print(f"\nmisses {phase}: {len(misses)} of {len(rows)}")
    for r in misses:
        marks = [f"no {col}" for col in ("top", "pack", "reach") if not getattr(r, col)] + ["stale"] * r.stale
        print(f"- {r.case.part}/{r.case.name} [{r.case.kind}, {r.shape}] {r.case.question!r}: {', '.join(marks)}")
        print(f"    right {r.case.right}  stale {r.case.stale}")
        for n, result in enumerate(r.results[:3], 1):
            text = " ".join(result["content"].split())
            print(f"    {n}. {result['kind']} {result.get('score', 0):.3f} {text[:110]!r}")
        if not r.results:
            print("    (no results)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--consolidate", action="store_true", help="recall, consolidate once, recall again")
    parser.add_argument("--misses", action="store_true", help="print each failing case with its top 3")
    parser.add_argument("--case", help="only the cases whose name matches this regular expression")
    parser.add_argument("--json", type=Path, help="write the per-case rows here")
    args = parser.parse_args()
    parts = list(PARTS) if args.part == "all" else [args.part]
    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    cases = [case for case in load(parts) if not args.case or re.search(args.case, case.name)]
    if not cases:
        raise SystemExit("no cases")
    print(f"cases: {', '.join(f'{p} {sum(x.part == p for x in cases)}' for p in parts)}; shapes: {', '.join(shapes)}")
    print(f"recall limit {LIMIT}, default scoring; {c.machine()}")

    phases = measure(cases, shapes, args.consolidate)
    print(report(phases))
    if args.misses:
        for phase, rows in phases:
            show_misses(phase, rows)
    if args.json:
        args.json.write_text(json.dumps([_dump(phase, r) for phase, rows in phases for r in rows], indent=1))


def measure(cases: list[Case], shapes: list[str], consolidating: bool) -> list[tuple[str, list[Row]]]:
    """On a fresh `mneme serve`: remember every case in every shape, ask; with `consolidating`, one run
    over each part and shape, then ask again. The rows of each phase."""
    home = Path(tempfile.mkdtemp(prefix="mneme-updates-"))
    server = Server(home)
    try:
        api = server.client("bench-updates")
        start = time.perf_counter()
        calls = sum(remember(api, case, shape) for shape in shapes for case in cases)
        print(f"remembered {len(cases) * len(shapes)} cases in {calls} calls in {time.perf_counter() - start:.1f} s")
        api.post("/v1/recall", json={"query": "warm up", "scope": cases[0].scope(shapes[0])})
        phases = [("before", [row for shape in shapes for row in ask(api, cases, shape)])]
        if consolidating:
            start = time.perf_counter()
            runs = consolidate_all(api, cases, shapes)
            took = time.perf_counter() - start
            errors = sum(len(stage.get("errors", [])) for run in runs for stage in run["stages"].values())
            tiers = [fact.get("tier", "raw") for fact in written(home)]
            facts, rollups = tiers.count("raw"), len(tiers) - tiers.count("raw")
            statuses = ", ".join(sorted({run["status"] for run in runs}))
            scopes = sum(len(run["scopes"]) for run in runs)
            print(f"consolidated: {len(runs)} run{'s' * (len(runs) > 1)} ({statuses}) over {scopes} scopes in "
                  f"{took:.1f} s; errors {errors}; {facts} facts, {rollups} roll-ups written")  # fmt: skip
            phases.append(("after one consolidation run", [row for shape in shapes for row in ask(api, cases, shape)]))
        return phases
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def _dump(phase: str, row: Row) -> dict[str, Any]:
    keep = ("id", "kind", "score", "content", "since_changed", "fact")
    return {
        "phase": phase, "part": row.case.part, "case": row.case.name, "kind": row.case.kind, "shape": row.shape,
        **{col: getattr(row, col) for col in COLUMNS}, "block": row.block,
        "results": [{k: r.get(k) for k in keep} for r in row.results],
    }  # fmt: skip


if __name__ == "__main__":
    main()
