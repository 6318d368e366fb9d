"""What every request passes before a route runs, in Lambda and locally alike.

In order: the route (404 / 405), the caller and its role (401 / 403), its query parameters (400 for one
the route does not take), the body's size (413), its media
type (415: JSON only, compared case-insensitively; no Content-Type at all is read as JSON) and its
well-formedness as JSON (400: syntax, nesting deeper than MAX_DEPTH, integers past Python's digit limit).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from mneme.errors import Forbidden, InvalidInput, PayloadTooLarge, Unauthorized, UnsupportedMediaType
from mneme.http import routes
from mneme.models import Principal, Role

MAX_DEPTH = 32
JSON = "application/json"


def header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value[-1] if isinstance(value, list) else value)
    return None


def principal_from_event(event: Mapping[str, Any]) -> Principal:
    """The caller, as the authorizer put it in the request context (never from the body)."""
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    if not context.get("tenant"):
        raise Unauthorized("missing credentials")
    roles = [Role(role) for role in str(context.get("roles", "")).split(",") if role in Role.__members__]
    return Principal(tenant=context["tenant"], principal=context["principal"], roles=frozenset(roles))


def check_role(route: routes.Route, event: Mapping[str, Any]) -> Principal | None:
    if route.role is None:
        return None
    caller = principal_from_event(event)
    if not caller.has(route.role):
        raise Forbidden(f"this route needs the {route.role.value!r} role")
    return caller


def check_query(route: routes.Route, event: Mapping[str, Any]) -> None:
    given = set(event.get("multiValueQueryStringParameters") or event.get("queryStringParameters") or {})
    prefixes = tuple(name for name in route.query if name.endswith("."))  # `metadata.`: metadata.<key>=<value>
    unknown = sorted(name for name in given - set(route.query) if not (prefixes and name.startswith(prefixes)))
    if unknown:
        takes = ", ".join(f"{name}<key>" if name.endswith(".") else name for name in route.query) or "none"
        raise InvalidInput(
            f"unknown query parameter {unknown[0][:64]!r} (this route takes: {takes})",
            code="unknown_parameter",
            details={"unknown": [name[:64] for name in unknown[:10]]},
        )


def check_size(route: routes.Route, size: int) -> None:
    if size > route.max_body:
        raise PayloadTooLarge(f"request body exceeds {route.max_body} bytes", details={"limit": route.max_body})


def check_media_type(content_type: str | None) -> None:
    media = (content_type or JSON).split(";", 1)[0].strip().lower()
    if media != JSON and not (media.startswith("application/") and media.endswith("+json")):
        raise UnsupportedMediaType(f"send JSON (Content-Type: {JSON}), not {media or 'an empty type'}")


def check_json(body: str) -> None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as e:  # syntax, a 4,300+ digit integer, pathological nesting
        raise InvalidInput("the body is not valid JSON", details={"reason": str(e)[:200]}) from None
    if not isinstance(value, dict):  # every route's body is an object; `[{...}]` is not read as one
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise InvalidInput(f"the body must be a JSON object ({{...}}), not {kind}")
    if depth(value) > MAX_DEPTH:
        raise InvalidInput(f"the body nests deeper than {MAX_DEPTH} levels")
    if not isinstance(value, dict | None):  # every body is an object (or null where none is needed); the
        # resolver would read `[{...}]` as its first element
        raise InvalidInput("the body must be a JSON object", details={"type": type(value).__name__})


def depth(value: Any) -> int:
    """Nesting depth of arrays and objects, without recursion (a scalar is 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def body_text(event: Mapping[str, Any]) -> str:
    body = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return str(body)
    try:
        return base64.b64decode(body, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidInput("the body is not UTF-8 text") from None


def admit(event: Mapping[str, Any]) -> tuple[Principal | None, dict[str, Any]]:
    """Check a raw API Gateway event; returns the caller (None on an open route) and the event to resolve,
    its body decoded and its Content-Type set to JSON. Raises the MnemeError to answer otherwise."""
    route, _ = routes.resolve(str(event.get("httpMethod") or ""), str(event.get("path") or ""))
    caller = check_role(route, event)
    check_query(route, event)
    body = body_text(event)
    check_size(route, len(body.encode(errors="surrogatepass")))
    if body:
        check_media_type(header(event.get("headers"), "content-type"))
        check_json(body)
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    normalized = {
        **event,
        "body": body or None,
        "isBase64Encoded": False,
        "headers": {**headers, "Content-Type": JSON},
        "multiValueHeaders": {**multi, "Content-Type": [JSON]},
    }
    return caller, normalized
