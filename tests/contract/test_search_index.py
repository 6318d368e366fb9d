"""Contract suite for `mneme.ports.SearchIndex` adapters.

Every test runs against every fixture named in `ADAPTERS`. To add an adapter (e.g. OpenSearch),
write a fixture returning a fresh, empty index (skip it when its backend is unreachable) and add
its name to the list. Besides the port, adapters are expected to provide `update_ancestors`,
`count` and `doc_ids`. The SQLite-specific tests are at the end of the file.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.errors import InvalidInput, StoreUnavailable
from mneme.search_models import Hit, IndexDocument, SearchFilter, metadata_terms, shared_terms

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MODEL = "test-hash@16"
DIM = 16


@pytest.fixture
def sqlite_index(tmp_path: Path) -> Iterator[SqliteSearchIndex]:
    index = SqliteSearchIndex(tmp_path / "index.db")
    yield index
    index.close()


@pytest.fixture
def sqlite_index_fts_first(tmp_path: Path) -> Iterator[SqliteSearchIndex]:
    """The same adapter held to its FTS-first text plan, which it otherwise keeps for big subtrees."""
    index = SqliteSearchIndex(tmp_path / "index.db", subtree_first_max=0)
    yield index
    index.close()


@pytest.fixture
def sqlite_index_approximate(tmp_path: Path) -> Iterator[SqliteSearchIndex]:
    """The same adapter on its big-corpus text plan (`_and_first`) from the first document on: every
    filter still applies before the top k."""
    index = SqliteSearchIndex(tmp_path / "index.db", approximate_text_from=0)
    yield index
    index.close()


ADAPTERS = ["sqlite_index", "sqlite_index_fts_first", "sqlite_index_approximate"]


@pytest.fixture(params=ADAPTERS)
def index(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


# -- helpers ---------------------------------------------------------------------------------
def hash_vector(text: str, dim: int = DIM) -> list[float]:
    """A bag of hashed words, L2-normalised: texts sharing words point the same way."""
    vec = np.zeros(dim)
    for word in re.findall(r"\w+", text.lower()):
        vec[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    norm = np.linalg.norm(vec)
    return (vec / norm if norm else vec).tolist()


def doc(
    doc_id: str,
    text: str = "shared words here",
    *,
    tenant: str = "t1",
    path: tuple[str, ...] = ("root", "s1"),
    vector: list[float] | None = None,
    model_id: str | None = MODEL,
    **fields: Any,
) -> IndexDocument:
    return IndexDocument(
        tenant=tenant,
        doc_id=doc_id,
        kind=fields.pop("kind", "episode"),
        scope_id=path[-1],
        ancestor_ids=list(path),
        text=text,
        vector=vector if vector is not None else hash_vector(text),
        model_id=model_id,
        occurred_at=fields.pop("occurred_at", T0),
        **fields,
    )


def flt(ancestor_id: str = "root", tenant: str = "t1", **fields: Any) -> SearchFilter:
    return SearchFilter(tenant=tenant, ancestor_id=ancestor_id, **fields)


def ids(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


Channel = Literal["text", "vector"]
CHANNELS: list[Channel] = ["text", "vector"]


def search(index: Any, channel: Channel, f: SearchFilter, query: str = "shared words", k: int = 50) -> list[Hit]:
    if channel == "text":
        return index.search_text(f, query, k)
    return index.search_vector(f, np.asarray(hash_vector(query), np.float32), MODEL, k)


# -- read after write, idempotence, replace, delete ---------------------------------------------
@pytest.mark.parametrize("channel", CHANNELS)
def test_upsert_is_searchable_when_it_returns(index: Any, channel: Channel) -> None:
    index.upsert([doc("d1", "the quick brown fox")])
    assert ids(search(index, channel, flt(), "quick fox")) == ["d1"]
    index.upsert([doc("d2", "a quick red fox")])  # after a search (a warm cache, if any)
    assert set(ids(search(index, channel, flt(), "quick fox"))) == {"d1", "d2"}


@pytest.mark.parametrize("channel", CHANNELS)
def test_upsert_is_idempotent(index: Any, channel: Channel) -> None:
    index.upsert([doc("d1", "alpha beta"), doc("d2", "alpha gamma")])
    first = search(index, channel, flt(), "alpha beta")
    index.upsert([doc("d1", "alpha beta")])
    index.upsert([doc("d1", "alpha beta"), doc("d1", "alpha beta")])
    assert search(index, channel, flt(), "alpha beta") == first
    assert index.count("t1") == 2
    assert index.doc_ids("t1") == {"d1", "d2"}


@pytest.mark.parametrize("channel", CHANNELS)
def test_upsert_replaces_text_vector_and_ancestors(index: Any, channel: Channel) -> None:
    index.upsert([doc("d1", "zebra stripes", path=("root", "a"))])
    assert ids(search(index, channel, flt("a"), "zebra stripes")) == ["d1"]
    index.upsert([doc("d1", "penguin ice", path=("root", "b"))])
    assert ids(search(index, channel, flt("b"), "penguin ice")) == ["d1"]
    assert search(index, channel, flt("a"), "penguin ice") == []
    assert ids(search(index, "text", flt(), "zebra")) == []
    assert index.count("t1") == 1


def test_a_batch_keeps_the_last_version_of_a_doc(index: Any) -> None:
    index.upsert([doc("d1", "first version"), doc("d1", "second version")])
    assert ids(index.search_text(flt(), "second", 5)) == ["d1"]
    assert index.search_text(flt(), "first", 5) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_delete(index: Any, channel: Channel) -> None:
    index.upsert([doc("d1"), doc("d2"), doc("d3")])
    search(index, channel, flt())
    index.delete("t1", ["d1", "d3", "never-existed"])
    assert ids(search(index, channel, flt())) == ["d2"]
    assert index.doc_ids("t1") == {"d2"}
    index.delete("t1", [])
    index.upsert([doc("d1")])  # a deleted id can come back
    assert ids(search(index, channel, flt())) == ["d1", "d2"]


# -- tenants ------------------------------------------------------------------------------------
@pytest.mark.parametrize("channel", CHANNELS)
def test_tenant_isolation(index: Any, channel: Channel) -> None:
    # the same doc_id and the same (accidentally shared) scope ids in two tenants
    index.upsert([doc("d1", "orange juice", tenant="a"), doc("d1", "orange peel", tenant="b")])
    index.upsert([doc("only-b", "orange grove", tenant="b")])
    assert ids(search(index, channel, flt(tenant="a"), "orange")) == ["d1"]
    assert ids(search(index, channel, flt("s1", tenant="a"), "orange")) == ["d1"]
    assert ids(search(index, channel, flt(tenant="b"), "orange")) == ["d1", "only-b"]
    assert ids(search(index, "text", flt(tenant="a"), "peel grove")) == []
    index.delete("a", ["d1"])
    assert search(index, channel, flt(tenant="a"), "orange") == []
    assert index.doc_ids("b") == {"d1", "only-b"}
    assert search(index, channel, flt(tenant="nobody"), "orange") == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_clear_tenant(index: Any, channel: Channel) -> None:
    index.upsert([doc(f"d{i}", tenant="a") for i in range(5)] + [doc("d0", tenant="b")])
    search(index, channel, flt(tenant="a"))
    index.clear_tenant("a")
    assert index.count("a") == 0
    assert index.doc_ids("a") == set()
    assert search(index, channel, flt(tenant="a")) == []
    assert ids(search(index, channel, flt(tenant="b"))) == ["d0"]
    index.upsert([doc("d9", tenant="a")])  # rebuild after clearing
    assert ids(search(index, channel, flt(tenant="a"))) == ["d9"]
    index.clear_tenant("never-seen")


# -- subtree -----------------------------------------------------------------------------------
@pytest.mark.parametrize("channel", CHANNELS)
def test_subtree_filter(index: Any, channel: Channel) -> None:
    index.upsert(
        [
            doc("top", path=("root",)),
            doc("in-a", path=("root", "a")),
            doc("in-a-x", path=("root", "a", "x")),
            doc("in-b", path=("root", "b")),
        ]
    )
    assert ids(search(index, channel, flt("root"))) == ["in-a", "in-a-x", "in-b", "top"]
    assert ids(search(index, channel, flt("a"))) == ["in-a", "in-a-x"]
    assert ids(search(index, channel, flt("x"))) == ["in-a-x"]
    assert search(index, channel, flt("nowhere")) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_small_subtree_gets_its_true_top_k(index: Any, channel: Channel) -> None:
    """5,000 better matches elsewhere in the tenant must not crowd out a 20-doc subtree."""
    big_text, small_text = "needle needle needle", "needle in a haystack of other words"
    big_vec = hash_vector("needle")
    index.upsert([doc(f"big{i:04d}", big_text, path=("root", "big"), vector=big_vec) for i in range(5000)])
    small = [doc(f"small{i:02d}", small_text, path=("root", "small")) for i in range(20)]
    noise = doc("small-noise", "unrelated", path=("root", "small"), vector=[-x for x in big_vec])
    index.upsert([*small, noise])
    hits = search(index, channel, flt("small"), "needle", k=20)
    assert ids(hits) == [d.doc_id for d in small]
    assert ids(search(index, channel, flt("small"), "needle", k=5)) == [d.doc_id for d in small[:5]]
    assert ids(search(index, channel, flt("root"), "needle", k=3)) == ["big0000", "big0001", "big0002"]


def test_update_ancestors_moves_a_scope(index: Any) -> None:
    index.upsert(
        [
            doc("d1", path=("root", "a", "s")),
            doc("d2", path=("root", "a", "s")),
            doc("d3", path=("root", "a")),
        ]
    )
    for channel in CHANNELS:
        search(index, channel, flt("a"))
    index.update_ancestors("t1", "s", ["root", "b", "deeper", "s"])
    for channel in CHANNELS:
        assert ids(search(index, channel, flt("a"))) == ["d3"]
        assert ids(search(index, channel, flt("deeper"))) == ["d1", "d2"]
        assert ids(search(index, channel, flt("s"))) == ["d1", "d2"]
    index.update_ancestors("t2", "s", ["x"])  # another tenant's scope of the same id: no effect
    assert ids(search(index, "text", flt("b"))) == ["d1", "d2"]


# -- the other filters --------------------------------------------------------------------------
@pytest.mark.parametrize("channel", CHANNELS)
def test_kind_and_tier_filters(index: Any, channel: Channel) -> None:
    index.upsert(
        [
            doc("e", kind="episode"),
            doc("f", kind="fact", tier="summary"),
            doc("m", kind="memory", tier="summary"),
        ]
    )
    assert ids(search(index, channel, flt(kinds=frozenset({"fact", "memory"})))) == ["f", "m"]
    assert ids(search(index, channel, flt(kinds=frozenset({"episode"})))) == ["e"]
    assert ids(search(index, channel, flt(tiers=frozenset({"raw"})))) == ["e"]
    assert ids(search(index, channel, flt(tiers=frozenset({"summary", "other"}), kinds=frozenset({"fact"})))) == ["f"]
    assert search(index, channel, flt(tiers=frozenset({"nope"}))) == []
    assert search(index, channel, flt(kinds=frozenset())) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_rollups_can_be_left_out(index: Any, channel: Channel) -> None:
    """`rollups=False`: no fact of a tier other than raw (a roll-up), whatever else matches; an episode or
    memory of another tier stays."""
    index.upsert(
        [
            doc("e", kind="episode"),
            doc("d", kind="episode", tier="daily"),  # an STTP episode of the daily tier: not a roll-up
            doc("f", kind="fact"),
            doc("r", kind="fact", tier="daily"),
            doc("w", kind="fact", tier="weekly"),
        ]
    )
    assert ids(search(index, channel, flt())) == ["d", "e", "f", "r", "w"]
    assert ids(search(index, channel, flt(rollups=False))) == ["d", "e", "f"]
    assert ids(search(index, channel, flt(rollups=False, kinds=frozenset({"fact"})))) == ["f"]
    assert search(index, channel, flt(rollups=False, tiers=frozenset({"weekly"}))) == []
    # roll-ups of some tiers only (a period too long for a day's digest): the rest untouched
    assert ids(search(index, channel, flt(rollup_tiers=frozenset({"weekly"})))) == ["d", "e", "f", "w"]
    assert ids(search(index, channel, flt(rollup_tiers=frozenset()))) == ["d", "e", "f"]
    assert ids(search(index, channel, flt(rollups=False, rollup_tiers=frozenset({"weekly"})))) == ["d", "e", "f"]


@pytest.mark.parametrize("channel", CHANNELS)
def test_time_window_is_half_open(index: Any, channel: Channel) -> None:
    index.upsert([doc(f"h{h}", occurred_at=T0 + timedelta(hours=h)) for h in range(4)])
    assert ids(search(index, channel, flt(since=T0 + timedelta(hours=1)))) == ["h1", "h2", "h3"]
    assert ids(search(index, channel, flt(until=T0 + timedelta(hours=2)))) == ["h0", "h1"]
    window = flt(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
    assert ids(search(index, channel, window)) == ["h1", "h2"]
    # other time zones compare as instants
    berlin = datetime(2025, 1, 1, 4, tzinfo=ZoneInfo("Europe/Berlin"))  # 03:00 UTC
    assert ids(search(index, channel, flt(since=berlin))) == ["h3"]


@pytest.mark.parametrize("channel", CHANNELS)
def test_session_filter(index: Any, channel: Channel) -> None:
    index.upsert([doc("s1a", session_id="s1"), doc("s1b", session_id="s1"), doc("s2", session_id="s2"), doc("no")])
    assert ids(search(index, channel, flt(session_id="s1"))) == ["s1a", "s1b"]
    assert search(index, channel, flt(session_id="s3")) == []
    assert len(search(index, channel, flt())) == 4


@pytest.mark.parametrize("channel", CHANNELS)
def test_metadata_filter_is_equality_or_in_per_key_and_every_key(index: Any, channel: Channel) -> None:
    index.upsert(
        [
            doc("veg", metadata_terms=metadata_terms({"user": "alice", "diet": "vegetarian", "n": 1})),
            doc("vegan", metadata_terms=metadata_terms({"user": "alice", "diet": "vegan", "flag": True})),
            doc("bob", metadata_terms=metadata_terms({"user": "bob", "diet": "vegan", "n": 1.0})),
            doc("bare"),
            doc("other-tenant", tenant="t2", metadata_terms=metadata_terms({"user": "alice"})),
        ]
    )
    assert ids(search(index, channel, flt(metadata={"user": ["alice"]}))) == ["veg", "vegan"]
    assert ids(search(index, channel, flt(metadata={"diet": ["vegan", "vegetarian"]}))) == ["bob", "veg", "vegan"]
    assert ids(search(index, channel, flt(metadata={"user": ["alice"], "diet": ["vegan"]}))) == ["vegan"]
    assert ids(search(index, channel, flt(metadata={"n": [1]}))) == ["bob", "veg"]  # 1 and 1.0 are one number
    assert ids(search(index, channel, flt(metadata={"flag": [True]}))) == ["vegan"]
    assert search(index, channel, flt(metadata={"flag": [1]})) == []  # true is not 1
    assert search(index, channel, flt(metadata={"user": ["carol"]})) == []
    assert len(search(index, channel, flt())) == 4


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_derived_record_passes_a_metadata_filter_only_when_every_source_does(index: Any, channel: Channel) -> None:
    """A fact or roll-up is indexed with the terms its sources share (`shared_terms`): one source of Ines's
    among Bob's never lets Bob's filter find it, and never Ines's either."""
    bob, ines = {"user": "bob", "speaker": "Bob"}, {"user": "ines", "speaker": "Ines"}
    index.upsert(
        [
            doc("bobs", kind="fact", tier="daily", metadata_terms=shared_terms([bob, {**bob, "speaker": "Al"}])),
            doc("mixed", kind="fact", tier="daily", metadata_terms=shared_terms([bob, ines, ines])),
            doc("unsourced", kind="fact", metadata_terms=shared_terms([])),
        ]
    )
    assert ids(search(index, channel, flt(metadata={"user": ["bob"]}))) == ["bobs"]
    assert search(index, channel, flt(metadata={"user": ["ines"]})) == []
    assert search(index, channel, flt(metadata={"speaker": ["Bob"]})) == []  # one of its sources is Al's
    assert ids(search(index, channel, flt(metadata={"user": ["bob", "ines"]}))) == ["bobs"]  # agreeing sources only
    assert len(search(index, channel, flt())) == 3


