"""How many times one recall reads the store: once per kind of record, not once per result."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mneme.bootstrap import Services
from mneme.models import Role
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.conftest import principal

ADMIN = principal("acme", "alice", Role.admin)
WRITER = principal("acme", "wendy", Role.writer)
SUPPLIERS = ["Vaillant", "Worcester", "Baxi", "Ideal", "Viessmann", "Glowworm", "Potterton", "Alpha"]


class Counting:
    """A store that counts the calls made to it, by method."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return call


def seeded(services: Services, clock: Any) -> None:
    """Seven memories in three scopes (one with the caller's pending edit) and eight facts."""
    for team in range(3):
        services.scopes.create("acme", f"root.acme.team{team}", parents=True)
    for i in range(6):
        body = f"Boiler rule {i}: check the boiler pressure gauge weekly."
        services.memories.create(ADMIN, scope=f"root.acme.team{i % 3}", key=f"boiler-{i}", body=body)
    main, _ = services.memories.create(ADMIN, scope="root.acme", key="boiler-main", body="Boiler pressure under 2 bar.")
    services.review.edit(WRITER, main.memory_id, body="Boiler pressure under 2.5 bar.")
    items = [
        RememberItem(scope=f"root.acme.team{i % 3}", content=f"Plant {i}'s boiler supplier is {name}.")
        for i, name in enumerate(SUPPLIERS)
    ]
    services.remember.remember(WRITER, items)
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)
    services.consolidation.start(WRITER, None)


def test_a_recall_reads_memories_fact_sources_and_scopes_in_batches(services: Services, clock: Any) -> None:
    # Given seven memories and eight facts that all match the query, in three scopes
    seeded(services, clock)
    store, scopes = Counting(services.recall.store), Counting(services.scopes.store)
    services.recall.store, services.scopes.store = store, scopes  # type: ignore[assignment]
    # When one recall finds them all
    response = services.recall.recall(WRITER, RecallRequest(query="boiler pressure", scope="root.acme", limit=20))
    # Then every memory and every fact with its sources is in the results (the caller's edit in place)
    assert Counter(r.kind for r in response.results) == {"memory": 7, "fact": 8}
    assert any(r.content == "Boiler pressure under 2.5 bar." for r in response.results)
    assert all(r.sources for r in response.results if r.kind == "fact")
    # And the store was read a few times in all, never once per memory or per fact (22 reads before:
    # a get_memory per memory, a get_episodes per fact; 5 scope reads, one per scope)
    assert store.calls["get_memory"] == 0 and store.calls["get_memories"] <= 2
    assert store.calls["get_episodes"] <= 2 and store.calls["list_revisions"] == 1
    assert sum(store.calls.values()) <= 7, store.calls
    assert scopes.calls["get_scopes"] == 1 and sum(scopes.calls.values()) <= 3, scopes.calls
