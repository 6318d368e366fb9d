"""Another writer's unapproved work does not show through the memory API, on both record stores: a key held
only by someone else's pending draft is free to the caller (its own draft), and another author's rejected or
withdrawn memory answers exactly what an unknown id answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import Api, assert_error
from tests.integration.stacks import STORES, Served, served

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        running.admin.ok("POST", "/v1/scopes", {"path": "root.acme", "parents": True}, 201)
        yield running


def draft(api: Api, key: str, body: str = "Unapproved guidance.") -> Any:
    return api.ok("POST", "/v1/memories", {"scope": "root.acme", "key": key, "body": body}, 201)


def test_a_key_held_by_another_writers_draft_answers_like_a_fresh_key(stack: Served) -> None:
    wendy, oscar = stack.key("wendy", "writer"), stack.key("oscar", "writer")
    held = draft(wendy, "vat-rule")
    fresh = oscar.post("/v1/memories", {"scope": "root.acme", "key": "fresh-key", "body": "Mine."})
    taken = oscar.post("/v1/memories", {"scope": "root.acme", "key": "vat-rule", "body": "Mine."})
    assert (taken.status_code, fresh.status_code) == (201, 201), taken.text
    mine = taken.json()
    assert mine["status"] == "pending" and mine["memory_id"] != held["memory_id"]
    # The same author twice is a conflict: that one is the caller's own work
    assert_error(oscar.post("/v1/memories", {"scope": "root.acme", "key": "vat-rule", "body": "Again."}), 409,
                 "memory_exists")  # fmt: skip
    # Each author sees only its own draft in the bundle
    assert "Mine." in oscar.retrieve("root.acme").text and "Unapproved" not in oscar.retrieve("root.acme").text
    # The first approval publishes the key; the second draft over it is then a conflict
    approver = stack.key("april", "approver")
    approver.ok("POST", f"/v1/memories/{held['memory_id']}/approve", {})
    assert_error(approver.post(f"/v1/memories/{mine['memory_id']}/approve", {}), 409, "memory_exists")
    # And once a key is published, a new draft of it is refused
    assert_error(stack.key("pat", "writer").post("/v1/memories", {"scope": "root.acme", "key": "vat-rule",
                 "body": "Late."}), 409, "memory_exists")  # fmt: skip


@pytest.mark.parametrize("how", ["rejected", "withdrawn"])
def test_another_authors_rejected_or_withdrawn_memory_answers_like_an_unknown_id(stack: Served, how: str) -> None:
    wendy, oscar = stack.key("wendy", "writer"), stack.key("oscar", "writer")
    memory_id = draft(wendy, "draft")["memory_id"]
    if how == "rejected":
        stack.key("april", "approver").ok("POST", f"/v1/memories/{memory_id}/reject", {"reason": "no"})
    else:
        wendy.ok("POST", f"/v1/memories/{memory_id}/archive", {})
    for method, suffix, body in (("PATCH", "", {"body": "x"}), ("POST", "/archive", {})):
        hidden = oscar.call(method, f"/v1/memories/{memory_id}{suffix}", body)
        unknown = oscar.call(method, f"/v1/memories/{UNKNOWN}{suffix}", body)
        assert hidden.status_code == unknown.status_code == 404, (method, suffix, hidden.text)
        assert hidden.json()["error"]["code"] == unknown.json()["error"]["code"]
