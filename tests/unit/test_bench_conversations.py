"""bench/conversations.py: the set format is read as documented, and the scores mean what they say."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.bench import BENCH, load_bench

SAMPLE = """\
# conversation Maya and Tom
# speakers: Maya, Tom
# a comment
## 2024-03-02 19:40
Maya: I moved to Berlin last month. [q1 q2]
Tom: Which part?
Maya: Kreuzberg, near the canal. [q2]
## 2024-05-10
Tom: Greta says: keep practising [q3]
? q1 single | Where did Maya move?
? q2 multi | Where in which city does Maya live?
? q3 temporal | When did Tom mention Greta?
"""


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("conversations.py", "bench_conversations")


def test_a_set_file_gives_turns_with_times_speakers_and_evidence(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "01-maya.txt"
    path.write_text(SAMPLE)
    [conv] = bench.parse(path)
    assert conv.name == "Maya and Tom" and conv.scope == "root.conv-maya-and-tom"
    assert conv.speakers == ["Maya", "Tom"]
    assert conv.turns[0].text == "I moved to Berlin last month."  # tags stripped
    assert conv.turns[3].text == "Greta says: keep practising"  # a colon inside the text stays
    assert [t.occurred_at.isoformat() for t in conv.turns[:3]] == [
        "2024-03-02T19:40:00+00:00",
        "2024-03-02T19:41:00+00:00",
        "2024-03-02T19:42:00+00:00",
    ]
    assert conv.turns[3].occurred_at.isoformat() == "2024-05-10T12:00:00+00:00"  # no time: noon
    q = conv.questions
    assert (q["q1"].kind, q["q2"].kind, q["q3"].kind) == ("single", "multi", "temporal")
    assert q["q2"].evidence == {conv.turns[0].key, conv.turns[2].key}


def test_the_older_corpus_format_reads_every_question_as_single(bench: ModuleType) -> None:
    conversations = bench.parse(BENCH / "conversations" / "corpus.txt", legacy=True)
    assert len(conversations) >= 3
    assert {q.kind for conv in conversations for q in conv.questions.values()} == {"single"}


def test_scores(bench: ModuleType) -> None:
    row = bench.score(["a", "x", "b"], {"a", "b"})
    assert row["r5"] == 1.0 and row["mrr"] == 1.0
    assert 0.9 < row["ndcg10"] < 1.0  # b at rank 3, not 2
    assert bench.score(["x"] * 20, {"a"}) == {"r5": 0.0, "r10": 0.0, "r20": 0.0, "mrr": 0.0, "ndcg10": 0.0}


def test_every_set_file_parses(bench: ModuleType) -> None:
    for path in sorted((BENCH / "conversations" / "set").glob("*.txt")):
        [conv] = bench.parse(path)
        assert conv.questions, path.name
