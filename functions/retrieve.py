"""retrieve: health and the Markdown bundle of a scope."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from mneme import __version__, bootstrap
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import RetrieveRequest
from mneme.settings import Settings, SqliteIndex, SqliteStore


def build_app(services: bootstrap.Provide) -> APIGatewayRestResolver:
    """The routes over the services the composition root gives (`bootstrap.current` in Lambda)."""
    app = build_resolver()

    @app.get("/v1/health")
    def health() -> dict[str, str]:
        """`ok`, or `degraded` with what is (the embedded engine: an index being rebuilt, an unreadable store
        or cursor key)."""
        problems = degraded(services().settings)
        return {"status": "degraded" if problems else "ok", "version": __version__, **problems}

    @app.post("/v1/retrieve")
    def retrieve(request: Annotated[RetrieveRequest, Body()]) -> Response[Any]:
        bundle = services().retrieval.retrieve(caller(app), request.path)
        if "application/json" in (app.current_event.headers.get("accept") or ""):
            return json_response(200, bundle.model_dump(mode="json"))
        return Response(200, "text/markdown; charset=utf-8", bundle.markdown)

    return app


def degraded(settings: Settings) -> dict[str, str]:
    if not isinstance(settings.store, SqliteStore) or not isinstance(settings.index, SqliteIndex):
        return {}
    from mneme.local.checks import components

    return components(settings.sqlite_path, settings.index_path, bootstrap.cursor_key_file(settings))


app = build_app(bootstrap.current)
handler = lambda_handler(app)
