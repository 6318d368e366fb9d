"""Layer changes and moves never drop tagged guidance silently: the preview lists every tagged memory that
starts or stops applying to a scope, and publishing does exactly that (both record stores, over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import Api, assert_error
from tests.integration.stacks import STORES, Served, served

SCOPES = ("root.acme.vat", "root.acme.payroll", "root.pennine-joinery.vat", "root.group")


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        admin = running.admin
        for path in SCOPES:
            admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, 201)
        admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
        yield running


def tagged_by_scope(api: Api) -> dict[str, set[str]]:
    """scope_id → ids of the tagged memories its bundle holds (scope ids survive moves)."""
    scopes = api.ok("GET", "/v1/scopes")["scopes"]
    out = {}
    for scope in scopes:
        blocks = api.retrieve(scope["path"], as_json=True).json()["blocks"]
        out[scope["scope_id"]] = {b["memory_id"] for b in blocks if b["kind"] == "tagged"}
    return out


def applied(before: dict[str, set[str]], after: dict[str, set[str]], paths: dict[str, str]) -> set[tuple[str, ...]]:
    changes = set()
    for scope_id in before.keys() & after.keys():
        changes |= {(m, paths[scope_id], "stops") for m in before[scope_id] - after[scope_id]}
        changes |= {(m, paths[scope_id], "starts") for m in after[scope_id] - before[scope_id]}
    return changes


def guidance(admin: Api) -> dict[str, Any]:
    return {
        "acme": admin.create_memory("acme-terms", "Acme pays in 30 days.", tag="clients=acme")["memory_id"],
        "vat": admin.create_memory("flat-rate", "Flat-rate VAT applies.", tag="services=vat")["memory_id"],
        "all-clients": admin.create_memory("tone", "Formal tone.", tag="clients=*")["memory_id"],
    }


def test_renaming_a_layer_with_tagged_memories_needs_a_draft_and_the_draft_keeps_the_guidance(stack: Served) -> None:
    admin = stack.admin
    ids = guidance(admin)
    before = tagged_by_scope(admin)

    refused = admin.put("/v1/layers", {"layers": {"1": "clients", "2": "products"}})

    error = assert_error(refused, 409, "draft_required")
    assert error["details"]["draft_route"] == "POST /v1/structure/drafts"
    assert {(t["memory_id"], t["scope"], t["applies"]) for t in error["details"]["tagged"]} == {
        (ids["vat"], "root.acme.vat", "stops"),
        (ids["vat"], "root.pennine-joinery.vat", "stops"),
    }
    assert tagged_by_scope(admin) == before and admin.ok("GET", "/v1/layers")["layers"] == {
        "1": "clients",
        "2": "services",
    }
    # the operation the error names, as a draft: the memories follow the renamed layer
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": error["details"]["operations"]}, 201)
    assert draft["preview"]["tagged"] == []
    admin.ok(
        "POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": draft["preview"]["fingerprint"]}
    )
    assert tagged_by_scope(admin) == before
    assert "<!-- tagged: products=vat | priority: 8 | key: flat-rate" in admin.ok(
        "POST", "/v1/retrieve", {"path": "root.acme.vat"}
    )


def test_layer_naming_that_moves_no_guidance_applies_at_once(stack: Served) -> None:
    admin = stack.admin
    guidance(admin)

    answer = admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services", "3": "tasks"}})

    assert answer["layers"] == {"1": "clients", "2": "services", "3": "tasks"}
    assert_error(admin.put("/v1/layers", {"layers": {"0": "clients"}}), 400, "invalid_layers")


def test_a_layers_draft_that_drops_a_depth_previews_the_guidance_it_stops_and_does_exactly_that(
    stack: Served,
) -> None:
    admin = stack.admin
    ids = guidance(admin)
    scopes = {s["scope_id"]: s["path"] for s in admin.ok("GET", "/v1/scopes")["scopes"]}
    before = tagged_by_scope(admin)

    draft = admin.ok(
        "POST", "/v1/structure/drafts", {"operations": [{"op": "layers", "layers": {"1": "clients"}}]}, 201
    )
    admin.ok(
        "POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": draft["preview"]["fingerprint"]}
    )

    previewed = {(t["memory_id"], t["scope"], t["applies"]) for t in draft["preview"]["tagged"]}
    assert previewed == {(ids["vat"], "root.acme.vat", "stops"), (ids["vat"], "root.pennine-joinery.vat", "stops")}
    assert applied(before, tagged_by_scope(admin), scopes) == previewed


def test_a_move_previews_every_tagged_memory_that_starts_or_stops_applying_and_publishing_does_exactly_that(
    stack: Served,
) -> None:
    admin = stack.admin
    ids = guidance(admin)
    group = admin.create_memory("group-rule", "Group-wide rule.", tag="services=acme")["memory_id"]
    before = tagged_by_scope(admin)

    operations = [{"op": "move", "path": "root.acme", "new_parent": "root.group"}]
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": operations}, 201)
    published = admin.ok(
        "POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": draft["preview"]["fingerprint"]}
    )

    scopes = {s["scope_id"]: s["path"] for s in admin.ok("GET", "/v1/scopes")["scopes"]}
    previewed = {(t["memory_id"], t["scope"], t["applies"]) for t in draft["preview"]["tagged"]}
    assert previewed == {
        (ids["acme"], "root.group.acme", "stops"),
        (ids["acme"], "root.group.acme.vat", "stops"),
        (ids["acme"], "root.group.acme.payroll", "stops"),
        (ids["vat"], "root.group.acme.vat", "stops"),
        (group, "root.group.acme", "starts"),  # depth 2 is `services` now: services=acme applies below it
        (group, "root.group.acme.vat", "starts"),
        (group, "root.group.acme.payroll", "starts"),
    }  # clients=* still applies: root.group sits at depth 1, as root.acme did
    assert applied(before, tagged_by_scope(admin), scopes) == previewed
    assert published["status"] == "published"