@pytest.mark.parametrize("channel", CHANNELS)
def test_metadata_filter_applies_before_the_top_k(index: Any, channel: Channel) -> None:
    """The one matching document is found among many better-scoring ones: filtered inside the search."""
    index.upsert([doc(f"noise{i:02d}", "shared words shared words") for i in range(30)])
    index.upsert([doc("wanted", "shared words and more besides", metadata_terms=metadata_terms({"user": "zoe"}))])
    assert ids(search(index, channel, flt(metadata={"user": ["zoe"]}), k=3)) == ["wanted"]
    index.upsert([doc("wanted", "shared words and more besides")])  # rewritten without metadata: no longer selected
    assert search(index, channel, flt(metadata={"user": ["zoe"]}), k=3) == []
    index.upsert([doc("wanted", "shared words", metadata_terms=metadata_terms({"user": "zoe"}))])
    index.delete("t1", ["wanted"])
    assert search(index, channel, flt(metadata={"user": ["zoe"]}), k=3) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_visibility(index: Any, channel: Channel) -> None:
    index.upsert([doc("public"), doc("alice-only", visible_to="alice"), doc("bob-only", visible_to="bob")])
    assert ids(search(index, channel, flt())) == ["public"]
    assert ids(search(index, channel, flt(principal="alice"))) == ["alice-only", "public"]
    assert ids(search(index, channel, flt(principal="carol"))) == ["public"]


