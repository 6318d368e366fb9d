"""Tenant isolation, authentication and the route table's roles, over the local server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mneme import bootstrap
from mneme.http.routes import ROUTES, Route
from mneme.models import Role

from .helpers import Api, assert_error, fill, lower_roles, new_key, snapshot, tenant_is_untouched

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

SECRET = "A-ONLY"  # every body tenant A writes contains this; it must never reach tenant B
AUTHENTICATED = [route for route in ROUTES if route.role is not None]


def route_id(route: Route) -> str:
    return f"{route.method} {route.path}"


# A valid body per route, so a refusal is about the credential or the role, not the input.
VALID_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/retrieve"): {"path": "root"},
    ("POST", "/v1/scopes"): {"path": "root.brand-new"},
    ("POST", "/v1/scopes/rename"): {"path": "root.pennine-joinery", "new_path": "root.renamed"},
    ("PUT", "/v1/layers"): {"layers": {"1": "regions"}},
    ("POST", "/v1/memories"): {"scope": "root", "key": "new-note", "body": "hello"},
    ("PATCH", "/v1/memories/{memory_id}"): {"body": "changed"},
    ("POST", "/v1/keys"): {"principal": "new-bot", "roles": ["reader"]},
}


def valid_body(route: Route) -> dict[str, Any] | None:
    return VALID_BODIES.get((route.method, route.path))


# -- two tenants -----------------------------------------------------------------------------


class Tenants:
    def __init__(self, server: str) -> None:
        self.a = Api(server, new_key("tenant-a", "alice", Role.admin))
        self.b = Api(server, new_key("tenant-b", "bob", Role.admin))
        self.a_reader_key_id = bootstrap.current().keys.create("tenant-a", "reader-bot", [Role.reader])[1].key_id
        a = self.a
        a.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
        a.ok("POST", "/v1/scopes", {"path": "root.pennine-joinery.vat", "parents": True}, status=201)
        self.scoped = a.create_memory("vat-policy", f"{SECRET}: flat-rate scheme.", scope="root.pennine-joinery.vat")
        self.tagged = a.create_memory("flat-rate-rule", f"{SECRET}: check every April.", tag="services=vat")
        self.rooted = a.create_memory("house-style", f"{SECRET}: British English.", scope="root")
        # root.pennine-joinery → root.pennine: the old path is now an alias
        a.ok("POST", "/v1/scopes/rename", {"path": "root.pennine-joinery", "new_path": "root.pennine"})
        self.a_state = snapshot(a)

    def memory_ids(self) -> list[str]:
        return [self.scoped["memory_id"], self.tagged["memory_id"], self.rooted["memory_id"]]

    def assert_a_unchanged(self) -> None:
        assert snapshot(self.a) == self.a_state


@pytest.fixture
def tenants(server: str) -> Tenants:
    return Tenants(server)


A_PATHS = ["root.pennine", "root.pennine.vat", "root.pennine-joinery", "root.pennine-joinery.vat"]


@pytest.mark.parametrize("path", A_PATHS)
def test_tenant_b_cannot_retrieve_or_list_a_scope_by_path_or_alias(tenants: Tenants, path: str) -> None:
    # When tenant B asks for tenant A's scope by its canonical path or its alias
    for as_json in (False, True):
        response = tenants.b.retrieve(path, as_json=as_json)
        # Then it does not exist for B
        assert_error(response, 404, "scope_not_found")
        assert SECRET not in response.text
    assert_error(tenants.b.get(f"/v1/scopes?path={path}"), 404, "scope_not_found")


def test_tenant_b_sees_only_its_own_tree_layers_and_keys(tenants: Tenants) -> None:
    assert [s["path"] for s in tenants.b.ok("GET", "/v1/scopes")["scopes"]] == ["root"]
    assert tenants.b.ok("GET", "/v1/layers") == {"layers": {}}
    keys = tenants.b.ok("GET", "/v1/keys")["keys"]
    assert {(k["tenant"], k["principal"]) for k in keys} == {("tenant-b", "bob")}
    # and its root bundle carries nothing of A's root memory
    assert SECRET not in tenants.b.retrieve("root").text


@pytest.mark.parametrize("path", A_PATHS)
def test_tenant_b_cannot_rename_a_scope(tenants: Tenants, path: str) -> None:
    new_path = ".".join([*path.split(".")[:-1], "stolen"])
    assert_error(tenants.b.post("/v1/scopes/rename", {"path": path, "new_path": new_path}), 404, "scope_not_found")
    tenants.assert_a_unchanged()


def test_tenant_b_cannot_edit_or_archive_a_memory_by_id(tenants: Tenants) -> None:
    for memory_id in tenants.memory_ids():
        # When B archives or edits A's memory by its id
        archived = tenants.b.post(f"/v1/memories/{memory_id}/archive")
        edited = tenants.b.patch(f"/v1/memories/{memory_id}", {"body": "overwritten by B"})
        # Then the memory does not exist for B, and A's data is not echoed back
        for response in (archived, edited):
            assert_error(response, 404, "memory_not_found")
            assert SECRET not in response.text
    # and A's memories are untouched
    tenants.assert_a_unchanged()


def test_tenant_b_cannot_attach_memories_to_a_scope(tenants: Tenants) -> None:
    for path in A_PATHS:
        response = tenants.b.post("/v1/memories", {"scope": path, "key": "planted", "body": "from B"})
        assert_error(response, 404, "scope_not_found")
    # A tag needs B's own layers: A's layer names mean nothing to B
    assert_error(
        tenants.b.post("/v1/memories", {"tag": "services=vat", "key": "planted", "body": "from B"}),
        400,
        "unknown_layer",
    )
    tenants.assert_a_unchanged()


def test_the_same_paths_and_layers_in_tenant_b_show_only_b_data(tenants: Tenants) -> None:
    # Given tenant B builds the same tree and layer names as A
    b = tenants.b
    b.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
    b.ok("POST", "/v1/scopes", {"path": "root.pennine-joinery.vat", "parents": True}, status=201)
    b.create_memory("vat-policy", "B's own policy.", scope="root.pennine-joinery.vat")
    # When B retrieves the path A renamed away from
    markdown = b.retrieve("root.pennine-joinery.vat").text
    # Then B gets B's bundle only: not A's scoped, tagged (services=vat) or root memories
    assert "B's own policy." in markdown
    assert SECRET not in markdown
    assert "memory_id" not in markdown
    tenants.assert_a_unchanged()


def test_tenant_b_cannot_revoke_or_list_a_keys(tenants: Tenants) -> None:
    key_id = tenants.a_reader_key_id
    assert_error(tenants.b.post(f"/v1/keys/{key_id}/revoke"), 404, "key_not_found")
    assert key_id not in tenants.b.get("/v1/keys").text
    # A's key is still live
    keys = {k["key_id"]: k for k in tenants.a.ok("GET", "/v1/keys")["keys"]}
    assert keys[key_id]["revoked_at"] is None


# -- authentication --------------------------------------------------------------------------


@pytest.fixture
def revoked_key(server: str) -> str:
    keys = bootstrap.current().keys
    keys.create("tenant-a", "successor", [Role.admin])  # a tenant's last admin key cannot be revoked
    secret, record = keys.create("tenant-a", "former", [Role.admin])
    keys.revoke("tenant-a", record.key_id)
    return secret


@pytest.mark.parametrize("route", AUTHENTICATED, ids=route_id)
def test_every_authenticated_route_refuses_bad_credentials(server: str, revoked_key: str, route: Route) -> None:
    new_key("tenant-a", "alice", Role.admin)  # a real key exists; it is just not the one sent
    path = fill(route, memory_id="m-1", key_id="k-1")
    body = valid_body(route)
    cases: list[tuple[dict[str, str], int, str]] = [
        ({}, 401, "unauthorized"),  # no key
        ({"Authorization": "Bearer mnk_not-a-real-key"}, 401, "unauthorized"),  # wrong key
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401, "unauthorized"),  # not a bearer token
        ({"Authorization": f"Bearer {revoked_key}"}, 401, "key_revoked"),  # revoked key (a Deny in AWS: 401)
    ]
    for headers, status, code in cases:
        response = Api(server).call(route.method, path, body, headers=headers)
        assert_error(response, status, code)
    # and none of them reached a function: the tenant holds only the root its key creation made
    store = bootstrap.current().store
    root = store.find_child("tenant-a", None, "root")
    assert root is not None and store.list_children("tenant-a", root.scope_id) == []
    assert store.list_memories("tenant-a") == []
    assert store.list_recent_episodes("tenant-a", datetime(2000, 1, 1, tzinfo=UTC), 1) == []


def test_a_revoked_key_stops_working_at_once(server: str) -> None:
    admin = Api(server, new_key("tenant-a", "alice", Role.admin))
    created = admin.ok("POST", "/v1/keys", {"principal": "bot", "roles": ["reader"]})
    bot = admin.as_key(created["api_key"])
    assert bot.retrieve("root").status_code == 200
    # When the admin revokes it
    assert admin.ok("POST", f"/v1/keys/{created['key_id']}/revoke") == {
        "key_id": created["key_id"],
        "revoked": True,
    }
    # Then the next request with it is refused
    assert_error(bot.retrieve("root"), 401, "key_revoked")


def test_the_last_admin_key_of_a_tenant_cannot_be_revoked(server: str) -> None:
    # Given a tenant whose only admin key is the one calling (as `mneme serve`'s first key is)
    admin = Api(server, new_key("tenant-a", "alice", Role.admin))
    own = admin.ok("GET", "/v1/keys")["keys"][0]["key_id"]
    # Then revoking it is refused, and the key still works
    refused = admin.call("POST", f"/v1/keys/{own}/revoke")
    assert_error(refused, 409, "last_admin_key")
    assert admin.ok("GET", "/v1/me")["principal"] == "alice"
    # When another admin key exists, the first one can go
    other = admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "bob", "roles": ["admin"]})["api_key"])
    assert admin.ok("POST", f"/v1/keys/{own}/revoke")["revoked"] is True
    # And then bob's key is the last one: refused too
    bobs = next(k["key_id"] for k in other.ok("GET", "/v1/keys")["keys"] if k["principal"] == "bob")
    assert_error(other.call("POST", f"/v1/keys/{bobs}/revoke"), 409, "last_admin_key")


# -- roles -----------------------------------------------------------------------------------


class Roles:
    """One tenant with a key per role, a writer's pending memory and a victim key to revoke."""

    def __init__(self, server: str) -> None:
        self.api = {role: Api(server, new_key("tenant-a", role.value, role)) for role in Role}
        admin = self.api[Role.admin]
        admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients"}})
        admin.ok("POST", "/v1/scopes", {"path": "root.pennine-joinery", "parents": True}, status=201)
        self.memory_id = self.api[Role.writer].create_memory("draft", "Writer's draft.", scope="root")["memory_id"]
        self.victim_key_id = bootstrap.current().keys.create("tenant-a", "victim", [Role.reader])[1].key_id

    def state(self) -> dict[str, Any]:
        """What the admin sees, plus the writer's own view (the pending memory is visible only there)."""
        return {**snapshot(self.api[Role.admin]), "writer": self.api[Role.writer].retrieve("root").text}

    def path(self, route: Route) -> str:
        return fill(route, memory_id=self.memory_id, key_id=self.victim_key_id)


