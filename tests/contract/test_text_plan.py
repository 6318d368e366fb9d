"""The SQLite index's text plan for big corpora (`sqlite_text.TextPlan._and_first`), scaled down.

From `BIG_TEXT` documents on, a query of several words asks FTS5 for the documents holding all of
them first (FTS5 scores every row an OR query matches; an AND query only the rows holding every
word), then relaxes word by word, commonest first, and scores every match of any word only when
even that leaves fewer than k. Here it applies from the first document on (`approximate_text_from=0`);
the whole contract suite runs that way too (`tests/contract/test_search_index.py`,
`sqlite_index_approximate`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mneme.adapters.sqlite import text as sqlite_text
from mneme.adapters.sqlite.index import SqliteSearchIndex
from tests.contract.test_search_index import doc, flt, ids


@pytest.fixture
def index(tmp_path: Path) -> Iterator[dict[bool, SqliteSearchIndex]]:
    """The same file under both plans: True, the big-corpus plan from the first document on; False, exact."""
    plans = {
        big: SqliteSearchIndex(tmp_path / "i.db", subtree_first_max=0, approximate_text_from=0 if big else 10**12)
        for big in (True, False)
    }
    plans[True].upsert(
        [doc(f"both{i}", f"a red kite over the hill {i}", path=("root", "a" if i < 3 else "b")) for i in range(5)]
        + [doc(f"red{i:02d}", f"a red barn number {i}", path=("root", "a")) for i in range(20)]
        + [doc(f"kite{i:02d}", f"a kite string number {i}", path=("root", "b")) for i in range(12)]
        + [doc(f"other{i:02d}", f"a green field number {i}", path=("root", "b")) for i in range(80)]
    )  # red in 25 of 117 documents, kite in 17: both words count
    yield plans
    for plan in plans.values():
        plan.close()


def search(index: dict[bool, SqliteSearchIndex], query: str, k: int, big: bool, ancestor: str = "root") -> list:
    return index[big].search_text(flt(ancestor), query, k)


def test_documents_holding_every_word_come_first_with_their_exact_scores(index: dict[bool, SqliteSearchIndex]) -> None:
    got = search(index, "red kite", 5, big=True)
    exact = search(index, "red kite", 5, big=False)
    assert {h.doc_id for h in got} == {f"both{i}" for i in range(5)}
    assert got == exact  # the same documents, the same bm25 scores, the same order


def test_relaxing_fills_k_from_the_documents_holding_fewer_words(index: dict[bool, SqliteSearchIndex]) -> None:
    got = search(index, "red kite", 12, big=True)
    assert ids(got)[:5] == ids(search(index, "red kite", 5, big=False))
    assert len(got) == 12
    # the rest hold the rarer word (kite: 17 documents, red: 25), scored by it alone: a lower bound
    assert all(h.doc_id.startswith("kite") for h in got[5:])
    exact = {h.doc_id: h.score for h in search(index, "red kite", 40, big=False)}
    assert all(h.score <= exact[h.doc_id] + 1e-9 for h in got)


def test_filters_apply_before_the_top_k(index: dict[bool, SqliteSearchIndex]) -> None:
    got = search(index, "red kite", 6, big=True, ancestor="b")
    assert len(got) == 6
    assert ids(got)[:2] == ["both3", "both4"] or ids(got)[:2] == ["both4", "both3"]
    assert not {h.doc_id for h in got} & {"both0", "both1", "both2"}
    assert all(h.doc_id.startswith(("both", "kite")) for h in got)


def test_a_word_no_document_holds_does_not_empty_the_answer(index: dict[bool, SqliteSearchIndex]) -> None:
    assert ids(search(index, "red kite zeppelin", 5, big=True)) == ids(search(index, "red kite", 5, big=False))


def test_fewer_matches_than_k_means_every_match_of_any_word(index: dict[bool, SqliteSearchIndex]) -> None:
    assert search(index, "red kite", 100, big=True) == search(index, "red kite", 100, big=False)


def test_any_of_the_rarest_words_when_no_word_alone_fills_k(index: dict[bool, SqliteSearchIndex]) -> None:
    """kite alone: 17 documents; k 30: any of kite, red (42 documents, within the budget) fills it."""
    got = search(index, "red kite", 30, big=True)
    assert len(got) == 30
    exact = search(index, "red kite", 30, big=False)
    assert got == exact  # an OR over every word present: exact scores


def test_a_one_word_query_on_a_big_corpus_is_one_ranked_pass(index: dict[bool, SqliteSearchIndex]) -> None:
    got = search(index, "kite", 5, big=True)
    exact = search(index, "kite", 5, big=False)
    assert [h.score for h in got] == [h.score for h in exact]  # tied documents may differ, scores do not


def test_a_query_matching_more_than_the_window_ranks_its_newest_matches(
    index: dict[bool, SqliteSearchIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window (here 10 documents) bounds a pass's bm25 work: only the newest 10 of the 25 documents
    holding "red" are ranked (exact scores); filters that leave fewer than k of them rank every match."""
    monkeypatch.setattr(sqlite_text, "WINDOW", 10)
    exact = {h.doc_id: h.score for h in search(index, "red", 40, big=False)}
    got = search(index, "red", 5, big=True)
    newest = [f"red{i:02d}" for i in range(10, 20)]  # upserted last of the documents holding red
    assert len(got) == 5 and {h.doc_id for h in got} <= set(newest)
    assert all(h.score == exact[h.doc_id] for h in got)
    assert {h.doc_id for h in search(index, "red", 3, big=True, ancestor="b")} == {"both3", "both4"}