# -- vectors ------------------------------------------------------------------------------------
def test_vectors_are_only_compared_within_their_model(index: Any) -> None:
    index.upsert(
        [
            doc("a1", vector=[1.0, 0.0, 0.0], model_id="model-a@3"),
            doc("a2", vector=[0.0, 1.0, 0.0], model_id="model-a@3"),
            doc("b1", vector=[1.0, 0.0, 0.0, 0.0], model_id="model-b@4"),
            doc("none", model_id=None).model_copy(update={"vector": None}),
        ]
    )
    q3 = np.array([1.0, 0.0, 0.0], np.float32)
    assert ids(index.search_vector(flt(), q3, "model-a@3", 10)) == ["a1", "a2"]
    assert ids(index.search_vector(flt(), np.array([1, 0, 0, 0], np.float32), "model-b@4", 10)) == ["b1"]
    assert index.search_vector(flt(), q3, "model-c@3", 10) == []
    assert ids(index.search_text(flt(), "shared", 10)) == ["a1", "a2", "b1", "none"]
    # re-embedding a doc with another model moves it between models
    index.upsert([doc("a2", vector=[0.0, 1.0, 0.0, 0.0], model_id="model-b@4")])
    assert ids(index.search_vector(flt(), q3, "model-a@3", 10)) == ["a1"]
    assert ids(index.search_vector(flt(), np.array([0, 1, 0, 0], np.float32), "model-b@4", 10)) == [
        "a2",
        "b1",
    ]


