"""What API Gateway does in front of the functions, for `mneme serve` and the embedded client: match the
route (the one 404 / 405, `routes.resolve`), run the authorizer, then invoke the route's function."""

from __future__ import annotations

import importlib
import importlib.util
import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mneme import routes
from mneme.errors import Forbidden, MnemeError, Unauthorized
from mneme.local.events import LocalContext, token_event


def function(name: str) -> Any:
    return importlib.import_module(f"functions.{name}").handler


def error_response(error: MnemeError) -> dict[str, Any]:
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(error.to_body()),
    }


def authorize(route: routes.Route, method: str, path: str, authorization: str | None) -> dict[str, Any] | None:
    """The authorizer's context for a protected route (None on an open one); raises 401 / 403."""
    if route.role is None:
        return None
    try:
        result = function("authorizer")(token_event(route, method, path, authorization), LocalContext("authorizer"))
    except Exception as e:
        if str(e) == "Unauthorized":  # API Gateway's convention for "no valid credentials"
            raise Unauthorized("missing or unknown API key: send 'Authorization: Bearer <key>'") from None
        raise
    if result["policyDocument"]["Statement"][0]["Effect"] != "Allow":
        raise Forbidden("this API key is not allowed", code=result["context"].get("reason", "forbidden"))
    return {**result["context"], "principalId": result["principalId"]}


# A Powertools resolver keeps the request it is serving on itself (`app.current_event`), so one
# resolver must not serve two requests at once. Concurrent requests to a function each borrow a
# handler: the function module's own when it is free, else an independent copy of the module
# (its own resolver), kept for reuse.
_IDLE: dict[str, queue.SimpleQueue[Any]] = {}
_IDLE_LOCK = threading.Lock()


def _module_copy(name: str) -> Any:
    spec = importlib.util.find_spec(f"functions.{name}")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


@contextmanager
def _borrowed(name: str) -> Iterator[Any]:
    with _IDLE_LOCK:
        idle = _IDLE.get(name)
        if idle is None:
            idle = _IDLE[name] = queue.SimpleQueue()
            idle.put(function(name))
    try:
        handler = idle.get_nowait()
    except queue.Empty:
        handler = _module_copy(name)
    try:
        yield handler
    finally:
        idle.put(handler)


def invoke(route: routes.Route, event: dict[str, Any]) -> dict[str, Any]:
    with _borrowed(route.function) as handler:
        response: dict[str, Any] = handler(event, LocalContext(route.function))
    return response
