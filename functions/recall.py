"""recall: hybrid ranked search with explain and a context pack."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from mneme import bootstrap
from mneme.http.api import build_resolver, caller
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import QueryLimit
from mneme.services.recall import RecallRequest


def build_app(services: bootstrap.Provide) -> APIGatewayRestResolver:
    """The routes over the services the composition root gives (`bootstrap.current` in Lambda)."""
    app = build_resolver()

    @app.post("/v1/recall")
    def recall(request: Annotated[RecallRequest, Body()]) -> dict[str, Any]:
        response = services().recall.recall(caller(app), request)
        return response.model_dump(mode="json", exclude_none=True)

    @app.get("/v1/changes")
    def changes(
        cursor: Annotated[str | None, Query(max_length=512)] = None, limit: Annotated[QueryLimit, Query()] = 100
    ) -> dict[str, Any]:
        return services().feed.changes(caller(app), cursor, limit)

    return app


app = build_app(bootstrap.current)
handler = lambda_handler(app)