def test_vector_scores_are_cosine(index: Any) -> None:
    index.upsert(
        [
            doc("same", vector=[2.0, 0.0, 0.0]),  # not normalised by the caller
            doc("close", vector=[1.0, 1.0, 0.0]),
            doc("orthogonal", vector=[0.0, 0.0, 3.0]),
            doc("opposite", vector=[-1.0, 0.0, 0.0]),
        ]
    )
    hits = index.search_vector(flt(), np.array([0.5, 0.0, 0.0], np.float32), MODEL, 10)
    assert ids(hits) == ["same", "close", "orthogonal", "opposite"]
    assert [h.score for h in hits] == pytest.approx([1.0, 2**-0.5, 0.0, -1.0], abs=1e-6)
    assert all(-1.0 <= h.score <= 1.0 for h in hits)


def test_text_scores_are_positive_and_larger_is_better(index: Any) -> None:
    index.upsert(
        [
            doc("once", "apples and some other long filler words in this sentence"),
            doc("thrice", "apples apples apples"),
            doc("never", "pears only"),
        ]
        + [doc(f"filler{i}", "unrelated filler text") for i in range(10)]
    )
    hits = index.search_text(flt(), "apples", 10)
    assert ids(hits) == ["thrice", "once"]
    assert hits[0].score > hits[1].score > 0


