"""`mneme serve`: HTTP on loopback → the same authorizer and Lambda handlers as in AWS."""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from mneme import routes
from mneme.errors import Forbidden, MethodNotAllowed, MnemeError, NotFound, Unauthorized
from mneme.local.events import LocalContext, proxy_event, token_event
from mneme.observability import logger
from mneme.services.indexing import Indexer

LOCAL_ENV = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


def _function(name: str) -> Any:
    return importlib.import_module(f"functions.{name}").handler


def dispatch(method: str, raw_path: str, headers: dict[str, str], body: str | None) -> dict[str, Any]:
    """Serve one request as API Gateway would: route, authorize, invoke. Returns a proxy response."""
    url = urlsplit(raw_path)
    found = routes.match(method, url.path)
    if found is None:
        allowed = routes.allowed_methods(url.path)
        error: MnemeError = (
            MethodNotAllowed(f"{method} is not allowed; use {', '.join(allowed)}")
            if allowed
            else NotFound(f"no route {url.path}", code="route_not_found")
        )
        return _error(error)
    route, params = found
    authorizer = None
    if route.role is not None:
        auth_header = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        try:
            result = _function("authorizer")(
                token_event(route, method, url.path, auth_header), LocalContext("authorizer")
            )
        except Exception as e:
            if str(e) == "Unauthorized":
                return _error(Unauthorized("missing or unknown API key: send 'Authorization: Bearer <key>'"))
            raise
        if result["policyDocument"]["Statement"][0]["Effect"] != "Allow":
            return _error(Forbidden("this API key is not allowed", code=result["context"].get("reason", "forbidden")))
        authorizer = {**result["context"], "principalId": result["principalId"]}
    event = proxy_event(route, method, url.path, url.query, headers, body, params, authorizer)
    response: dict[str, Any] = _function(route.function)(event, LocalContext(route.function))
    return response


def _error(error: MnemeError) -> dict[str, Any]:
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(error.to_body()),
    }


class Handler(BaseHTTPRequestHandler):
    server_version = "mneme-local"
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client waits for its
    # delayed ACK (~40 ms on Linux) on every request.
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace") if length else None
        try:
            response = dispatch(self.command, self.path, dict(self.headers.items()), body)
        except Exception:  # a bug, not a client error: answer like API Gateway does
            self.log_error("unhandled error serving %s %s", self.command, self.path)
            response = _error(MnemeError("internal error"))
        payload = (response.get("body") or "").encode()
        self.send_response(response["statusCode"])
        headers = {**(response.get("headers") or {})}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, values[-1])
        for name, value in headers.items():
            if name.lower() != "content-length":
                self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("MNEME_ACCESS_LOG"):
            super().log_message(format, *args)


def start_sweeper(indexer: Indexer, interval: float) -> threading.Thread:
    """Retry failed index writes in the background, as the scheduled repair does in AWS."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            try:
                indexer.sweep()
            except Exception:  # keep sweeping: a failed round is retried on the next one
                logger.exception("index sweep failed")

    thread = threading.Thread(target=loop, name="index-sweeper", daemon=True)
    thread.start()
    return thread


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        """A short poll so `shutdown()` returns at once (the default makes it wait up to 0.5 s)."""
        super().serve_forever(poll_interval)


def make_server(host: str, port: int) -> ThreadingHTTPServer:
    for name, value in LOCAL_ENV.items():
        os.environ.setdefault(name, value)
    logger.setLevel(os.environ["POWERTOOLS_LOG_LEVEL"])  # the logger may predate the variable
    warnings.filterwarnings("ignore", "No application metrics to publish")  # metrics are off locally
    return LocalServer((host, port), Handler)
