"""`GET /v1/scopes/memories` paged through on both record stores, against the listing it must equal: every
visible memory of the subtree sorted by scope path, key and id (what one page of the whole subtree gives), for
every page size, over names that sort awkwardly ("-" before "." before digits before letters), a deep chain
and a wide level; and the cursor across renames of the listed scope, of a scope above it and of the scope it
stopped in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mneme.models import Memory, Principal, Role
from tests.conftest import principal
from tests.integration.helpers import assert_error
from tests.integration.stacks import STORES, Served, served
from tests.integration.test_memory_listing_http import every, listing, page

Position = tuple[str, str, str]  # (scope path, key, memory id)
AWKWARD = ("a", "a-", "a--", "a-0", "a-b", "a0", "ab", "b", "0", "9z")


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def positions(records: list[dict[str, Any]]) -> list[Position]:
    return [(r["target"], r["key"], r["memory_id"]) for r in records]


def paged(stack: Served, caller: Principal, path: str, limit: int) -> list[Position]:
    """The whole listing, `limit` at a time (the service the route calls, without HTTP: many page sizes)."""
    found: list[Position] = []
    cursor: str | None = None
    while True:
        listed, cursor = stack.services.memory_listing.page(caller, path, cursor, limit)
        found += [(scope_path, memory.key, memory.memory_id) for memory, scope_path, _ in listed]
        if cursor is None:
            return found


def test_every_page_size_pages_through_exactly_the_sorted_subtree(stack: Served) -> None:
    # Given scopes whose names sort awkwardly ("a-b" < "a.b" < "a0" < "ab"), a chain down to depth 8, and a
    # writer that sees published memories and its own drafts (one a draft of a published key), never another
    # writer's draft, an archived memory or an expired one
    admin, wendy, oscar = (principal("acme", name, role) for name, role in
                           [("boss", Role.admin), ("wendy", Role.writer), ("oscar", Role.writer)])  # fmt: skip
    scopes = ["root.t", *(f"root.t.{a}" for a in AWKWARD), *(f"root.t.a.{b}" for b in AWKWARD[:5])]
    scopes += [f"root.t.a-b.{b}" for b in AWKWARD[3:6]] + [".".join(["root.t", *"aaaaaaa"][: n + 3]) for n in range(6)]
    scopes = list(dict.fromkeys(scopes))
    for path in scopes:
        stack.services.scopes.create("acme", path, parents=True)
    seen: list[Position] = []

    def create(who: Principal, path: str, key: str, **fields: Any) -> Memory:
        memory, _ = stack.services.memories.create(who, scope=path, key=key, body=f"{key} in {path}.", **fields)
        return memory

    seen.append(("root.t.a-", "a-b", create(wendy, "root.t.a-", "a-b").memory_id))  # published after it
    for n, path in enumerate(scopes):
        for key in ("a", "a-b", "a.b", "a0", "a_b")[: n % 4]:
            seen.append((path, key, create(admin, path, key).memory_id))
    seen.append(("root.t.a.a", "mine", create(wendy, "root.t.a.a", "mine").memory_id))
    create(oscar, "root.t.a0", "theirs")
    archived = create(admin, "root.t.ab", "gone")
    stack.services.memories.archive(admin, archived.memory_id)
    create(admin, "root.t.b", "offer", valid_until=stack.clock.now() + timedelta(minutes=1))
    stack.clock.advance(minutes=2)
    expected = sorted(seen)
    assert ("root.t.a-", "a-b") in [(p, k) for p, k, _ in expected[:8]] and len(expected) > 30
    # When the writer pages through root.t with every page size: the same listing as one page, in that order
    whole = paged(stack, wendy, "root.t", 200)
    assert whole == expected
    sqlite = stack.services.store.__class__.__name__.startswith("Sqlite")
    sizes = range(1, len(expected) + 1) if sqlite else (1, 2, 3, 7)  # moto is slow: a few sizes
    for limit in sizes:
        assert paged(stack, wendy, "root.t", limit) == expected, limit
    # And over HTTP, a subtree that starts at a scope whose name others extend ("a" under "a-", "a--", "a0")
    writer = stack.key("wendy", Role.writer)
    under_a = [p for p in expected if p[0] == "root.t.a" or p[0].startswith("root.t.a.")]
    assert [r for records in every(writer, "root.t.a", limit=2) for r in positions(records)] == under_a


def test_a_wide_level_and_a_deep_chain_page_in_path_order(stack: Served) -> None:
    # Given 250 scopes on one level (50 under moto, whose reads slow down as its table grows), every fifth
    # holding a memory, and a chain down to depth 8 under the first, two memories each: pages walk the empty
    # scopes between
    admin = principal("acme", "boss", Role.admin)
    sqlite = stack.services.store.__class__.__name__.startswith("Sqlite")
    wide = 250 if sqlite else 50
    chain = [".".join(["root.w", "s000", *"cdefgh"[:n]]) for n in range(1, 7)]
    expected: list[Position] = []
    for n, path in enumerate([f"root.w.s{i:03}" for i in range(wide)] + chain):
        stack.services.scopes.create("acme", path, parents=True)
        keys = ("j", "k") if path in chain else ("k",) if n % 5 == 0 else ()
        for key in keys:
            memory, _ = stack.services.memories.create(admin, scope=path, key=key, body=f"{key} {path}.")
            expected.append((path, key, memory.memory_id))
    expected.sort()
    # Then pages of every size come in path order: the chain under s000 before s005
    assert expected[1][0] == "root.w.s000.c" and expected[13][0] == "root.w.s005" and len(expected) == wide // 5 + 12
    for limit in (1, 7, len(expected) - 1, len(expected), 200) if sqlite else (7, 200):
        got = [p for records in every(stack.admin, "root.w", limit=limit) for p in positions(records)]
        assert got == expected, limit


def test_a_rename_between_two_pages_keeps_the_cursor(stack: Served) -> None:
    # Given a listing of root.acme.payroll paged three at a time
    for path in ("root.acme.payroll.de", "root.acme.payroll.fr", "root.acme.payroll.uk", "root.acme.sales"):
        stack.admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, 201)
    for path in ("root.acme.payroll", "root.acme.payroll.de", "root.acme.payroll.fr", "root.acme.payroll.uk"):
        for key in ("a", "b"):
            stack.admin.create_memory(key, f"{key} in {path}.", scope=path)
    whole = page(stack.admin, "root.acme.payroll", limit=200)["memories"]
    first = page(stack.admin, "root.acme.payroll", limit=3)
    assert [(r["target"], r["key"]) for r in first["memories"]][-1] == ("root.acme.payroll.de", "a")
    # When the listed scope is renamed, then a scope above it, between two pages
    rename = {"path": "root.acme.payroll", "new_path": "root.acme.pay"}
    stack.admin.ok("POST", "/v1/scopes/rename", rename)
    second = page(stack.admin, "root.acme.pay", limit=2, cursor=first["next_cursor"])
    stack.admin.ok("POST", "/v1/scopes/rename", {"path": "root.acme", "new_path": "root.zeta"})
    # Then the listing goes on where it stopped (by its new path or its old one, an alias), nothing twice
    third = page(stack.admin, "root.acme.payroll", limit=200, cursor=second["next_cursor"])
    assert [r["memory_id"] for r in first["memories"] + second["memories"] + third["memories"]] == [
        r["memory_id"] for r in whole
    ]
    assert [r["target"] for r in third["memories"]][-1] == "root.zeta.pay.uk"
    # And a cursor still pages only its own listing: not a sibling's, not the parent's, not another tenant's
    assert_error(listing(stack.admin, "root.zeta.sales", cursor=first["next_cursor"]), 400, "invalid_cursor")
    assert_error(listing(stack.admin, "root.zeta", cursor=first["next_cursor"]), 400, "invalid_cursor")
    secret, _ = stack.services.keys.create("globex", "boss", [Role.admin])
    other = stack.admin.as_key(secret)
    other.ok("POST", "/v1/scopes", {"path": "root.zeta.pay", "parents": True}, 201)
    assert_error(listing(other, "root.zeta.pay", cursor=first["next_cursor"]), 400, "invalid_cursor")