@pytest.mark.parametrize("route", AUTHENTICATED, ids=route_id)
def test_every_route_refuses_a_key_with_a_lower_role(server: str, route: Route) -> None:
    assert route.role is not None
    given = Roles(server)
    before = given.state()
    # When each lower role calls the route with a valid request
    for role in lower_roles(route.role):
        response = given.api[role].call(route.method, given.path(route), valid_body(route))
        # Then it is forbidden, and names the role it needs
        error = assert_error(response, 403, "forbidden")
        assert route.role.value in error["message"]
    # and nothing changed
    assert given.state() == before
    # while the role the route names is let through (whatever the outcome, not an auth refusal)
    allowed = given.api[route.role].call(route.method, given.path(route), valid_body(route))
    assert allowed.status_code not in (401, 403) and allowed.status_code < 500, allowed.text


def test_the_documented_role_examples(server: str) -> None:
    given = Roles(server)
    before = given.state()
    reader, writer = given.api[Role.reader], given.api[Role.writer]
    # A reader cannot write memories
    assert_error(reader.post("/v1/memories", {"scope": "root", "key": "x", "body": "x"}), 403, "forbidden")
    # A writer cannot define layers, create scopes or make keys
    assert_error(writer.put("/v1/layers", {"layers": {"1": "regions"}}), 403, "forbidden")
    assert_error(writer.post("/v1/scopes", {"path": "root.x"}), 403, "forbidden")
    assert_error(writer.post("/v1/keys", {"principal": "sneaky", "roles": ["admin"]}), 403, "forbidden")
    assert given.state() == before


