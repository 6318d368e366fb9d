"""What API Gateway does in front of the functions, for `mneme serve` and the embedded client: match the
route (the one 404 / 405, `routes.resolve`), run the authorizer, then invoke the route's function.

A gateway is handed the services its functions serve (`services`: the composition root's, or a caller's own
built with other adapters), and builds each function from the module's own parts, as Lambda runs it: the
routes (`build_app`) in the decorator stack every HTTP function shares (`lambda_handler`), and the authorizer
over the key lookup of the same store."""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

from mneme import bootstrap
from mneme.errors import Unauthorized
from mneme.http import routes
from mneme.http.lambda_entry import lambda_handler
from mneme.local.events import LocalContext, token_event

if TYPE_CHECKING:
    from collections.abc import Callable

    Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

_REFUSALS = {
    "unauthorized": "missing or unknown API key: send 'Authorization: Bearer <key>'",
    "key_revoked": "this API key was revoked",
}


class Gateway:
    """The route table, the authorizer and the functions over `services`, each function built once."""

    def __init__(self, services: bootstrap.Provide) -> None:
        self.services = services
        self._functions: dict[str, Handler] = {}
        self._building = threading.Lock()

    def function(self, name: str) -> Handler:
        """The function `name` (`functions.<name>`) over this gateway's services, built on first use."""
        with self._building:
            if name not in self._functions:
                self._functions[name] = self._build(name)
            return self._functions[name]

    def _build(self, name: str) -> Handler:
        module = importlib.import_module(f"functions.{name}")
        if name == "authorizer":
            handler: Handler = module.authorizer(*bootstrap.authorizer_over(self.services))
            return handler
        handler = lambda_handler(module.build_app(self.services))
        return handler

    def authorize(
        self, route: routes.Route, method: str, path: str, authorization: str | None
    ) -> dict[str, Any] | None:
        """The authorizer's context for a protected route (None on an open one); raises 401 on a Deny, as the
        stack's ACCESS_DENIED gateway response answers (infra/mneme_infra/api.py), with the Deny's reason."""
        if route.role is None:
            return None
        event = token_event(route, method, path, authorization)
        try:
            result = self.function("authorizer")(event, LocalContext("authorizer"))
        except Exception as e:
            if str(e) == "Unauthorized":  # API Gateway's convention for "no valid credentials"
                raise Unauthorized("missing or unknown API key: send 'Authorization: Bearer <key>'") from None
            raise
        if result["policyDocument"]["Statement"][0]["Effect"] != "Allow":
            reason = result["context"].get("reason", "unauthorized")
            raise Unauthorized(_REFUSALS.get(reason, "unknown or revoked API key"), code=reason)
        return {**result["context"], "principalId": result["principalId"]}

    def invoke(self, route: routes.Route, event: dict[str, Any]) -> dict[str, Any]:
        """Run the route's function; its resolver keeps each thread's request apart (`http.api.MnemeResolver`)."""
        return self.function(route.function)(event, LocalContext(route.function))
