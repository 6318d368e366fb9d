"""One OpenAPI document for the whole API: the request side from every function's resolver, the response
side from the typed views (`http.views`) and the error shape, with every status a route can answer."""

from __future__ import annotations

import importlib
import json
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from mneme import __version__
from mneme.http import routes, views
from mneme.http.schemas import MemoryView
from mneme.services.curation.retrieval import Bundle
from mneme.services.recall import RecallResponse
from mneme.services.remember import Remembered

ERROR = "#/components/schemas/ErrorBody"
Success = tuple[int, type[BaseModel] | tuple[type[BaseModel], ...]]

#: Each route's success status and body (a tuple: one of these models).
SUCCESS: dict[tuple[str, str], Success] = {
    ("GET", "/v1/health"): (200, views.Health),
    ("POST", "/v1/retrieve"): (200, Bundle),  # text/markdown by default; this model with Accept: application/json
    ("POST", "/v1/remember"): (201, (Remembered, views.RememberedBatch)),
    ("POST", "/v1/sttp/validate"): (200, views.SttpValidation),
    ("POST", "/v1/recall"): (200, RecallResponse),
    ("GET", "/v1/changes"): (200, views.ChangesPage),
    ("GET", "/v1/episodes"): (200, views.EpisodePage),
    ("GET", "/v1/episodes/{episode_id}"): (200, views.EpisodeRecord),
    ("DELETE", "/v1/episodes/{episode_id}"): (200, views.Forgot),
    ("GET", "/v1/facts"): (200, views.FactPage),
    ("GET", "/v1/facts/{fact_id}"): (200, views.FactRecord),
    ("PATCH", "/v1/facts/{fact_id}"): (200, views.FactRecord),
    ("DELETE", "/v1/facts/{fact_id}"): (200, views.Forgot),
    ("POST", "/v1/consolidate"): (202, views.RunStarted),
    ("GET", "/v1/consolidations"): (200, views.RunList),
    ("GET", "/v1/consolidations/{run_id}"): (200, views.RunView),
    ("GET", "/v1/me"): (200, views.Caller),
    ("GET", "/v1/scopes"): (200, views.ScopeList),
    ("POST", "/v1/scopes"): (201, views.ScopeView),
    ("POST", "/v1/scopes/rename"): (200, (views.ScopeView, views.RenamePreview)),
    ("DELETE", "/v1/scopes"): (200, views.Erasure),
    ("GET", "/v1/scopes/memories"): (200, views.MemoryPage),
    ("GET", "/v1/layers"): (200, views.LayerNames),
    ("PUT", "/v1/layers"): (200, views.LayerNames),
    ("GET", "/v1/memories"): (200, views.MemoryRecord),
    ("POST", "/v1/memories"): (201, views.MemoryRecord),
    ("PATCH", "/v1/memories/{memory_id}"): (200, views.MemoryRecord),
    ("POST", "/v1/memories/{memory_id}/archive"): (200, MemoryView),
    ("POST", "/v1/memories/{memory_id}/approve"): (200, views.MemoryRecord),
    ("POST", "/v1/memories/{memory_id}/reject"): (200, views.MemoryRecord),
    ("GET", "/v1/memories/{memory_id}/history"): (200, views.MemoryHistory),
    ("GET", "/v1/reviews"): (200, views.Reviews),
    ("POST", "/v1/structure/drafts"): (201, views.DraftView),
    ("GET", "/v1/structure/drafts/{draft_id}"): (200, views.DraftView),
    ("POST", "/v1/structure/drafts/{draft_id}/publish"): (200, views.DraftView),
    ("POST", "/v1/structure/drafts/{draft_id}/discard"): (200, views.DraftView),
    ("POST", "/v1/keys"): (201, views.CreatedKey),
    ("GET", "/v1/keys"): (200, views.KeyList),
    ("POST", "/v1/keys/{key_id}/revoke"): (200, views.Revoked),
}
NO_LOOKUP = {
    "/v1/me",
    "/v1/consolidations",
    "/v1/sttp/validate",
    "/v1/layers",
    "/v1/keys",
    "/v1/changes",
}  # nothing to find: no 404
READS = {("POST", "/v1/retrieve"), ("POST", "/v1/recall"), ("POST", "/v1/sttp/validate")}

