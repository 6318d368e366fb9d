"""remember: store observations (episodes), single or batch; and STTP validation."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from mneme import bootstrap
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import RememberBatch
from mneme.services.remember import RememberItem

app = build_resolver(max_body=4 * 1024 * 1024)


@app.post("/v1/remember")
def remember(request: Annotated[RememberItem | RememberBatch, Body()]) -> Response[Any]:
    items = request.items if isinstance(request, RememberBatch) else [request]
    results = bootstrap.current().remember.remember(caller(app), items)
    if not isinstance(request, RememberBatch):
        return json_response(201, results[0].model_dump())
    return json_response(
        201, {"episode_ids": [r.episode_id for r in results], "items": [r.model_dump() for r in results]}
    )


handler = lambda_handler(app)
