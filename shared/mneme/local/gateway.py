"""What API Gateway does in front of the functions, for `mneme serve` and the embedded client: match the
route (the one 404 / 405, `routes.resolve`), run the authorizer, then invoke the route's function."""

from __future__ import annotations

import importlib
from typing import Any

from mneme.errors import Unauthorized
from mneme.http import routes
from mneme.local.events import LocalContext, token_event


def function(name: str) -> Any:
    return importlib.import_module(f"functions.{name}").handler


_REFUSALS = {
    "unauthorized": "missing or unknown API key: send 'Authorization: Bearer <key>'",
    "key_revoked": "this API key was revoked",
}


def authorize(route: routes.Route, method: str, path: str, authorization: str | None) -> dict[str, Any] | None:
    """The authorizer's context for a protected route (None on an open one); raises 401 on a Deny, as the
    stack's ACCESS_DENIED gateway response answers (infra/mneme_infra/api.py), with the Deny's reason."""
    if route.role is None:
        return None
    try:
        result = function("authorizer")(token_event(route, method, path, authorization), LocalContext("authorizer"))
    except Exception as e:
        if str(e) == "Unauthorized":  # API Gateway's convention for "no valid credentials"
            raise Unauthorized("missing or unknown API key: send 'Authorization: Bearer <key>'") from None
        raise
    if result["policyDocument"]["Statement"][0]["Effect"] != "Allow":
        reason = result["context"].get("reason", "unauthorized")
        raise Unauthorized(_REFUSALS.get(reason, "unknown or revoked API key"), code=reason)
    return {**result["context"], "principalId": result["principalId"]}


def invoke(route: routes.Route, event: dict[str, Any]) -> dict[str, Any]:
    """Run the route's function; its resolver keeps each thread's request apart (`http.api.MnemeResolver`)."""
    response: dict[str, Any] = function(route.function)(event, LocalContext(route.function))
    return response