@pytest.mark.parametrize("channel", CHANNELS)
def test_ties_break_by_doc_id(index: Any, channel: Channel) -> None:
    index.upsert([doc(d, "tied text", vector=[0.6, 0.8, 0.0]) for d in ["c", "a", "d", "b"]])
    query = "tied" if channel == "text" else "unused"
    if channel == "text":
        hits = index.search_text(flt(), query, 3)
    else:
        hits = index.search_vector(flt(), np.array([0.6, 0.8, 0.0], np.float32), MODEL, 3)
    assert ids(hits) == ["a", "b", "c"]
    assert len({h.score for h in hits}) == 1


@pytest.mark.parametrize("channel", CHANNELS)
def test_k_zero_or_negative_returns_nothing(index: Any, channel: Channel) -> None:
    index.upsert([doc("d1")])
    assert search(index, channel, flt(), k=0) == []
    assert search(index, channel, flt(), k=-3) == []
    assert len(search(index, channel, flt(), k=1)) == 1


# -- text specifics -----------------------------------------------------------------------------
HOSTILE = [
    '"AND OR NEAR(',
    "*",
    "AND",
    "NOT",
    "OR OR OR",
    "NEAR(a b, 3)",
    "a AND",
    "text: secret",
    "{text}: x",
    "^start",
    "foo*",
    "-minus",
    '"unbalanced',
    "((()))",
    "a'b\"c",
    "x\x00y",
    "rowid:1",
    "docs_fts MATCH 1",
    "word " * 200,
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_do_not_error(index: Any, query: str) -> None:
    index.upsert([doc("d1", "foo and near a b x y secret start minus word"), doc("d2", "nothing to see")])
    hits = index.search_text(flt(), query, 10)
    assert set(ids(hits)) <= {"d1"}


@pytest.mark.parametrize("query", ["", "   ", "!!!", "*", "()", '"', "—…", "\n\t"])
def test_empty_or_punctuation_query_returns_nothing(index: Any, query: str) -> None:
    index.upsert([doc("d1", "some text")])
    assert index.search_text(flt(), query, 10) == []


def test_operators_are_plain_words(index: Any) -> None:
    index.upsert([doc("d1", "rock and roll"), doc("d2", "rock music")])
    assert ids(index.search_text(flt(), "AND", 10)) == ["d1"]
    assert set(ids(index.search_text(flt(), "rock NOT roll", 10))) == {"d1", "d2"}


def test_stemming(index: Any) -> None:
    index.upsert([doc("d1", "She runs every morning"), doc("d2", "connected devices"), doc("d3", "stand still")])
    assert ids(index.search_text(flt(), "running", 10)) == ["d1"]
    assert ids(index.search_text(flt(), "connection", 10)) == ["d2"]
    assert ids(index.search_text(flt(), "RUN", 10)) == ["d1"]


def test_any_query_word_matches(index: Any) -> None:
    index.upsert([doc("d1", "cats purr"), doc("d2", "dogs bark"), doc("d3", "cats and dogs")])
    assert ids(index.search_text(flt(), "cats, dogs!", 10))[0] == "d3"
    assert set(ids(index.search_text(flt(), "cats, dogs!", 10))) == {"d1", "d2", "d3"}


def test_a_query_is_searched_by_its_meaningful_words(index: Any) -> None:
    """Every engine searches the words `language.text.query_words` keeps: no stopword, no light verb before "to"."""
    index.upsert([doc("d1", "Leena takes the ferry to work"), doc("d2", "What do I get Priya? How does it go?")])
    assert ids(index.search_text(flt(), "How does Leena get to work?", 10)) == ["d1"]
    assert ids(index.search_text(flt(), "What do I get?", 10)) == ["d2"]  # nothing else left: every word


# -- SQLite adapter specifics -------------------------------------------------------------------
def test_sqlite_opens_lazily(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "index.db"
    index = SqliteSearchIndex(path)
    assert not path.exists()
    assert index.count("t1") == 0
    assert path.exists()
    index.close()


def test_sqlite_second_instance_sees_writes(tmp_path: Path) -> None:
    """Each instance's vector cache notices writes made through another connection."""
    one, two = SqliteSearchIndex(tmp_path / "i.db"), SqliteSearchIndex(tmp_path / "i.db")
    one.upsert([doc("d1")])
    assert ids(search(two, "vector", flt())) == ["d1"]
    one.upsert([doc("d2")])
    assert ids(search(two, "vector", flt())) == ["d1", "d2"]
    two.delete("t1", ["d1"])
    two.upsert([doc("d3")])
    assert ids(search(one, "vector", flt())) == ["d2", "d3"]
    one.update_ancestors("t1", "s1", ["root", "moved", "s1"])
    assert ids(search(two, "vector", flt("moved"))) == ["d2", "d3"]
    one.close()
    two.close()


def test_sqlite_cache_survives_churn(sqlite_index: SqliteSearchIndex) -> None:
    """Many replacements and deletes (compaction included) leave the vector cache exact."""
    rng = np.random.default_rng(7)
    truth: dict[str, list[float]] = {}
    sqlite_index.upsert([doc("warm")])
    search(sqlite_index, "vector", flt())
    for round_ in range(6):
        batch = {f"d{int(i)}": rng.standard_normal(DIM).tolist() for i in rng.integers(0, 600, 400)}
        sqlite_index.upsert([doc(d, vector=v) for d, v in batch.items()])
        truth.update(batch)
        gone = [f"d{int(i)}" for i in rng.integers(0, 600, 250)] if round_ % 2 else []
        sqlite_index.delete("t1", gone)
        for d in gone:
            truth.pop(d, None)
    truth["warm"] = hash_vector("shared words here")
    query = rng.standard_normal(DIM)
    hits = sqlite_index.search_vector(flt(), query.astype(np.float32), MODEL, 25)
    names = list(truth)
    matrix = np.array([truth[n] for n in names])
    cos = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    expected = [names[i] for i in np.argsort(-cos)[:25]]
    assert ids(hits) == expected
    fresh = SqliteSearchIndex(sqlite_index.path)
    assert fresh.search_vector(flt(), query.astype(np.float32), MODEL, 25) == hits
    fresh.close()


def test_sqlite_rejects_bad_vectors(sqlite_index: SqliteSearchIndex) -> None:
    sqlite_index.upsert([doc("d1", vector=[1.0, 0.0, 0.0])])
    with pytest.raises(InvalidInput):
        sqlite_index.upsert([doc("d2", vector=[1.0, 0.0])])  # another dimension, same model
    with pytest.raises(InvalidInput):
        sqlite_index.upsert([doc("d3", vector=[1.0, 0.0, 0.0], model_id=None)])
    with pytest.raises(InvalidInput):
        sqlite_index.upsert([doc("d4", vector=[float("nan"), 0.0, 0.0])])
    with pytest.raises(InvalidInput):
        sqlite_index.search_vector(flt(), np.array([1.0, 0.0], np.float32), MODEL, 5)
    assert sqlite_index.search_vector(flt(), np.zeros(3, np.float32), MODEL, 5) == []
    assert sqlite_index.doc_ids("t1") == {"d1"}  # the failed batches left nothing behind


def test_sqlite_translates_operational_errors(tmp_path: Path) -> None:
    def broken(path: str) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    with pytest.raises(StoreUnavailable):
        SqliteSearchIndex(tmp_path / "x.db", connect=broken).count("t1")


def test_sqlite_concurrent_threads(sqlite_index: SqliteSearchIndex) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(30):
                sqlite_index.upsert([doc(f"w{worker}-{i}")])
                assert search(sqlite_index, "vector" if i % 2 else "text", flt(), k=3)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sqlite_index.count("t1") == 120
    assert len(search(sqlite_index, "vector", flt(), k=500)) == 120


def test_sqlite_batch_rewriting_a_document_keeps_its_row_and_leaves_nothing_stale(
    sqlite_index: SqliteSearchIndex,
) -> None:
    """A batch writes each table once: a rewritten document keeps its row id (the text plan reads ids as
    the order of first writes), new ones follow, and the old text and subtree are gone."""
    sqlite_index.upsert([doc("a", "first words"), doc("b", "other words")])
    with sqlite_index._db() as conn:
        before = dict(conn.execute("SELECT doc_id, id FROM docs").fetchall())

    sqlite_index.upsert(
        [
            doc("c", "third words"),
            doc("a", "second words", path=("root", "s3")),
            doc("a", "zebra crossing", path=("root", "s2")),
        ]
    )

    with sqlite_index._db() as conn:
        after = dict(conn.execute("SELECT doc_id, id FROM docs").fetchall())
        assert conn.execute("SELECT count(*) FROM docs_fts").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM doc_ancestors").fetchone()[0] == 6
    assert after["a"] == before["a"] and after["b"] == before["b"] and after["c"] > before["b"]
    assert ids(sqlite_index.search_text(flt(), "first second", 10)) == []
    assert ids(sqlite_index.search_text(flt("s2"), "zebra", 10)) == ["a"]
    assert ids(sqlite_index.search_text(flt("s1"), "words", 10)) == ["b", "c"]


def test_sqlite_ann_keeps_filters_and_finds_the_nearest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ANN_MIN_ROWS a broad mask scans the 8-bit copy for candidates (filters inside it); a narrow mask
    stays exact. Scaled down: a 3,000-doc corpus with the thresholds lowered to match."""
    from mneme.adapters.sqlite import vector_cache

    pytest.importorskip("faiss")
    monkeypatch.setattr(vector_cache, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 200)
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((30, DIM))
    docs = [
        doc(f"d{i:04d}", path=("root", f"s{i % 5}"), vector=(centres[i % 30] + 0.3 * rng.standard_normal(DIM)).tolist())
        for i in range(3000)
    ]
    ann, exact = SqliteSearchIndex(tmp_path / "a.db"), SqliteSearchIndex(tmp_path / "e.db", ann=False)
    for start in range(0, 3000, 500):
        ann.upsert(docs[start : start + 500])
        exact.upsert(docs[start : start + 500])
        if start == 1500:  # the index is built here; later upserts and replacements join it
            ann.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 1)
            ann.upsert(docs[:100])
    found = total = 0
    for q in range(40):
        query = (centres[q % 30] + 0.5 * rng.standard_normal(DIM)).astype(np.float32)
        for f in (flt(), flt("s2"), flt(session_id="none")):
            got, want = ann.search_vector(f, query, MODEL, 10), exact.search_vector(f, query, MODEL, 10)
            assert all(h.doc_id in {d.doc_id for d in docs if f.ancestor_id in d.ancestor_ids} for h in got)
            found += len(set(ids(got)) & set(ids(want)))
            total += len(want)
            if f.ancestor_id == "root" and f.session_id is None:
                assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    assert ann._caches.get("t1", MODEL).ann is not None  # type: ignore[union-attr]
    assert found / total >= 0.99, found / total  # the candidates are rescored exactly: near-exact
    ann.close()
    exact.close()


def test_sqlite_ann_searches_and_writes_on_one_openmp_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query or a write's few rows run faiss on the calling thread alone: an OpenMP team left behind
    spins on the core other requests need (libgomp keeps the team size per thread, so each thread is checked)."""
    from mneme.adapters.sqlite import vector_cache

    faiss = pytest.importorskip("faiss")
    monkeypatch.setattr(vector_cache, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 200)
    rng = np.random.default_rng(5)
    index = SqliteSearchIndex(tmp_path / "a.db")
    index.upsert([doc(f"d{i:04d}", vector=rng.standard_normal(DIM).tolist()) for i in range(2500)])
    seen: dict[str, int] = {}

    def on_a_new_thread(name: str, work: Any) -> None:
        def run() -> None:
            work()
            seen[name] = faiss.omp_get_max_threads()

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    on_a_new_thread("search", lambda: index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 5))
    assert index._caches.get("t1", MODEL).ann is not None  # type: ignore[union-attr]
    on_a_new_thread("write", lambda: index.upsert([doc("late", vector=rng.standard_normal(DIM).tolist())]))
    assert seen == {"search": 1, "write": 1}
    assert [h.doc_id for h in index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 2501)].count("late") == 1
    index.close()


