"""ScopeService.paths_of / chains_of: canonical paths of many scopes, read a tree level at a time, and the
request cache that keeps what a request has read."""

from __future__ import annotations

from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.errors import ScopeNotFound
from mneme.models import Role
from mneme.services.curation.listing import MemoryListing
from mneme.services.cursors import Cursors
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService
from tests.conftest import principal

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


class CountingChildren:
    """Wraps a record store and counts its `list_children` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0

    def list_children(self, tenant: str, scope_id: str) -> Any:
        self.reads += 1
        return self.inner.list_children(tenant, scope_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_walk_gives_a_subtree_in_path_order_and_skips_what_a_cursor_has_passed(services: Services) -> None:
    # "-" sorts before ".": root.ops.a-x comes before root.ops.a.b, which depth-first order would not give
    for path in ("root.ops.a.b", "root.ops.a-x", "root.ops.a.b.c", "root.ops.b", "root.ops.a0", "root.hr.z"):
        services.scopes.create(T, path, parents=True)
    counting = CountingChildren(services.store)
    scopes = ScopeService(counting, services.clock)  # type: ignore[arg-type]
    start = scopes.resolve(T, "root.ops")

    walked = [path for path, _ in scopes.walk(T, start)]

    assert walked == sorted(path for path, _ in services.scopes.subtree(T, "root.ops"))
    assert walked == ["root.ops", "root.ops.a", "root.ops.a-x", "root.ops.a.b", "root.ops.a.b.c", "root.ops.a0",
                      "root.ops.b"]  # fmt: skip
    # Resumed after root.ops.a0: the subtree of root.ops.a, wholly before it, is not read again
    counting.reads = 0
    resumed = [path for path, _ in scopes.walk(T, start, after="root.ops.a0")]
    assert resumed[-2:] == ["root.ops.a0", "root.ops.b"]
    assert counting.reads == 3  # root.ops, a0 and b; never a, a.b or a-x, whose subtrees sort before a0


def test_a_page_of_a_listing_reads_the_scopes_it_lists_not_the_whole_subtree(services: Services) -> None:
    admin = principal("acme", "alice", Role.admin)
    for i in range(30):
        services.scopes.create(T, f"root.wide.s{i:02}", parents=True)
        services.memories.create(admin, scope=f"root.wide.s{i:02}", key="note", body=f"Note {i}.")
    counting = CountingChildren(services.store)
    listing = MemoryListing(
        services.store,
        ScopeService(counting, services.clock),
        services.memories,
        Cursors(lambda: b"k" * 32),  # type: ignore[arg-type]
    )
    listed, cursor, pages = [], None, 0
    while True:
        page, cursor = listing.page(admin, "root.wide", cursor, limit=2)
        listed += [scope_path for _, scope_path, _ in page]
        pages += 1
        if cursor is None:
            break

    assert listed == [f"root.wide.s{i:02}" for i in range(30)] and pages == 15
    assert counting.reads <= pages * 5  # a page's own scopes and the next; the whole subtree each page was 31
