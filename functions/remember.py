"""remember: store observations (episodes), single or batch; and STTP validation."""

from dataclasses import asdict
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from mneme import bootstrap, sttp
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import RememberBatch, RememberBody
from mneme.services.remember import RememberItem


class ValidateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=1024 * 1024)
    profile: Literal["strict", "tolerant"] = "strict"


def build_app(services: bootstrap.Provide) -> APIGatewayRestResolver:
    """The routes over the services the composition root gives (`bootstrap.current` in Lambda)."""
    app = build_resolver()

    @app.post("/v1/remember")
    def remember(request: Annotated[RememberBody, Body()]) -> Response[Any]:
        if isinstance(request, RememberItem):
            return json_response(201, services().remember.remember(caller(app), [request])[0].model_dump())
        items = request.items if isinstance(request, RememberBatch) else request.items()
        results = services().remember.remember(caller(app), items)
        return json_response(
            201, {"episode_ids": [r.episode_id for r in results], "items": [r.model_dump() for r in results]}
        )

    app.post("/v1/sttp/validate")(validate_sttp)
    return app


def validate_sttp(request: Annotated[ValidateRequest, Body()]) -> dict[str, Any]:
    """Diagnostics for an STTP node and, when it is recoverable, its canonical (strict-valid) form."""
    result = sttp.parse(request.text, request.profile)
    return {
        "ok": result.ok,
        "strict_valid": result.strict_valid,
        "profile": request.profile,
        "diagnostics": [asdict(d) for d in result.diagnostics],
        "canonical": sttp.render(result.node) if result.node is not None else None,
    }


app = build_app(bootstrap.current)
handler = lambda_handler(app)
