"""remember: idempotency, atomic batches, scopes, limits, indexing and the repair sweep."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from numpy.typing import NDArray

from mneme.bootstrap import Services
from mneme.errors import (
    Conflict,
    InvalidInput,
    MnemeError,
    PayloadTooLarge,
    ScopeNotFound,
    StoreUnavailable,
    Throttled,
)
from mneme.models import Role
from mneme.ports import Embedder
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.conftest import principal

WRITER = principal("acme", "wendy", Role.writer)


def item(content: str, scope: str = "root.acme", **fields: object) -> RememberItem:
    return RememberItem.model_validate({"scope": scope, "content": content, **fields})


def recall_ids(services: Services, query: str, **fields: object) -> list[str]:
    request = RecallRequest.model_validate({"query": query, **fields})
    return [r.id for r in services.recall.recall(WRITER, request).results]


@pytest.fixture
def acme(services: Services) -> Services:
    services.scopes.create("acme", "root.acme")
    return services


def test_an_episode_is_searchable_as_soon_as_remember_returns(acme: Services) -> None:
    [stored] = acme.remember.remember(WRITER, [item("The boiler in unit 4 was serviced by Dale.")])
    assert stored.created and stored.indexed
    assert recall_ids(acme, "who serviced the boiler") == [stored.episode_id]


class CountingMarks:
    """The store, counting the calls that mark episodes indexed after they were written."""

    def __init__(self, inner: object) -> None:
        self.inner, self.marked = inner, 0

    def mark_indexed(self, tenant: str, ids: Sequence[str]) -> None:
        self.marked += 1
        self.inner.mark_indexed(tenant, ids)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_an_episode_is_stored_already_marked_indexed_never_rewritten_to_say_so(acme: Services) -> None:
    """The index is written before the records: on DynamoDB a second write of the whole item to mark it
    indexed cost ~5 write units and an index entry's put and delete (bench/cost.py)."""
    counting = CountingMarks(acme.store)
    acme.remember.store = counting  # type: ignore[assignment]
    acme.remember.indexer.store = counting  # type: ignore[assignment]
    stored = acme.remember.remember(WRITER, [item("The boiler in unit 4 was serviced by Dale."), item("Gate 2.")])
    assert all(s.created and s.indexed for s in stored)
    assert counting.marked == 0
    records = acme.store.get_episodes("acme", [s.episode_id for s in stored])
    assert all(record.indexed for record in records.values()) and acme.store.list_unindexed(10) == []


def test_a_retry_with_the_same_key_returns_the_first_episode(acme: Services) -> None:
    first = acme.remember.remember(WRITER, [item("Invoice 77 was paid.", idempotency_key="pay-77")])
    again = acme.remember.remember(WRITER, [item("Invoice 77 was paid.", idempotency_key="pay-77")])
    assert again[0].episode_id == first[0].episode_id and not again[0].created
    assert len(recall_ids(acme, "invoice paid")) == 1


def test_without_a_key_scope_content_and_time_dedupe(acme: Services) -> None:
    when = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    first = acme.remember.remember(WRITER, [item("Met the auditor.", occurred_at=when)])
    again = acme.remember.remember(WRITER, [item("Met the auditor.", occurred_at=when)])
    assert again[0].episode_id == first[0].episode_id
    later = acme.remember.remember(WRITER, [item("Met the auditor.", occurred_at=when.replace(hour=11))])
    assert later[0].episode_id != first[0].episode_id


def test_a_reused_key_with_other_content_is_a_conflict(acme: Services) -> None:
    acme.remember.remember(WRITER, [item("First text.", idempotency_key="k")])
    with pytest.raises(Conflict) as raised:
        acme.remember.remember(WRITER, [item("Second text.", idempotency_key="k")])
    assert raised.value.code == "idempotency_key_reused"


