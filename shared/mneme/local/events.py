"""HTTP request → API Gateway REST proxy event, and a Lambda context for local invokes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from mneme.http.routes import Route


@dataclass
class LocalContext:
    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:mneme-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def proxy_event(
    route: Route,
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: str | None,
    path_params: dict[str, str],
    authorizer: dict[str, Any] | None,
    request_id: str | None = None,
) -> dict[str, Any]:
    parsed = parse_qs(query, keep_blank_values=True)
    request_id = request_id or str(uuid.uuid4())
    return {
        "resource": route.path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in parsed.items()} or None,
        "multiValueQueryStringParameters": parsed or None,
        "pathParameters": path_params or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": route.path,
            "httpMethod": method,
            "path": f"/local{path}",
            "stage": "local",
            "requestId": request_id,
            "accountId": "000000000000",
            "apiId": "local",
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": authorizer,
        },
        "body": body,
        "isBase64Encoded": False,
    }


def token_event(route: Route, method: str, path: str, authorization: str | None) -> dict[str, Any]:
    return {
        "type": "TOKEN",
        "authorizationToken": authorization,
        "methodArn": f"arn:aws:execute-api:local:000000000000:local/local/{method}{path}",
    }