def test_a_role_refusal_comes_before_body_validation(server: str) -> None:
    # A reader sending garbage to a writer route learns only that it lacks the role
    reader = Roles(server).api[Role.reader]
    assert_error(reader.post("/v1/memories", raw="{not json"), 403, "forbidden")
    assert_error(reader.post("/v1/memories", {"unknown": 1}), 403, "forbidden")


# -- the tenant comes from the key, never from the body --------------------------------------


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_a_body_cannot_choose_the_tenant(server: str, route: Route) -> None:
    given = Roles(server)
    admin = given.api[Role.admin]
    before = given.state()
    body = {**(valid_body(route) or {}), "tenant": "tenant-b"}
    # When the admin of tenant A names tenant B in the body
    response = admin.call(route.method, given.path(route), body)
    if route.method == "GET":
        # Then a read ignores the body: the answer is A's, as without it
        plain = admin.call(route.method, given.path(route))
        assert (response.status_code, response.json()) == (plain.status_code, plain.json())
    else:
        # Then a write is refused as invalid input
        error = assert_error(response, 400)
        if valid_body(route) is not None:  # the rest of the body is valid: the tenant field is the reason
            assert error["code"] == "invalid_input"
            assert [item["loc"][-1] for item in error["details"]] == ["tenant"]
    # and nothing was written to either tenant
    assert given.state() == before
    assert tenant_is_untouched("tenant-b")
