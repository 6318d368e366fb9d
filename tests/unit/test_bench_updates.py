"""bench/updates.py: the case format is read as documented, every case of the set parses and can be scored,
and the scores mean what they say."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.bench import load_bench

SAMPLE = """\
# A comment about the file.
# case maya-moves
# kind: current
# tags: outright, home
## 2025-01-10 19:40
Maya: I live in Leeds, near the station.
Tom: Nice: which street?
## 2025-03-02
* Maya's note: moved to York.
Maya: Big news, I'm a York resident now.
? Where does Maya live?
+ York | Yorke
- Leeds

# case notes-only
# kind: unchanged
## 2025-02-01 09:00
* Shop hours: 9 to 5.
## 2025-04-01 09:00
* Thought about Sundays; hours stay 9 to 5.
? What are the shop hours?
+ 9 to 5
"""


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("updates.py", "bench_updates")


def test_a_case_file_gives_sessions_turns_notes_and_values(bench: ModuleType, tmp_path: Path) -> None:
    # Given a file of two cases
    path = tmp_path / "01-sample.txt"
    path.write_text(SAMPLE)
    # When it is parsed
    first, second = bench.parse(path, "dev")
    # Then each case has its fields, sessions at their times (noon without one), turns and notes in order
    assert (first.name, first.kind, first.tags, first.part) == ("maya-moves", "current", ["outright", "home"], "dev")
    assert [s.at.isoformat() for s in first.sessions] == ["2025-01-10T19:40:00+00:00", "2025-03-02T12:00:00+00:00"]
    assert [(t.speaker, t.text) for t in first.turns] == [
        ("Maya", "I live in Leeds, near the station."),
        ("Tom", "Nice: which street?"),  # a colon inside the text stays
        (None, "Maya's note: moved to York."),  # a note, whatever colons it holds
        ("Maya", "Big news, I'm a York resident now."),
    ]
    assert (first.question, first.right, first.stale) == ("Where does Maya live?", ["York", "Yorke"], ["Leeds"])
    assert first.scope("messages") == "root.upd-dev-messages.maya-moves"
    assert (second.kind, second.right, second.stale) == ("unchanged", ["9 to 5"], [])


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (("# kind: current", "# kind: latest"), "kind 'latest'"),
        (("- Leeds\n", ""), "stale values ('-') are needed"),
        (("+ York | Yorke", "+ Scarborough"), "no turn states any of its right values"),
        (("- Leeds", "- Harrogate"), "no turn states any of its stale values"),
        (("## 2025-03-02", "## 2024-03-02"), "in time order"),
        (("? Where does Maya live?", "? Where does Maya live?\n? And Tom?"), "a second question"),
        (("Tom: Nice: which street?", "Tom asks which street"), "a turn is 'Speaker: text'"),
        (("## 2025-03-02\n", "## 2 March\n"), "bad session line"),
    ],
)
def test_a_broken_case_is_refused_with_its_place(
    bench: ModuleType, tmp_path: Path, change: tuple[str, str], error: str
) -> None:
    path = tmp_path / "01-sample.txt"
    path.write_text(SAMPLE.replace(*change, 1))
    with pytest.raises(SystemExit, match=error.replace("(", r"\(").replace(")", r"\)")):
        bench.parse(path, "dev")


def test_states_folds_case_accents_quotes_and_spacing_on_word_boundaries(bench: ModuleType) -> None:
    assert bench.states("Tomás took it over", ["Tomas"])
    assert bench.states("Leo goes to St Mary\u2019s", ["st mary's"])
    assert bench.states("the rent is  £1,020 a month", ["£1,020"])
    assert bench.states("deploys to eu-central-1.", ["eu-central-1"])
    assert not bench.states("a holiday in Yorkshire", ["York"])
    assert not bench.states("Postgres 130", ["Postgres 13"])
    assert not bench.states("anything", [])


CONTEXT = """\
# recall: where does maya live? (scope root.x, loaded 2 / 2 total related)

