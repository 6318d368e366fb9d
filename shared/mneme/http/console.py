"""The console's static files (docs/console.md): one page, two scripts, one style sheet and an icon, shipped as
package data and served under a strict Content-Security-Policy. They hold no data: the page asks for an API
key, keeps it in sessionStorage and calls the same API routes, with the same role checks, as any client.
The API document (docs/openapi.json, copied into the package by `make openapi`) is served beside them."""

from __future__ import annotations

from functools import cache
from importlib import resources

from aws_lambda_powertools.event_handler import Response

from mneme.errors import NotFound

PAGE = "index.html"
ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "records.js": "text/javascript; charset=utf-8",  # the Episodes and Facts pages
    "console.css": "text/css; charset=utf-8",
}
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def read(name: str, folder: tuple[str, ...] = ("console",)) -> str:
    return resources.files("mneme").joinpath("assets", *folder, name).read_text(encoding="utf-8")


def page() -> Response[str]:
    return Response(200, "text/html; charset=utf-8", read(PAGE), headers=dict(HEADERS))


def icon() -> Response[str]:
    headers = {**HEADERS, "Cache-Control": "max-age=86400"}
    return Response(200, "image/svg+xml", read("favicon.svg"), headers=headers)


def contract() -> Response[str]:
    """The OpenAPI document: no data, so any origin may read it (a generator or a docs viewer elsewhere)."""
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache", "Access-Control-Allow-Origin": "*"}
    return Response(200, "application/json", read("openapi.json", ()), headers=headers)


def asset(name: str) -> Response[str]:
    if name not in ASSETS:
        raise NotFound(f"no console file {name[:64]!r}", code="route_not_found")
    return Response(200, ASSETS[name], read(name), headers=dict(HEADERS))
