"""One resolver factory and one error mapping for every function.

The route table is enforced (body size, authentication context and role) before Powertools parses
and validates the body: its validation middleware always runs ahead of user middlewares, so the
check lives in `MnemeResolver.resolve`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from mneme import routes
from mneme.errors import (
    Forbidden,
    InvalidInput,
    MethodNotAllowed,
    MnemeError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
)
from mneme.models import Principal, Role
from mneme.observability import logger

MAX_BODY_BYTES = 64 * 1024


def error_response(error: MnemeError) -> Response:
    return Response(status_code=error.status, content_type="application/json", body=json.dumps(error.to_body()))


def principal_from_event(event: dict[str, Any]) -> Principal:
    """The caller, as the authorizer put it in the request context (never from the body)."""
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    if not context.get("tenant"):
        raise Unauthorized("missing credentials")
    roles = [Role(role) for role in str(context.get("roles", "")).split(",") if role]
    return Principal(tenant=context["tenant"], principal=context["principal"], roles=frozenset(roles))


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "loc": [str(part) for part in item.get("loc", ())],
            "message": item.get("msg", ""),
            "type": item.get("type", ""),
        }
        for item in error.errors()
    ]


def admit(event: Mapping[str, Any], max_body: int = MAX_BODY_BYTES) -> Principal | None:
    """Enforce the route table on a raw event: body size, then credentials and role.

    Returns the caller (None on an open route) or raises PayloadTooLarge, Unauthorized, Forbidden.
    """
    body = event.get("body") or ""
    if len(body.encode(errors="surrogatepass")) > max_body:
        raise PayloadTooLarge(f"request body exceeds {max_body} bytes", details={"limit": max_body})
    found = routes.match(str(event.get("httpMethod") or ""), str(event.get("path") or ""))
    if found is None or found[0].role is None:
        return None
    caller = principal_from_event(dict(event))
    if not caller.has(found[0].role):
        raise Forbidden(f"this route needs the {found[0].role.value!r} role")
    return caller


class MnemeResolver(APIGatewayRestResolver):
    """Refuses an oversize body or a missing role before the body is parsed or validated."""

    def __init__(self, max_body: int = MAX_BODY_BYTES) -> None:
        super().__init__(enable_validation=True)
        self.max_body = max_body

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        try:
            admit(event, self.max_body)
        except MnemeError as error:
            logger.info("request refused", extra={"code": error.code, "status": error.status})
            return {
                "statusCode": error.status,
                "multiValueHeaders": {"Content-Type": ["application/json"]},
                "body": json.dumps(error.to_body()),
                "isBase64Encoded": False,
            }
        return super().resolve(event, context)


def build_resolver(max_body: int = MAX_BODY_BYTES) -> APIGatewayRestResolver:
    app = MnemeResolver(max_body)

    def enforce_route(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response:
        caller = admit(app.current_event.raw_event, max_body)  # already admitted; this sets the context
        if caller is not None:
            app.append_context(caller=caller)
            logger.append_keys(tenant=caller.tenant, principal=caller.principal)
        return next_middleware(app)

    app.use(middlewares=[enforce_route])

    @app.exception_handler(MnemeError)
    def on_domain_error(error: MnemeError) -> Response:
        logger.info("request refused", extra={"code": error.code, "status": error.status})
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    def on_invalid_request(error: RequestValidationError) -> Response:
        details = _validation_details(error)
        invalid_json = any(item["type"] == "json_invalid" for item in details)
        message = "the body is not valid JSON" if invalid_json else "the request does not match the schema"
        return error_response(InvalidInput(message, details=details))

    @app.not_found
    def on_not_found(_: Exception) -> Response:
        event = app.current_event
        allowed = routes.allowed_methods(event.path)
        if allowed:
            return error_response(MethodNotAllowed(f"{event.http_method} is not allowed; use {', '.join(allowed)}"))
        return error_response(NotFound(f"no route {event.path}", code="route_not_found"))

    return app


def caller(app: APIGatewayRestResolver) -> Principal:
    principal: Principal = app.context["caller"]
    return principal


def json_response(status: int, body: Any) -> Response:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body, default=str))


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