def test_sqlite_index_runs_numpy_blas_on_the_calling_thread(tmp_path: Path) -> None:
    """An exact scan's matrix-vector product runs on one BLAS thread: OpenBLAS's idle threads spin on
    the core the text search and the other requests need (its count is global to the process)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"}

    if not blas_threads():
        pytest.skip("numpy without a BLAS threadpoolctl knows")
    threadpoolctl.threadpool_limits(2, user_api="blas")
    index = SqliteSearchIndex(tmp_path / "a.db")
    assert blas_threads() == {1}
    index.upsert([doc("d1", vector=[1.0] + [0.0] * (DIM - 1))])
    assert [h.doc_id for h in index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 1)] == ["d1"]
    index.close()


def _vectors_fixture(index: Any) -> dict[str, Any]:
    index.upsert(
        [
            doc("a", vector=[3.0, 4.0] + [0.0] * (DIM - 2)),
            doc("b", "other words"),
            doc("c", model_id="another@16"),
            doc("a", tenant="t2", vector=[0.0, 1.0] + [0.0] * (DIM - 2)),
        ]
    )
    return dict(index.get_vectors("t1", MODEL, ["a", "b", "c", "missing", "a"]))


def test_get_vectors_returns_only_stored_vectors_of_that_model_and_tenant(index: Any) -> None:
    """An index may leave any out (recall then reads the records' own); what it returns is right."""
    found = _vectors_fixture(index)
    assert set(found) <= {"a", "b"}  # another model's vector and unknown ids never
    if "a" in found:
        assert np.allclose(found["a"], [0.6, 0.8] + [0.0] * (DIM - 2))  # L2-normalised, as searched
    if "b" in found:
        assert np.allclose(found["b"], hash_vector("other words"))
    assert index.get_vectors("t1", MODEL, []) == {}


def test_sqlite_get_vectors_leaves_none_out(sqlite_index: SqliteSearchIndex) -> None:
    assert set(_vectors_fixture(sqlite_index)) == {"a", "b"}
    assert np.allclose(sqlite_index.get_vectors("t2", MODEL, ["a"])["a"][:2], [0.0, 1.0])