def test_a_batch_with_one_bad_item_writes_nothing_and_names_the_item(acme: Services) -> None:
    batch = [
        item("Good one."),
        item("Lost scope.", scope="root.nowhere"),
        item("Another.", scope="root.new", create_scope=True),
    ]
    with pytest.raises(ScopeNotFound, match="item 1"):
        acme.remember.remember(WRITER, batch)
    assert recall_ids(acme, "good one another", scoring={"strictness": "recall"}) == []
    with pytest.raises(ScopeNotFound):
        acme.scopes.resolve("acme", "root.new")  # the valid item's scope was not created either


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (item("x" * (32 * 1024 + 1)), PayloadTooLarge),
        (item("   "), InvalidInput),
        (item("ok", metadata={"blob": "y" * 5000}), PayloadTooLarge),
        (item("ok", occurred_at=datetime(2026, 1, 1)), InvalidInput),
    ],
)
def test_limits_are_enforced_before_any_work(acme: Services, bad: RememberItem, error: type[MnemeError]) -> None:
    with pytest.raises(error, match="item 1"):
        acme.remember.remember(WRITER, [item("fine"), bad])
    assert acme.store.list_unindexed(10) == []


def test_batches_hold_one_to_a_hundred_items(acme: Services) -> None:
    with pytest.raises(InvalidInput):
        acme.remember.remember(WRITER, [])
    with pytest.raises(InvalidInput):
        acme.remember.remember(WRITER, [item(f"n{i}") for i in range(101)])
    assert len(acme.remember.remember(WRITER, [item(f"note {i}") for i in range(100)])) == 100


def test_create_scope_creates_missing_parents(acme: Services) -> None:
    acme.remember.remember(WRITER, [item("Deep note.", scope="root.acme.payroll.2026", create_scope=True)])
    assert acme.scopes.resolve("acme", "root.acme.payroll.2026").path == "root.acme.payroll.2026"


def test_metadata_comes_back_unchanged_on_recall(acme: Services) -> None:
    metadata = {"source": "call", "nested": {"n": [1, 2.5, None, True]}, "unicode": "Zürich ✓"}
    acme.remember.remember(WRITER, [item("Spoke with the Zürich office.", metadata=metadata)])
    [result] = acme.recall.recall(WRITER, RecallRequest(query="Zurich office")).results
    assert result.metadata == metadata


