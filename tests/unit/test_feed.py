"""The change feed: total order, resumable signed cursors, exactly once under concurrent writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.bootstrap import Services
from mneme.errors import InvalidInput
from mneme.models import Role
from mneme.services.feed import FeedService
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)


def read_all(feed: FeedService, caller=ALICE, cursor: str | None = None, limit: int = 7) -> tuple[list, str | None]:  # type: ignore[no-untyped-def]
    seen = []
    while True:
        page = feed.changes(caller, cursor, limit)
        seen += [(c["position"], c["kind"], c["id"]) for c in page["changes"]]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            return seen, cursor


def test_every_kind_of_record_appears_in_order_with_its_current_state(services: Services) -> None:
    services.scopes.create("acme", "root.acme")
    memory, _ = services.memories.create(ALICE, scope="root.acme", key="k", body="v1")
    services.remember.remember(ALICE, [RememberItem(scope="root.acme", content="An observation.")])
    services.memories.edit(ALICE, memory.memory_id, body="v2")
    page = services.feed.changes(ALICE, None, 100)
    kinds = [(c["kind"], c["record"] is not None) for c in page["changes"]]
    assert [k for k, _ in kinds] == ["scope", "scope", "episode", "memory"]  # root, root.acme, …, the memory last
    assert page["changes"][-1]["record"]["body"] == "v2"
    positions = [(c["position"], c["id"]) for c in page["changes"]]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)


def test_resuming_from_any_cursor_sees_each_later_change_once(services: Services) -> None:
    services.remember.remember(
        ALICE, [RememberItem(scope="root.a", content=f"note {i}", create_scope=True) for i in range(30)]
    )
    everything, _ = read_all(services.feed)
    cursor = None
    for index in range(len(everything)):
        rest, _ = read_all(services.feed, cursor=cursor)
        assert rest == everything[index:]
        cursor = services.feed.changes(ALICE, cursor, 1)["next_cursor"]


def test_tampered_and_foreign_cursors_are_refused(services: Services) -> None:
    services.scopes.create("acme", "root.acme")
    cursor = services.feed.changes(ALICE, None, 1)["next_cursor"]
    assert cursor
    with pytest.raises(InvalidInput, match="another tenant"):
        services.feed.changes(principal("globex", "gina", Role.admin), cursor, 10)
    payload, signature = cursor.split(".")
    with pytest.raises(InvalidInput):
        services.feed.changes(ALICE, payload[:-2] + "AA." + signature, 10)
    with pytest.raises(InvalidInput):
        services.feed.changes(ALICE, "garbage", 10)


def test_a_reader_paging_during_concurrent_writes_sees_every_change_exactly_once(tmp_path: Path) -> None:
    # Given several writers committing at the same time, sharing timestamps, and a reader paging meanwhile
    store = SqliteRecordStore(tmp_path / "feed.db")
    feed = FeedService(store, lambda: b"secret")
    from datetime import UTC, datetime

    from mneme.models import Scope

    now = datetime(2026, 1, 1, tzinfo=UTC)
    root = Scope(
        tenant="acme", scope_id="root", parent_id=None, segment="root", depth=0, created_at=now, updated_at=now
    )
    store.create_scope(root)
    done = threading.Event()

    def writer(n: int) -> None:
        for i in range(150):
            store.create_scope(
                root.model_copy(
                    update={"scope_id": f"w{n}-{i}", "parent_id": "root", "segment": f"w{n}-{i}", "depth": 1}
                )
            )

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    seen: list = []
    cursor = None
    while True:
        page = feed.changes(ALICE, cursor, 13)
        seen += [c["id"] for c in page["changes"]]
        cursor = page["next_cursor"]
        if not page["has_more"] and done.is_set():
            break
        if all(not t.is_alive() for t in threads):
            done.set()
    # Then every scope was seen exactly once
    assert len(seen) == len(set(seen)) == 4 * 150 + 1
