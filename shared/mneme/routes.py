"""The route table: the single source for the local server and the CDK API.

Each route names the Lambda function (a module in `functions/`) that serves it and the
least role it needs (None: no authentication).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mneme.models import Role


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str
    role: Role | None

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path) + "$")


R, W, A, ADMIN = Role.reader, Role.writer, Role.approver, Role.admin

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "retrieve", None),
    Route("POST", "/v1/retrieve", "retrieve", R),
    Route("POST", "/v1/remember", "remember", W),
    Route("POST", "/v1/sttp/validate", "remember", R),
    Route("POST", "/v1/recall", "recall", R),
    Route("GET", "/v1/changes", "recall", R),
    Route("POST", "/v1/consolidate", "consolidate", W),
    Route("GET", "/v1/consolidations/{run_id}", "consolidate", R),
    Route("GET", "/v1/scopes", "curate", R),
    Route("POST", "/v1/scopes", "curate", ADMIN),
    Route("POST", "/v1/scopes/rename", "curate", ADMIN),
    Route("DELETE", "/v1/scopes", "curate", ADMIN),
    Route("GET", "/v1/layers", "curate", R),
    Route("PUT", "/v1/layers", "curate", ADMIN),
    Route("POST", "/v1/memories", "curate", W),
    Route("PATCH", "/v1/memories/{memory_id}", "curate", W),
    Route("POST", "/v1/memories/{memory_id}/archive", "curate", W),
    Route("POST", "/v1/memories/{memory_id}/approve", "curate", A),
    Route("POST", "/v1/memories/{memory_id}/reject", "curate", A),
    Route("GET", "/v1/memories/{memory_id}/history", "curate", A),
    Route("GET", "/v1/reviews", "curate", W),
    Route("POST", "/v1/structure/drafts", "curate", A),
    Route("GET", "/v1/structure/drafts/{draft_id}", "curate", A),
    Route("POST", "/v1/structure/drafts/{draft_id}/publish", "curate", A),
    Route("POST", "/v1/keys", "curate", ADMIN),
    Route("GET", "/v1/keys", "curate", ADMIN),
    Route("POST", "/v1/keys/{key_id}/revoke", "curate", ADMIN),
)

FUNCTIONS: tuple[str, ...] = tuple(dict.fromkeys(route.function for route in ROUTES))


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route for a request and its path parameters; None when nothing matches."""
    for route in ROUTES:
        if route.method == method and (found := route.pattern.match(path)):
            return route, found.groupdict()
    return None


def allowed_methods(path: str) -> list[str]:
    return sorted({route.method for route in ROUTES if route.pattern.match(path)})