class FlakyIndex:
    """Wraps an index; fails every `upsert` while `failing` is set."""

    def __init__(self, inner: object) -> None:
        self.inner, self.failing = inner, True

    def upsert(self, docs: object) -> None:
        if self.failing:
            raise StoreUnavailable("index down")
        self.inner.upsert(docs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_an_index_failure_loses_nothing_and_the_sweep_repairs_it(acme: Services) -> None:
    flaky = FlakyIndex(acme.index)
    acme.indexer.index = flaky  # type: ignore[assignment]
    stored = acme.remember.remember(WRITER, [item(f"Delivery {i} arrived at dock B.") for i in range(30)])
    assert all(s.created and not s.indexed for s in stored)
    assert len(acme.store.list_unindexed(100)) == 30
    assert acme.indexer.sweep() == 0  # still down: nothing claimed
    flaky.failing = False
    assert acme.indexer.sweep(limit=7) == 30
    assert acme.store.list_unindexed(100) == []
    assert set(recall_ids(acme, "delivery dock", limit=50)) == {s.episode_id for s in stored}


def test_rebuild_recreates_the_index_from_records(acme: Services) -> None:
    stored = acme.remember.remember(WRITER, [item(f"Pallet {i} checked.") for i in range(12)])
    acme.memories.create(principal("acme", "alice"), scope="root.acme", key="pallets", body="Check pallets daily.")
    acme.index.clear_tenant("acme")
    assert recall_ids(acme, "pallet checked", limit=50) == []
    assert acme.indexer.rebuild("acme").documents == 13
    assert len(recall_ids(acme, "pallet checked", limit=50)) == len(stored) + 1


class Failing:
    """Wraps a port; `method` raises `error` while `failing` is set."""

    def __init__(self, inner: object, method: str, error: MnemeError) -> None:
        self.inner, self.method, self.error, self.failing = inner, method, error, True

    def __getattr__(self, name: str) -> object:
        if name == self.method and self.failing:
            raise self.error
        return getattr(self.inner, name)


class DownEmbedder:
    """Wraps an embedder; `embed` raises `error` while `failing` is set (as Bedrock's client does once its
    retries are spent)."""

    def __init__(self, inner: Embedder, error: MnemeError) -> None:
        self.inner, self.error, self.failing = inner, error, True
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.failing:
            raise self.error
        return self.inner.embed(texts)


def embedder_down(services: Services, error: MnemeError) -> DownEmbedder:
    """The embedding model fails with `error` for remember, the sweep and recall alike."""
    embedder = DownEmbedder(services.embedder, error)
    services.remember.embedder = services.indexer.embedder = services.recall.embedder = embedder
    return embedder


@pytest.mark.parametrize("outage", [StoreUnavailable("Bedrock down"), Throttled("Bedrock is throttling")])
def test_an_embedding_outage_stores_the_batch_found_by_its_words_and_the_sweep_embeds_it(
    acme: Services, outage: MnemeError
) -> None:
    # Given a model that is down while a batch is remembered
    batch = [item(f"Crate {i} sealed at the north gate.", idempotency_key=f"crate-{i}") for i in range(20)]
    embedder = embedder_down(acme, outage)
    # When the batch is remembered, Then every episode is stored without a vector and said to wait for it
    stored = acme.remember.remember(WRITER, batch)
    assert all(s.created and not s.indexed and s.warnings == ["embedding_deferred"] for s in stored)
    episode_ids = {s.episode_id for s in stored}
    assert all(r.vector is None for r in acme.store.get_episodes("acme", list(episode_ids)).values())
    # And recall, the model still down, finds them by their words at once
    found = acme.recall.recall(WRITER, RecallRequest(query="crate sealed north gate", limit=50))
    assert found.retrieval_path == "lexical_fallback" and {r.id for r in found.results} == episode_ids
    # And a retry writes nothing twice and says the same
    again = acme.remember.remember(WRITER, batch)
    assert [a.episode_id for a in again] == [s.episode_id for s in stored]
    assert all(not a.created and not a.indexed and a.warnings == ["embedding_deferred"] for a in again)
    # And the sweep waits for the model, then embeds and indexes them: found by meaning alone
    vector_only = {"alpha": 1.0, "beta": 0.0, "fallback": "never", "strictness": "recall"}
    assert acme.indexer.sweep() == 0 and len(acme.store.list_unindexed(100)) == 20
    embedder.failing = False
    assert recall_ids(acme, "crate sealed north gate", limit=50, scoring=vector_only) == []
    assert acme.indexer.sweep() == 20 and acme.store.list_unindexed(100) == []
    assert set(recall_ids(acme, "crate sealed north gate", limit=50, scoring=vector_only)) == episode_ids
    after = acme.remember.remember(WRITER, batch)
    assert all(not a.created and a.indexed and a.warnings == [] for a in after)


@pytest.mark.parametrize(
    "fault", [InvalidInput("text rejected"), MnemeError("access denied", code="embedder_access_denied")]
)
def test_an_embedder_fault_that_waiting_does_not_cure_writes_nothing(acme: Services, fault: MnemeError) -> None:
    embedder_down(acme, fault)
    with pytest.raises(type(fault)):
        acme.remember.remember(WRITER, [item("Crate 1 sealed.")])
    assert acme.store.list_unindexed(100) == []
    assert recall_ids(acme, "crate sealed", scoring={"strictness": "recall"}) == []


def test_a_store_failure_after_embedding_indexes_nothing(acme: Services) -> None:
    # Given a store whose episode write fails once the vectors are ready
    batch = [item(f"Gate {i} locked.") for i in range(10)]
    store = Failing(acme.store, "put_episodes", StoreUnavailable("disk full"))
    acme.remember.store = store  # type: ignore[assignment]
    # When the batch is remembered, Then recall shows none of it (the index, written first, holds documents
    # without records: recall reads the records and drops them)
    with pytest.raises(StoreUnavailable, match="disk full"):
        acme.remember.remember(WRITER, batch)
    assert recall_ids(acme, "gate locked", scoring={"strictness": "recall"}) == []
    # And the retry writes every episode once, with its vector, marked indexed
    store.failing = False
    stored = acme.remember.remember(WRITER, batch)
    assert all(s.created and s.indexed for s in stored)
    records = acme.store.get_episodes("acme", [s.episode_id for s in stored])
    assert all(
        r.indexed and r.vector is not None and len(r.vector) == acme.embedder.dimension for r in records.values()
    )
    assert len(set(recall_ids(acme, "gate locked", limit=50))) == 10
