"""ScopeService.paths_of / chains_of: canonical paths of many scopes, read a tree level at a time, and the
request cache that keeps what a request has read."""

from __future__ import annotations

from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.errors import ScopeNotFound
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService

T = "acme"


class CountingReads:
    """Wraps a record store and counts its `get_scopes` calls and the ids they asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    def get_scopes(self, tenant: str, scope_ids: Any) -> Any:
        self.batches.append(list(scope_ids))
        return self.inner.get_scopes(tenant, scope_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_paths_of_reads_one_batch_per_level(services: Services) -> None:
    created = [services.scopes.create(T, f"root.acme.{team}.{proj}", parents=True) for team in "ab" for proj in "xyz"]
    counting = CountingReads(services.store)
    scopes = ScopeService(counting, services.clock)  # type: ignore[arg-type]
    ids = [resolved.scope.scope_id for resolved in created]

    found = scopes.paths_of(T, [*ids, "missing"])

    assert found == {resolved.scope.scope_id: resolved.path for resolved in created}
    assert [len(batch) for batch in counting.batches] == [7, 2, 1, 1]  # leaves (+ missing), teams, acme, root


def test_chain_of_is_the_canonical_chain_and_missing_is_not_found(services: Services) -> None:
    made = services.scopes.create(T, "root.acme.ops", parents=True)
    services.scopes.rename(T, "root.acme", "root.acme-ltd")

    chain = services.scopes.chain_of(T, made.scope.scope_id)

    assert chain.path == "root.acme-ltd.ops"
    assert [scope.segment for scope in chain.chain] == ["root", "acme-ltd", "ops"]
    with pytest.raises(ScopeNotFound):
        services.scopes.chain_of(T, "missing")


def test_a_request_reads_each_scope_once(services: Services) -> None:
    leaves = [services.scopes.create(T, f"root.acme.team.p{i}", parents=True).scope.scope_id for i in range(3)]
    counting = CountingReads(services.store)
    scopes = ScopeService(counting, services.clock)  # type: ignore[arg-type]

    @per_request
    def request() -> list[str]:
        scopes.prefetch(T, leaves)
        return [scopes.chain_of(T, leaf).path for leaf in leaves]

    assert request() == [f"root.acme.team.p{i}" for i in range(3)]
    assert len(counting.batches) == 4  # the prefetch; the lookups read nothing more
    scopes.chain_of(T, leaves[0])  # outside a request nothing is kept
    assert len(counting.batches) == 8
