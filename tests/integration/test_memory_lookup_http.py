"""`GET /v1/memories?scope=&key=`: one memory by its scope and key, over HTTP on both record stores, shown
as retrieve shows it to the caller (its own draft first, else the published memory; never an archived one,
an expired one or another author's draft), the tenant taken from the key, and bad input a clear 4xx."""

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


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        running.admin.ok("POST", "/v1/scopes", {"path": "root.acme.payroll", "parents": True}, 201)
        yield running


def lookup(api: Api, scope: str, key: str) -> Any:
    return api.get(f"/v1/memories?{urlencode({'scope': scope, 'key': key})}")


def found(api: Api, scope: str, key: str) -> dict[str, Any]:
    response = lookup(api, scope, key)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_a_published_memory_is_found_as_a_record_by_any_reader(stack: Served) -> None:
    # Given a published memory with a search text, and a reader's key
    created = stack.admin.create_memory("year-end", "Acme's year end is 31 March.", scope="root.acme.payroll",
                                        search_text="", tags=["finance"])  # fmt: skip
    reader = stack.key("viewer", Role.reader)
    # When the reader looks it up by scope and key
    record = found(reader, "root.acme.payroll", "year-end")
    # Then it is the memory as a record: id, target, key, body, status, version, times, search text
    assert record["memory_id"] == created["memory_id"] and record["target"] == "root.acme.payroll"
    assert (record["key"], record["body"], record["status"], record["version"]) == (
        "year-end", "Acme's year end is 31 March.", "published", 1,
    )  # fmt: skip
    assert record["search_text"] == "" and record["tags"] == ["finance"] and record["kind"] == "scoped"
    assert record["created_at"] == created["created_at"] and record["updated_at"] == created["updated_at"]
    assert record.get("pending_revision") is None
    # And the scope holds the key alone: its parent and other keys do not answer
    assert_error(lookup(reader, "root.acme", "year-end"), 404, "memory_not_found")
    assert_error(lookup(reader, "root.acme.payroll", "year-start"), 404, "memory_not_found")


def test_a_writer_sees_its_own_draft_first_and_nobody_else_sees_it(stack: Served) -> None:
    # Given a writer's draft of a key, then an approver's published memory of the same key beside it
    wendy, oscar = stack.key("wendy", Role.writer), stack.key("oscar", Role.writer)
    draft = wendy.create_memory("payday", "Payday is the 25th (draft).", scope="root.acme.payroll")
    assert draft["status"] == "pending"
    assert_error(lookup(oscar, "root.acme.payroll", "payday"), 404, "memory_not_found")
    assert_error(lookup(stack.admin, "root.acme.payroll", "payday"), 404, "memory_not_found")
    published = stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    # Then the writer finds its draft, everyone else the published memory
    mine = found(wendy, "root.acme.payroll", "payday")
    assert (mine["memory_id"], mine["status"], mine["body"]) == (draft["memory_id"], "pending", draft["body"])
    for other in (oscar, stack.admin, stack.key("viewer", Role.reader)):
        assert found(other, "root.acme.payroll", "payday")["memory_id"] == published["memory_id"]
    # And as retrieve shows it to each of them
    blocks = wendy.retrieve("root.acme.payroll", as_json=True).json()["blocks"]
    assert {b["memory_id"] for b in blocks if b["key"] == "payday"} == {draft["memory_id"], published["memory_id"]}


def test_a_writers_open_revision_of_a_published_memory_comes_with_it_for_that_writer_alone(stack: Served) -> None:
    published = stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    wendy = stack.key("wendy", Role.writer)
    wendy.ok("PATCH", f"/v1/memories/{published['memory_id']}", {"body": "Payday is the 25th."})
    mine = found(wendy, "root.acme.payroll", "payday")
    assert mine["body"] == "Payday is the last Friday." and mine["pending_revision"]["changes"] == {
        "body": "Payday is the 25th."
    }
    assert found(stack.key("oscar", Role.writer), "root.acme.payroll", "payday").get("pending_revision") is None


def test_archived_and_expired_memories_are_not_found(stack: Served) -> None:
    gone = stack.admin.create_memory("old-rule", "An old rule.", scope="root.acme.payroll")
    stack.admin.ok("POST", f"/v1/memories/{gone['memory_id']}/archive")
    assert_error(lookup(stack.admin, "root.acme.payroll", "old-rule"), 404, "memory_not_found")
    until = (stack.clock.now() + timedelta(hours=1)).isoformat()
    stack.admin.create_memory("offer", "Ten per cent off in March.", scope="root.acme.payroll", valid_until=until)
    assert found(stack.admin, "root.acme.payroll", "offer")["key"] == "offer"
    stack.clock.advance(hours=2)
    assert_error(lookup(stack.admin, "root.acme.payroll", "offer"), 404, "memory_not_found")


def test_an_old_path_finds_the_memory_under_its_canonical_path(stack: Served) -> None:
    stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    stack.admin.ok("POST", "/v1/scopes/rename", {"path": "root.acme.payroll", "new_path": "root.acme.wages"})
    assert found(stack.admin, "root.acme.payroll", "payday")["target"] == "root.acme.wages"
    assert found(stack.admin, "root.acme.wages", "payday")["target"] == "root.acme.wages"


def test_the_tenant_is_the_keys_own(stack: Served) -> None:
    # Given a memory of tenant acme, and another tenant with a scope of the same path
    stack.admin.create_memory("payday", "Payday is the last Friday.", scope="root.acme.payroll")
    secret, _ = stack.services.keys.create("globex", "boss", [Role.admin])
    other = stack.admin.as_key(secret)
    assert_error(lookup(other, "root.acme.payroll", "payday"), 404, "scope_not_found")
    other.ok("POST", "/v1/scopes", {"path": "root.acme.payroll", "parents": True}, 201)
    # Then the other tenant never finds acme's memory
    assert_error(lookup(other, "root.acme.payroll", "payday"), 404, "memory_not_found")


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("scope=root.acme.payroll", 400, None),  # no key
        ("key=payday", 400, None),  # no scope
        ("", 400, None),
        ("scope=root.acme.payroll&key=Pay+Day", 400, "invalid_key"),
        ("scope=root.acme.payroll&key=" + "k" * 129, 400, None),
        ("scope=root..payroll&key=payday", 400, None),
        ("scope=Root.Acme&key=payday", 400, None),
        ("scope=root.acme.payroll&key=payday&colour=red", 400, "unknown_parameter"),
        ("scope=root.nowhere&key=payday", 404, "scope_not_found"),
    ],
)
def test_bad_input_is_a_clear_4xx(stack: Served, query: str, status: int, code: str | None) -> None:
    assert_error(stack.admin.get(f"/v1/memories?{query}"), status, code)


def test_a_lookup_needs_a_key(stack: Served) -> None:
    assert_error(stack.admin.as_key(None).get("/v1/memories?scope=root&key=k"), 401)
