"""The route table: the single source for the local server and the CDK API.

Each route names the Lambda function (a module in `functions/`) that serves it and the
least role it needs (None: no authentication).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mneme.errors import MethodNotAllowed, NotFound
from mneme.models import Role

KIB = 1024
DEFAULT_MAX_BODY = 64 * KIB
LAMBDA_EVENT = 6 * KIB * KIB  # Lambda's synchronous invoke payload: the proxy event, with the body inside it
# The largest body whose event Lambda still takes however the JSON is written: the event carries the body as a
# JSON string, which escapes each of its quotes and backslashes once more (at most twice its size), beside
# the headers and request context (a 64 KiB allowance). A body past it gets the handler's 413, never the
# gateway's 5xx for an event Lambda refuses (docs/deploy.md 'Request sizes').
MAX_EVENT_BODY = (LAMBDA_EVENT - 64 * KIB) // 2  # 3,112,960 bytes
PARAMETER = r"[A-Za-z0-9._~:@%+=-]+"  # ASCII only: a segment with any other character matches no route


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str
    role: Role | None
    max_body: int = DEFAULT_MAX_BODY  # bytes; a larger body is refused (413) before it is read
    query: tuple[str, ...] = ()  # the query parameters it takes (`name.`: any `name.<key>`); any other is refused (400)

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"\{(\w+)\}", rf"(?P<\1>{PARAMETER})", self.path) + "$")


R, W, A, ADMIN = Role.reader, Role.writer, Role.approver, Role.admin
LISTING = ("scope", "since", "until", "cursor", "limit", "metadata.")  # GET /v1/episodes and /v1/facts

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "retrieve", None),
    Route("POST", "/v1/retrieve", "retrieve", R),
    Route("POST", "/v1/remember", "remember", W, MAX_EVENT_BODY),
    Route("POST", "/v1/sttp/validate", "remember", R),
    Route("POST", "/v1/recall", "recall", R),
    Route("GET", "/v1/changes", "recall", R, query=("cursor", "limit")),
    Route("GET", "/v1/episodes", "records", R, query=(*LISTING, "session_id")),
    Route("GET", "/v1/episodes/{episode_id}", "records", R),
    Route("DELETE", "/v1/episodes/{episode_id}", "records", W, query=("reason",)),
    Route("GET", "/v1/facts", "records", R, query=LISTING),
    Route("GET", "/v1/facts/{fact_id}", "records", R),
    Route("PATCH", "/v1/facts/{fact_id}", "records", A),
    Route("DELETE", "/v1/facts/{fact_id}", "records", A, query=("reason",)),
    Route("POST", "/v1/consolidate", "consolidate", W),
    Route("GET", "/v1/consolidations", "consolidate", R, query=("limit",)),
    Route("GET", "/v1/consolidations/{run_id}", "consolidate", R),
    Route("GET", "/v1/me", "curate", R),
    Route("GET", "/v1/scopes", "curate", R, query=("path", "aliases")),
    Route("POST", "/v1/scopes", "curate", ADMIN),
    Route("POST", "/v1/scopes/rename", "curate", ADMIN),
    Route("DELETE", "/v1/scopes", "curate", ADMIN, query=("path", "dry_run")),
    Route("GET", "/v1/scopes/memories", "curate", R, query=("path", "cursor", "limit")),
    Route("GET", "/v1/layers", "curate", R),
    Route("PUT", "/v1/layers", "curate", ADMIN),
    Route("GET", "/v1/memories", "curate", R, query=("scope", "key")),
    Route("POST", "/v1/memories", "curate", W),
    Route("PATCH", "/v1/memories/{memory_id}", "curate", W),
    Route("POST", "/v1/memories/{memory_id}/archive", "curate", W),
    Route("POST", "/v1/memories/{memory_id}/approve", "curate", A),
    Route("POST", "/v1/memories/{memory_id}/reject", "curate", A),
    Route("GET", "/v1/memories/{memory_id}/history", "curate", A),
    Route("GET", "/v1/reviews", "curate", W, query=("path", "mine")),
    Route("POST", "/v1/structure/drafts", "curate", A),
    Route("GET", "/v1/structure/drafts/{draft_id}", "curate", A),
    Route("POST", "/v1/structure/drafts/{draft_id}/publish", "curate", A),
    Route("POST", "/v1/structure/drafts/{draft_id}/discard", "curate", A),
    Route("POST", "/v1/keys", "curate", ADMIN),
    Route("GET", "/v1/keys", "curate", ADMIN),
    Route("POST", "/v1/keys/{key_id}/revoke", "curate", ADMIN),
)

#: Static files, open like health: the console (docs/console.md; the page asks for a key and sends it only to
#: the API routes above), its icon, and the API document itself (docs/openapi.json, for client generators and
#: API fuzzers). Not part of the API document; served by curate in AWS and by `mneme serve`.
PAGES: tuple[Route, ...] = (
    Route("GET", "/console", "curate", None),
    Route("HEAD", "/console", "curate", None),
    Route("GET", "/console/{asset}", "curate", None),
    Route("GET", "/favicon.ico", "curate", None),
    Route("GET", "/openapi.json", "curate", None),
)

FUNCTIONS: tuple[str, ...] = tuple(dict.fromkeys(route.function for route in ROUTES))


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route for a request and its path parameters; None when nothing matches."""
    for route in ROUTES + PAGES:
        if route.method == method and (found := route.pattern.match(path)):
            return route, found.groupdict()
    return None


def allowed_methods(path: str) -> list[str]:
    return sorted({route.method for route in ROUTES + PAGES if route.pattern.match(path)})


def resolve(method: str, path: str) -> tuple[Route, dict[str, str]]:
    """The route and its path parameters, or the one 404 / 405 every entry point answers."""
    found = match(method, path)
    if found is not None:
        return found
    allowed = allowed_methods(path)
    if allowed:
        raise MethodNotAllowed(
            f"{method} is not allowed on {path}; use {', '.join(allowed)}", details={"allow": allowed}
        )
    raise NotFound(f"no route {path}", code="route_not_found")
