"""`GET /v1/scopes/memories?path=&cursor=&limit=`: the scoped memories of a scope and every scope under it,
a page at a time, over HTTP on both record stores: records with their scope path, by scope path, key and id,
shown as retrieve shows them to the caller (published ones and its own drafts, its open edit of one; never an
archived one, an expired one or another author's draft), a signed cursor, the tenant taken from the key, and
bad input a clear 4xx."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from mneme.models import Role
from tests.integration.helpers import Api, assert_error
from tests.integration.stacks import STORES, Served, served

SCOPES = ("root.acme", "root.acme.payroll", "root.acme.payroll.uk", "root.acme.sales", "root.globex")


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        for path in SCOPES:
            running.admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, 201)
        yield running


def listing(api: Api, path: str, **query: Any) -> Any:
    return api.get(f"/v1/scopes/memories?{urlencode({'path': path, **query})}")


def page(api: Api, path: str, **query: Any) -> dict[str, Any]:
    response = listing(api, path, **query)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def every(api: Api, path: str, limit: int) -> list[list[dict[str, Any]]]:
    """Each page of the listing, following `next_cursor` to the end."""
    pages, cursor = [], None
    while True:
        answer = page(api, path, limit=limit, **({"cursor": cursor} if cursor else {}))
        pages.append(answer["memories"])
        assert answer["has_more"] is (answer["next_cursor"] is not None)
        if answer["next_cursor"] is None:
            return pages
        cursor = answer["next_cursor"]


def test_the_memories_of_a_subtree_come_as_records_in_order_a_page_at_a_time(stack: Served) -> None:
    # Given memories in a scope, in scopes under it, beside it and above it
    made = {}
    for scope, key in [("root.acme.payroll", "payday"), ("root.acme.payroll.uk", "tax-year"), ("root.acme", "name"),
                       ("root.acme.payroll", "bonus"), ("root.acme.sales", "quota"), ("root.globex", "name"),
                       ("root.acme.payroll.uk", "holidays")]:  # fmt: skip
        made[(scope, key)] = stack.admin.create_memory(key, f"{key} in {scope}.", scope=scope, tags=["t"])
    reader = stack.key("viewer", Role.reader)
    # When a reader lists root.acme.payroll two at a time
    pages = every(reader, "root.acme.payroll", limit=2)
    # Then it gets the memories of that scope and the scopes under it, by scope path and key, in pages of two
    listed = [record for records in pages for record in records]
    assert [len(records) for records in pages] == [2, 2]
    assert [(r["target"], r["key"]) for r in listed] == [
        ("root.acme.payroll", "bonus"), ("root.acme.payroll", "payday"),
        ("root.acme.payroll.uk", "holidays"), ("root.acme.payroll.uk", "tax-year"),
    ]  # fmt: skip
    # And each as the memory routes show it
    record = listed[1]
    created = made[("root.acme.payroll", "payday")]
    assert record["memory_id"] == created["memory_id"] and record["body"] == "payday in root.acme.payroll."
    assert (record["status"], record["version"], record["kind"], record["tags"]) == ("published", 1, "scoped", ["t"])
    assert record["created_at"] == created["created_at"] and record.get("pending_revision") is None
    # And the whole listing in one page is the same, the default page taking them all
    assert page(reader, "root.acme.payroll")["memories"] == listed
    whole = page(reader, "root.acme", limit=200)
    assert [(r["target"], r["key"]) for r in whole["memories"]][:1] == [("root.acme", "name")]
    assert len(whole["memories"]) == 6 and whole["has_more"] is False and whole["next_cursor"] is None
    # And an empty scope lists nothing
    stack.admin.ok("POST", "/v1/scopes", {"path": "root.empty"}, 201)
    assert page(reader, "root.empty") == {"memories": [], "next_cursor": None, "has_more": False}


def test_what_is_listed_is_what_retrieve_shows_the_caller(stack: Served) -> None:
    # Given a writer's draft, another writer's draft, a published memory the first writer has an open edit
    # of, an archived memory and one that expires
    wendy, oscar = stack.key("wendy", Role.writer), stack.key("oscar", Role.writer)
    mine = wendy.create_memory("draft", "Wendy's draft.", scope="root.acme.payroll")
    oscar.create_memory("other", "Oscar's draft.", scope="root.acme.payroll")
    published = stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    wendy.ok("PATCH", f"/v1/memories/{published['memory_id']}", {"body": "Payday is the 25th."})
    gone = stack.admin.create_memory("old", "An old rule.", scope="root.acme.payroll")
    stack.admin.ok("POST", f"/v1/memories/{gone['memory_id']}/archive")
    until = (stack.clock.now() + timedelta(hours=1)).isoformat()
    stack.admin.create_memory("offer", "Ten per cent off.", scope="root.acme.payroll.uk", valid_until=until)
    # Then each caller lists published memories and its own drafts, its open edit with the memory it changes
    wendys = {r["key"]: r for r in page(wendy, "root.acme")["memories"]}
    assert sorted(wendys) == ["draft", "offer", "payday"]
    assert wendys["draft"]["memory_id"] == mine["memory_id"] and wendys["draft"]["status"] == "pending"
    assert wendys["payday"]["body"] == "Payday is the last Friday."
    assert wendys["payday"]["pending_revision"]["changes"] == {"body": "Payday is the 25th."}
    oscars = {r["key"]: r for r in page(oscar, "root.acme")["memories"]}
    assert sorted(oscars) == ["offer", "other", "payday"] and oscars["payday"].get("pending_revision") is None
    assert sorted(r["key"] for r in page(stack.admin, "root.acme")["memories"]) == ["offer", "payday"]
    # And the same keys as retrieve shows each of them, scope by scope
    for api in (wendy, oscar, stack.admin):
        shown = {b["key"] for b in api.retrieve("root.acme.payroll", as_json=True).json()["blocks"]}
        listed = page(api, "root.acme.payroll")["memories"]
        assert shown == {r["key"] for r in listed if r["target"] == "root.acme.payroll"}
    # And an expired memory is no longer listed
    stack.clock.advance(hours=2)
    assert sorted(r["key"] for r in page(stack.admin, "root.acme")["memories"]) == ["payday"]


def test_the_cursor_is_signed_for_its_tenant_and_its_listing(stack: Served) -> None:
    for i in range(3):
        stack.admin.create_memory(f"k{i}", f"Rule {i}.", scope="root.acme.payroll")
    cursor = page(stack.admin, "root.acme", limit=1)["next_cursor"]
    assert [r["key"] for r in page(stack.admin, "root.acme", limit=1, cursor=cursor)["memories"]] == ["k1"]
    # A cursor altered, used for another scope's listing or by another tenant is refused
    payload, _, signature = cursor.partition(".")
    forged = f"{payload[:-2]}{'AA' if payload[-2:] != 'AA' else 'BB'}.{signature}"
    assert_error(listing(stack.admin, "root.acme", cursor=forged), 400, "invalid_cursor")
    assert_error(listing(stack.admin, "root.acme", cursor="not-a-cursor"), 400, "invalid_cursor")
    assert_error(listing(stack.admin, "root.acme.payroll", cursor=cursor), 400, "invalid_cursor")
    secret, _ = stack.services.keys.create("globex", "boss", [Role.admin])
    other = stack.admin.as_key(secret)
    other.ok("POST", "/v1/scopes", {"path": "root.acme", "parents": True}, 201)
    assert_error(listing(other, "root.acme", cursor=cursor), 400, "invalid_cursor")


def test_the_tenant_is_the_keys_own(stack: Served) -> None:
    stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    secret, _ = stack.services.keys.create("globex", "boss", [Role.admin])
    other = stack.admin.as_key(secret)
    assert_error(listing(other, "root.acme.payroll"), 404, "scope_not_found")
    other.ok("POST", "/v1/scopes", {"path": "root.acme.payroll", "parents": True}, 201)
    assert page(other, "root")["memories"] == []


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("", 400, None),  # no path
        ("path=", 400, None),
        ("path=root..payroll", 400, None),
        ("path=Root.Acme", 400, None),
        ("path=root.acme&limit=0", 400, None),
        ("path=root.acme&limit=201", 400, None),
        ("path=root.acme&limit=5.0", 400, None),
        ("path=root.acme&cursor=" + "c" * 513, 400, None),
        ("path=root.acme&colour=red", 400, "unknown_parameter"),
        ("path=root.nowhere", 404, "scope_not_found"),
    ],
)
def test_bad_input_is_a_clear_4xx(stack: Served, query: str, status: int, code: str | None) -> None:
    assert_error(stack.admin.get(f"/v1/scopes/memories?{query}"), status, code)


def test_a_listing_needs_a_key(stack: Served) -> None:
    assert_error(stack.admin.as_key(None).get("/v1/scopes/memories?path=root"), 401)
