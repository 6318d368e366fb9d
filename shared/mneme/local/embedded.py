"""The SDK's client over the local store in this process: an httpx transport that calls the handlers.

    from mneme.local.embedded import embedded_client
    client = embedded_client(Principal(tenant="default", principal="cli", roles=frozenset({Role.ADMIN})))

Each request goes through the same route table, handlers, validation, roles and error shapes as
`mneme serve`, without a socket: the caller is `principal` (no API key). The CLI and `mneme mcp`
use it when no URL is configured.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import httpx

from mneme import auth, bootstrap
from mneme.errors import MnemeError
from mneme.http import routes
from mneme.local import runtime
from mneme.local.events import proxy_event
from mneme.local.gateway import Gateway
from mneme_sdk import Client

if TYPE_CHECKING:
    from mneme.models import Principal

#: The base URL of an embedded client (nothing listens there: the transport answers in-process).
EMBEDDED_URL = "http://embedded.mneme"


class EmbeddedTransport(httpx.BaseTransport):
    """Answers each request by invoking the route's handler over `services` (the process's unless given)
    with an API Gateway event for `principal`.

    Calls are serialised: each function's resolver keeps the current event on itself.
    """

    def __init__(self, principal: Principal, services: bootstrap.Provide = bootstrap.current) -> None:
        self.principal = principal
        self.gateway = Gateway(services)
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        try:
            route, params = routes.resolve(request.method, path)
        except MnemeError as error:
            return httpx.Response(error.status, json=error.to_body())
        authorizer = None
        if route.role is not None:
            authorizer = {**auth.context_of(self.principal), "principalId": auth.principal_id(self.principal)}
        content = request.read()
        body = content.decode() if content else None
        query = request.url.query.decode()
        headers = {name: value for name, value in request.headers.items() if name != "authorization"}
        event = proxy_event(route, request.method, path, query, headers, body, params, authorizer)
        runtime.configure()
        with self._lock:
            answer = self.gateway.invoke(route, event)
        out = dict(answer.get("headers") or {})
        for name, values in (answer.get("multiValueHeaders") or {}).items():
            out.setdefault(name, values[-1])
        return httpx.Response(int(answer["statusCode"]), headers=out, content=(answer.get("body") or "").encode())


def embedded_client(
    principal: Principal, *, services: bootstrap.Provide = bootstrap.current, max_retries: int = 1
) -> Client:
    """An SDK client over `services` (the process's: the local store at MNEME_HOME, unless given) acting as
    `principal`."""
    transport = EmbeddedTransport(principal, services)
    return Client(EMBEDDED_URL, None, transport=transport, max_retries=max_retries)


__all__ = ["EMBEDDED_URL", "EmbeddedTransport", "embedded_client"]
