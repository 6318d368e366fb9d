"""One resolver factory and one error mapping for every function.

Every request is admitted (route, role, size, media type, JSON: see `admission`) before Powertools parses
and validates the body: its validation middleware always runs ahead of user middlewares, so the check
lives in `MnemeResolver.resolve`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from mneme.errors import InvalidInput, MethodNotAllowed, MnemeError, NotFound, PayloadTooLarge
from mneme.http.admission import admit
from mneme.models import Principal
from mneme.observability import logger

TOO_LARGE = {"body_too_large", "query_too_large"}  # validation errors that are a size limit on content: 413, not 400


def error_response(error: MnemeError) -> Response[str]:
    return Response(status_code=error.status, content_type="application/json", body=json.dumps(error.to_body()))


def proxy_error(error: MnemeError) -> dict[str, Any]:
    """An error as a Lambda proxy response (for answers given before the resolver runs); a 405 names the
    methods the path takes in its `Allow` header too."""
    headers = {"Content-Type": ["application/json"]}
    if isinstance(error, MethodNotAllowed) and isinstance(error.details, dict) and error.details.get("allow"):
        headers["Allow"] = [", ".join(error.details["allow"])]
    return {
        "statusCode": error.status,
        "multiValueHeaders": headers,
        "body": json.dumps(error.to_body()),
        "isBase64Encoded": False,
    }


def unexpected(error: BaseException, request_id: str | None) -> MnemeError:
    """An error no handler expected, as the 5xx to answer: logged at ERROR with its traceback and the
    request id, which the answer carries (`details.request_id`) so that a report can be matched to the log."""
    answer = MnemeError("internal error", details={"request_id": request_id})
    logger.error(
        f"{answer.status} {answer.code}: {type(error).__name__}: {error}",
        exc_info=error,
        extra={"request_id": request_id, "code": answer.code, "status": answer.status},
    )
    return answer


def _validation_details(error: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "loc": [str(part) for part in item.get("loc", ())],
            "message": item.get("msg", ""),
            "type": item.get("type", ""),
        }
        for item in error.errors()
    ]


class MnemeResolver(APIGatewayRestResolver):
    """Admits each request once (see `admission.admit`) before the body is parsed or validated.

    Powertools keeps the request being served on the class (`BaseRouter.current_event`, shared by every
    resolver of the process) and its routing context on the instance: fine for Lambda, one request per
    process at a time, but `mneme serve` runs the same functions on many threads. Here all three are
    per thread, so concurrent requests never see each other's event, caller or arguments.
    """

    def __init__(self) -> None:
        self._request = threading.local()
        super().__init__(enable_validation=True)

    @property
    def current_event(self) -> Any:
        return self._request.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._request.event = value

    @property
    def lambda_context(self) -> Any:
        return self._request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(self._request, "context"):
            self._request.context = {}
        return self._request.context  # type: ignore[no-any-return]

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    _stacks = threading.Lock()

    def _call_route(self, route: Any, route_arguments: dict[str, str]) -> Any:
        """Powertools builds a route's middleware stack on its first call, in place and unguarded: two
        threads that race there wrap each other's half-built stack. The first call builds it under a lock."""
        if not route._middleware_stack_built:
            with self._stacks:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)
        return super()._call_route(route, route_arguments)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        self.context = {}
        logger.thread_safe_clear_keys()  # the caller's keys label this thread's records only (mneme serve)
        try:
            found, admitted = admit(event)
        except MnemeError as error:
            logger.info("request refused", extra={"code": error.code, "status": error.status})
            return proxy_error(error)
        self.current_event, self.lambda_context = self._to_proxy_event(dict(admitted)), context
        if found is not None:
            self.context["caller"] = found
            logger.thread_safe_append_keys(tenant=found.tenant, principal=found.principal)
        return super().resolve(admitted, context)


def build_resolver() -> APIGatewayRestResolver:
    app = MnemeResolver()

    @app.exception_handler(MnemeError)
    def on_domain_error(error: MnemeError) -> Response[str]:
        if error.status >= 500:  # a dependency failed: logged like any 5xx, with the request id
            request_id = request_id_of(app)
            logger.error(
                f"{error.status} {error.code}: {error.message}",
                exc_info=error,
                extra={"request_id": request_id, "code": error.code, "status": error.status},
            )
            if error.details is None or isinstance(error.details, dict):
                error.details = {**(error.details or {}), "request_id": request_id}
            return error_response(error)
        logger.info("request refused", extra={"code": error.code, "status": error.status})
        return error_response(error)

    @app.exception_handler(Exception)
    def on_unexpected(error: Exception) -> Response[str]:
        if isinstance(error, ServiceError):  # Powertools' own HTTP errors keep their status
            raise error
        return error_response(unexpected(error, request_id_of(app)))

    @app.exception_handler(RequestValidationError)
    def on_invalid_request(error: RequestValidationError) -> Response[str]:
        details = _validation_details(error)
        if details and all(item["type"] in TOO_LARGE for item in details):
            return error_response(PayloadTooLarge(details[0]["message"], code=details[0]["type"], details=details))
        invalid_json = any(item["type"] == "json_invalid" for item in details)
        message = "the body is not valid JSON" if invalid_json else "the request does not match the schema"
        return error_response(InvalidInput(message, details=details))

    @app.not_found
    def on_not_found(_: Exception) -> Response[str]:  # admitted, so only a path Powertools reads differently
        return error_response(NotFound(f"no route {app.current_event.path}", code="route_not_found"))

    return app


def request_id_of(app: APIGatewayRestResolver) -> str | None:
    """API Gateway's id of the request being served (the local server sets one the same way)."""
    try:
        return str(app.current_event.request_context.request_id)
    except (AttributeError, KeyError, TypeError):
        return None


def caller(app: APIGatewayRestResolver) -> Principal:
    principal: Principal = app.context["caller"]
    return principal


def json_response(status: int, body: Any) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body, default=str))


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
