"""Helpers for the integration tier: an HTTP client for the local server, handler invocation,
the bundle's opening comment written out by hand, and a snapshot of what a tenant can see."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import requests

from mneme import bootstrap
from mneme.http.routes import Route
from mneme.local.events import LocalContext
from mneme.models import Role

# Written out by hand (not imported from the service) so a change to the contract text fails here.
OPENING = (
    "<!-- mneme bundle for {path}: walked {walk}. At each depth d (root is 0) blocks are emitted "
    "scoped, then layer-wide tagged, then value-targeted tagged, by key; emission order carries no "
    "precedence. Priorities: layer-wide 3d+1, value-targeted 3d+2, scoped 3d+3. A higher priority "
    "overrides a lower one where they conflict; lower-priority guidance still applies elsewhere. "
    "Equal priorities that contradict are a conflict: surface it, do not pick a side. Blocks whose "
    "header ends in '| pending' are unapproved work visible only to their author. -->\n"
)

ROLES_BY_RANK: tuple[Role, ...] = (Role.reader, Role.writer, Role.approver, Role.admin)


def opening(path: str) -> str:
    """The bundle's first line for a canonical path: the walk is every prefix of the path."""
    segments = path.split(".")
    walk = " → ".join(".".join(segments[: i + 1]) for i in range(len(segments)))
    return OPENING.format(path=path, walk=walk)


def bundle(path: str, *blocks: str) -> str:
    """A whole Markdown bundle: the opening comment, then each block separated by a blank line."""
    return "\n".join([opening(path), *blocks])


def block(header: str, body: str) -> str:
    """One block: its header, then its body in a backtick fence longer than any backtick run in it."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"<!-- {header} -->\n{mark}\n{body}\n{mark}\n"


def lower_roles(role: Role) -> list[Role]:
    return list(ROLES_BY_RANK[: ROLES_BY_RANK.index(role)])


# -- local server ----------------------------------------------------------------------------


@dataclass
class Api:
    """A `requests` client for the local server that sends one API key."""

    base: str
    key: str | None = None
    session: requests.Session = field(default_factory=requests.Session)
    timeout: float = 60  # seconds; a loaded CI machine answers sixteen racing remembers slowly, never wrongly

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: str | bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        sent = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        sent.update(headers or {})
        if raw is not None:
            return self.session.request(method, self.base + path, data=raw, headers=sent, timeout=self.timeout)
        data = None if body is None else json.dumps(body)
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        return self.session.request(method, self.base + path, data=data, headers=sent, timeout=self.timeout)

    def as_key(self, key: str | None) -> Api:
        return Api(self.base, key, self.session)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.call("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.call("PUT", path, body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.call("PATCH", path, body, **kw)

    def ok(self, method: str, path: str, body: Any = None, status: int | None = None) -> Any:
        """Call and insist on success; returns the JSON body (or the text of a Markdown answer)."""
        response = self.call(method, path, body)
        expected = status or (201 if response.status_code == 201 else 200)
        assert response.status_code == expected, f"{method} {path}: {response.status_code} {response.text}"
        if response.headers.get("Content-Type", "").startswith("application/json"):
            return response.json()
        return response.text

    def retrieve(self, path: str, *, as_json: bool = False) -> requests.Response:
        headers = {"Accept": "application/json"} if as_json else None
        return self.post("/v1/retrieve", {"path": path}, headers=headers)

    def create_memory(
        self, key: str, body: str, *, scope: str | None = None, tag: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        target = {"scope": scope} if scope is not None else {"tag": tag}
        created: dict[str, Any] = self.ok("POST", "/v1/memories", {"key": key, "body": body, **target, **fields})
        return created


def assert_error(response: requests.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The documented error shape: JSON `{"error": {"code", "message", "details"?}}` with this status."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    assert response.headers.get("Content-Type", "").startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert {"code", "message"} <= set(error) <= {"code", "message", "details"}
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def new_key(tenant: str, principal: str, *roles: Role | str) -> str:
    """A fresh API key secret, created directly through the services."""
    secret, _ = bootstrap.current().keys.create(tenant, principal, list(roles))
    return secret


def fill(route: Route, **params: str) -> str:
    """The route's path with its `{name}` parameters filled in; a parameter not given is an unknown id."""
    return re.sub(r"\{(\w+)\}", lambda found: params.get(found.group(1), "unknown-id"), route.path)


def snapshot(api: Api) -> dict[str, Any]:
    """Everything an admin of the tenant can observe: scopes, layers, keys and the bundle of every leaf.

    A leaf's bundle holds the scoped memories of all its ancestors and the tagged memories of its layers,
    so the leaves together show every visible memory of the tree.
    """
    scopes = api.ok("GET", "/v1/scopes")["scopes"]
    paths = [scope["path"] for scope in scopes]
    leaves = [path for path in paths if not any(other.startswith(path + ".") for other in paths)]
    return {
        "scopes": scopes,
        "layers": api.ok("GET", "/v1/layers"),
        "keys": api.ok("GET", "/v1/keys"),
        "bundles": {path: api.retrieve(path, as_json=True).json() for path in leaves},
    }


def tenant_is_untouched(tenant: str) -> bool:
    """True when the store holds no scope, layer or key for `tenant` (read without creating its root)."""
    store = bootstrap.current().store
    return (
        store.find_child(tenant, None, "root") is None
        and not store.get_layers(tenant)
        and not store.list_api_keys(tenant)
    )


# -- Lambda handlers -------------------------------------------------------------------------


def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
    """Call `functions.<function>.handler` as Lambda would."""
    import importlib

    handler = importlib.import_module(f"functions.{function}").handler
    response: dict[str, Any] = handler(event, LocalContext(function))
    return response


def response_header(response: dict[str, Any], name: str) -> str | None:
    for key, value in {
        **(response.get("headers") or {}),
        **(response.get("multiValueHeaders") or {}),
    }.items():
        if key.lower() == name.lower():
            return value[-1] if isinstance(value, list) else value
    return None