### 3f2a [episode, root.x, 2025-03-02]
````
Big news: I'm a York resident now.
```fence inside```
````
- 9c1b [episode, root.x] I live in Leeds.
fetch: ids=9c1b
"""


def result(text: str, kind: str = "episode") -> dict[str, Any]:
    return {"id": text[:4], "kind": kind, "score": 0.5, "content": text}


def test_the_first_block_is_the_first_body_or_else_the_first_card(bench: ModuleType) -> None:
    assert bench.first_block(CONTEXT) == "Big news: I'm a York resident now.\n```fence inside```"
    cards = "# recall: q (scope root.x, loaded 1 / 1 total related)\n\n- 9c1b [fact, root.x] Maya lives in Leeds.\n"
    assert bench.first_block(cards) == "Maya lives in Leeds."
    assert bench.first_block("# recall: q (scope root.x, loaded 0 / 0 total related)\n") == ""


def test_scores(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "01-sample.txt"
    path.write_text(SAMPLE)
    [case, _] = bench.parse(path, "dev")

    def row(texts: list[str], context: str = CONTEXT) -> Any:
        return bench.score(case, "messages", {"results": [result(t) for t in texts], "context": context})

    current = row(["Big news, I'm a York resident now.", "I live in Leeds."])
    assert (current.top, current.pack, current.stale, current.reach) == (True, True, False, True)
    stale = row(["I live in Leeds.", "Moved to York."], context="- 9c1b [episode, root.x] I live in Leeds.\n")
    assert (stale.top, stale.pack, stale.stale, stale.reach) == (False, False, True, True)
    both = row(["From Leeds to York, finally."])  # states the current value: not stale
    assert (both.top, both.stale) == (True, False)
    neither = row(["Nice: which street?"])
    assert (neither.top, neither.stale, neither.reach) == (False, False, False)
    empty = row([], context="")
    assert (empty.top, empty.pack, empty.stale, empty.reach) == (False, False, False, False)
    assert not bench.failed(current) and bench.failed(stale) and bench.failed(neither)


def test_stale_facts_are_the_facts_shown_that_state_an_earlier_value_unmarked(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "01-sample.txt"
    path.write_text(SAMPLE)
    [case, _] = bench.parse(path, "dev")
    old, new, marked = (result(t, "fact") for t in ("Leeds is Maya's home.", "York is Maya's home.", "Once Leeds."))
    marked["since_changed"] = {"by": "3f2a"}  # marked earlier: read as history
    rows = [
        bench.score(case, "messages", {"results": [old, new, marked], "context": ""}),
        bench.score(case, "messages", {"results": [old, result("I live in Leeds.")], "context": ""}),  # once
    ]
    assert bench.stale_facts(rows) == (1, 3)
    other = dataclasses.replace(case, kind="other-person")  # its wrong value is the other person's: true of them
    theirs = result("Jon's home is Leeds.", "fact")
    assert bench.stale_facts([*rows, bench.score(other, "messages", {"results": [theirs], "context": ""})]) == (1, 3)


def test_the_set_parses_and_covers_every_kind_and_shape_in_each_part(bench: ModuleType) -> None:
    for part, least in (("dev", 60), ("check", 40), ("check2", 60), ("dev3", 70), ("check3", 48)):
        cases = bench.load([part])
        assert len(cases) >= least, part
        kinds = Counter(case.kind for case in cases)
        assert all(kinds[kind] >= 5 for kind in bench.KINDS), (part, kinds)
        for shape in ("implied", "partial", "reverted", "several updates", "echo", "two people", "considered"):
            assert sum(any(shape in tag for tag in case.tags) for case in cases) >= 3, (part, shape)
        assert sum(any(t.speaker is None for t in case.turns) for case in cases) >= 5, part  # agent notes
        assert all(len(case.sessions) >= 2 for case in cases)
    dev, check = ({case.name for case in bench.load([part])} for part in ("dev", "check"))
    assert not dev & check  # written apart: no case shared
    check2 = {case.name for case in bench.load(["check2"])}
    assert not check2 & {case.name for part in bench.PARTS if part != "check2" for case in bench.load([part])}


@pytest.mark.parametrize(
    ("part", "shapes"),
    [
        ("check3", ("outright", "in passing", "answer to a question", "after unrelated chat", "long day", "assistant")),
        (
            "check4",
            ("other words", "implied", "in passing", "answer to a question", "long day", "successive", "reverted"),
        ),
        ("check5", ("other-words", "implied", "answer", "rumour", "two-people", "considered", "partial", "long-day")),
        ("check6", ("other-words", "implied", "in-passing", "answer", "agent-note", "successive", "reverted")),
        ("check7", ("other-words", "implied", "in-passing", "user-only", "successive", "reverted", "partial")),
        ("check8", ("other-words", "implied", "in-passing", "user-assistant", "successive", "reverted", "partial")),
        ("check9", ("other-words", "implied", "in-passing", "user-assistant", "successive", "reverted", "partial")),
        ("check10", ("other-words", "implied", "in-passing", "user-assistant", "successive", "reverted", "echo")),
        ("check11", ("other-words", "implied", "in-passing", "agent-note", "successive", "reverted", "partial")),
        ("check12", ("other-words", "implied", "in-passing", "answer", "successive", "reverted", "considered")),
        ("check13", ("other-words", "implied", "in-passing", "agent-note", "successive", "reverted", "partial")),
        ("check14", ("outright", "implied", "in-passing", "agent-note", "successive", "reverted", "echo")),
        ("check15", ("other-words", "implied", "in-passing", "agent-note", "two-people", "long-day", "echo")),
        ("check16", ("other-words", "implied", "agent-note", "two-people", "long-day", "echo", "reverted")),
        ("check17", ("other-words", "implied", "in-passing", "user-assistant", "two-people", "long-day", "echo")),
        ("check18", ("other-words", "implied", "in-passing", "agent-note", "two-people", "answer", "echo")),
        ("check19", ("other-words", "implied", "in-passing", "agent-note", "two-people", "answer", "reverted")),
        ("check20", ("other-words", "implied", "in-passing", "agent-note", "two-people", "answer", "successive")),
        ("check21", ("other-words", "implied", "in-passing", "two-people", "answer", "reverted", "echo", "filler")),
        ("check22", ("other-words", "implied", "in-passing", "two-people", "answer", "reverted", "echo", "filler")),
        ("check23", ("other-words", "implied", "in-passing", "two-people", "answer", "reverted", "echo", "filler")),
    ],
)
def test_a_part_written_blind_is_apart_and_covers_its_brief(bench: ModuleType, part: str, shapes: tuple[str]) -> None:
    cases = bench.load([part])
    assert 48 <= len(cases) <= 60
    assert all(case.name.startswith(f"c{part.removeprefix('check')}-") for case in cases)
    kinds = Counter(case.kind for case in cases)
    assert kinds["current"] >= 32 and kinds["unchanged"] >= 6, kinds
    assert kinds["other-person"] >= 5 and kinds["past"] >= 5, kinds
    for shape in shapes:
        assert sum(shape in case.tags for case in cases) >= 2, shape
    assert sum(len(case.sessions) >= 3 for case in cases) >= 5  # three or four sessions
    assert sum(max(len(s.turns) for s in case.sessions) >= 8 for case in cases) >= 3  # long days
    assert sum(any(t.speaker == "Assistant" for t in case.turns) for case in cases) >= 5
    for case in cases:  # a question about the present that does not give the answer away by saying "now"
        words = set(bench.normal(case.question).strip("?").split())
        assert not words & {"now", "currently"} and "these days" not in bench.normal(case.question), case.name
    names = {case.name for case in cases}
    assert not names & {case.name for other in bench.PARTS if other != part for case in bench.load([other])}