ERROR_MEANING = {
    400: "invalid input: malformed JSON, a schema violation or a rule of the domain (`details` says which)",
    401: "missing or unknown API key",
    403: "the key lacks the role this route needs",
    404: "a scope, memory, episode, fact, run, draft or key that does not exist or was forgotten (or a path no"
    " route serves)",
    409: "a conflict: it exists already, or a stale version",
    413: "too large: the request body, or content over its limit",
    415: "not JSON: send Content-Type: application/json (or none)",
    429: "throttled: retry later",
    503: "a backing store is unavailable: retry later",
}


def error_statuses(route: routes.Route) -> list[int]:
    statuses = {400, 413, 415}
    if route.role is not None:
        statuses |= {401, 403, 429, 503}
        if route.path not in NO_LOOKUP:
            statuses.add(404)
        if route.method != "GET" and (route.method, route.path) not in READS:
            statuses.add(409)
    return sorted(statuses)


def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    models: set[type[BaseModel]] = {views.ErrorBody}
    for _, body in SUCCESS.values():
        models |= set(body) if isinstance(body, tuple) else {body}
    refs, defs = models_json_schema(
        [(model, "serialization") for model in sorted(models, key=lambda m: m.__name__)],
        ref_template="#/components/schemas/{model}",
    )
    return {model.__name__: ref for (model, _), ref in refs.items()}, defs.get("$defs", {})


def _content(body: type[BaseModel] | tuple[type[BaseModel], ...], refs: dict[str, Any]) -> dict[str, Any]:
    if isinstance(body, tuple):
        return {"application/json": {"schema": {"oneOf": [refs[model.__name__] for model in body]}}}
    return {"application/json": {"schema": refs[body.__name__]}}


def _responses(route: routes.Route, refs: dict[str, Any]) -> dict[str, Any]:
    status, body = SUCCESS[(route.method, route.path)]
    content = _content(body, refs)
    if route.path == "/v1/retrieve":
        content = {"text/markdown": {"schema": {"type": "string"}}, **content}
    responses: dict[str, Any] = {str(status): {"description": HTTPStatus(status).phrase, "content": content}}
    for code in error_statuses(route):
        responses[str(code)] = {
            "description": ERROR_MEANING[code],
            "content": {"application/json": {"schema": {"$ref": ERROR}}},
        }
    return responses


def _optional_body(operation: dict[str, Any]) -> None:
    """A body a route may go without (`Annotated[Model | None, Body()] = None`) is declared optional, never
    nullable: Powertools writes `anyOf [Model, null]`, but a JSON `null` body is refused (400) like any body
    that is not an object; no body at all is what the route takes."""
    for media in (operation.get("requestBody") or {}).get("content", {}).values():
        alternatives = media.get("schema", {}).get("anyOf", [])
        if {"type": "null"} in alternatives:
            (kept,) = [alternative for alternative in alternatives if alternative != {"type": "null"}]
            media["schema"] = kept
            operation["requestBody"]["required"] = False


def document() -> dict[str, Any]:
    merged: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Mneme", "version": __version__, "description": "Long-term memory for AI agents."},
        "paths": {},
        "components": {
            "schemas": {},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer", "description": "Mneme API key"}},
        },
    }
    for name in routes.FUNCTIONS:
        app = importlib.import_module(f"functions.{name}").app
        schema = json.loads(app.get_openapi_json_schema(title="Mneme", version=__version__))
        for path, operations in schema.get("paths", {}).items():
            merged["paths"].setdefault(path, {}).update(operations)
        merged["components"]["schemas"].update(schema.get("components", {}).get("schemas", {}))
    refs, defs = _schemas()
    merged["components"]["schemas"].update(defs)
    for route in routes.ROUTES:
        operation = merged["paths"][route.path][route.method.lower()]
        operation["responses"] = _responses(route, refs)
        _optional_body(operation)
        if route.role is not None:
            operation["security"] = [{"apiKey": []}]
            operation.setdefault("description", f"Needs the {route.role.value!r} role.")
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        merged["components"]["schemas"].pop(unused, None)
    merged["paths"] = dict(sorted(merged["paths"].items()))
    merged["components"]["schemas"] = dict(sorted(merged["components"]["schemas"].items()))
    return merged


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
