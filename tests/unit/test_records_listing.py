"""Listing episodes page by page: newest remembered first, the turns of one call by their place in it (the last
first), whatever the store's page size, the scan's bound, the filter or the page's limit."""

from __future__ import annotations

import pytest

from mneme.bootstrap import Services
from mneme.models import Role
from mneme.services import records
from mneme.services.records import Listing
from mneme.services.remember import RememberItem
from tests.conftest import FixedClock, principal

ALICE = principal("acme", "alice", Role.admin)


def remember_calls(services: Services, clock: FixedClock) -> list[tuple[str, int]]:
    """Calls of 1, 9, 1, 12 and 4 turns at one time each (a call's turns share their created_at): every
    turn's (id, n), n counting turns in the order given; every third turn says `even`-ness in metadata."""
    given: list[tuple[str, int]] = []
    for size in (1, 9, 1, 12, 4):
        clock.advance(seconds=1)
        first = len(given)
        items = [
            RememberItem(scope="root.chat", content=f"turn {first + i}", metadata={"third": (first + i) % 3 == 0},
                         create_scope=True)
            for i in range(size)
        ]  # fmt: skip
        ids = [r.episode_id for r in services.remember.remember(ALICE, items)]
        given += [(episode_id, first + i) for i, episode_id in enumerate(ids)]
    return given


def listed(services: Services, limit: int, **fields: object) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(100):
        page = services.records.list_episodes(ALICE, Listing(scope="root.chat", cursor=cursor, limit=limit, **fields))  # type: ignore[arg-type]
        seen += [e["id"] for e in page["episodes"]]
        assert page["has_more"] == (page["next_cursor"] is not None)
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("limit", [1, 2, 5, 13, 200])
@pytest.mark.parametrize(("page", "scan"), [(200, 2000), (4, 2000), (3, 7)])
def test_pages_list_every_turn_once_in_the_order_given_newest_first(
    services: Services, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, limit: int, page: int, scan: int
) -> None:
    # Given five calls whose turns share their call's time, and a store read `page` records at a time
    given = remember_calls(services, clock)
    monkeypatch.setattr(records, "SCAN_PAGE", page)
    monkeypatch.setattr(records, "MAX_SCAN", scan)
    newest_first = [episode_id for episode_id, _ in reversed(given)]
    # Then every page, however cut, continues the one order: the last call first, each call's last turn first
    assert listed(services, limit) == newest_first
    # And a sparse filter keeps that order and skips the rest
    thirds = [episode_id for episode_id, n in reversed(given) if n % 3 == 0]
    assert listed(services, limit, metadata={"third": [True]}) == thirds


def test_an_episode_list_shows_each_turns_place(services: Services, clock: FixedClock) -> None:
    given = remember_calls(services, clock)
    page = services.records.list_episodes(ALICE, Listing(scope="root.chat", limit=200))
    places = {e["id"]: e["sequence"] for e in page["episodes"]}
    assert places[given[10][0]] == 0 and places[given[2][0]] == 1  # turn 10 opens its call, turn 2 is second
