"""`mneme serve`: HTTP on loopback → the same authorizer and Lambda handlers as in AWS.

Defensive by construction: the route and the API key are checked, and `Content-Length` is validated
against the route's limit, before a byte of the body is read; every answer, including the protocol errors
`http.server` produces itself, is JSON in the error shape; a socket timeout ends stalled connections and
a bounded pool of workers serves them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from socket import SOMAXCONN, socket
from typing import Any
from urllib.parse import urlsplit

from mneme import routes
from mneme.errors import InvalidInput, MnemeError, PayloadTooLarge
from mneme.local import gateway, runtime
from mneme.local.events import proxy_event
from mneme.observability import logger
from mneme.services.indexing import Indexer

SNAPSHOT_BEHIND = 500  # writes after which the sweeper saves a vector cache's snapshot again

SOCKET_TIMEOUT = 15.0  # seconds a connection may stall (headers, body or keep-alive idle)
WORKERS = 32

PROTOCOL_CODES = {
    400: "bad_request",
    408: "request_timeout",
    411: "length_required",
    413: "payload_too_large",
    414: "uri_too_long",
    431: "headers_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}


class LengthRequired(MnemeError):
    code = "length_required"
    status = 411


def content_length(headers: dict[str, str]) -> int:
    """The body's declared length: digits only (no sign, no exponent); chunked bodies are not accepted."""
    if gateway_header(headers, "transfer-encoding") is not None:
        raise LengthRequired("send the body with a Content-Length, not Transfer-Encoding")
    value = gateway_header(headers, "content-length")
    if value is None:
        return 0
    if not value.strip().isdigit() or not value.strip().isascii():
        raise InvalidInput(f"Content-Length must be a non-negative integer, not {value[:40]!r}")
    return int(value)


def gateway_header(headers: dict[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def dispatch(method: str, raw_path: str, headers: dict[str, str], read: Any) -> dict[str, Any]:
    """Serve one request as API Gateway would: route, authorize, size, then read the body and invoke.

    `read(n)` reads n bytes of body; it is called only once everything that needs no body has passed.
    """
    url = urlsplit(raw_path)
    try:
        route, params = routes.resolve(method, url.path)
        authorizer = gateway.authorize(route, method, url.path, gateway_header(headers, "authorization"))
        length = content_length(headers)
        if length > route.max_body:
            raise PayloadTooLarge(f"request body exceeds {route.max_body} bytes", details={"limit": route.max_body})
        try:
            body = read(length).decode() if length else None
        except UnicodeDecodeError:
            raise InvalidInput("the body is not UTF-8 text") from None
    except MnemeError as error:
        return gateway.error_response(error)
    event = proxy_event(route, method, url.path, url.query, headers, body, params, authorizer)
    return gateway.invoke(route, event)


class Handler(BaseHTTPRequestHandler):
    server_version = "mneme-local"
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client waits for its
    # delayed ACK (~40 ms on Linux) on every request.
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        consumed = False

        def read(length: int) -> bytes:
            nonlocal consumed
            consumed = True
            return self.rfile.read(length)

        try:
            response = dispatch(self.command, self.path, dict(self.headers.items()), read)
        except TimeoutError:
            raise
        except Exception:  # a bug, not a client error: answer like API Gateway does
            self.log_error("unhandled error serving %s %s", self.command, self.path)
            response = gateway.error_response(MnemeError("internal error"))
        declared = (
            self.headers.get("Content-Length", "0").strip() not in ("", "0") or "Transfer-Encoding" in self.headers
        )
        if declared and not consumed:
            self.close_connection = True  # the unread body would be taken for the next request
        headers = {**(response.get("headers") or {})}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, values[-1])
        self._answer(response["statusCode"], headers, (response.get("body") or "").encode())

    def _answer(self, status: int, headers: dict[str, Any], payload: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, str(value))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer
            self.close_connection = True

    def __getattr__(self, name: str) -> Any:
        """Every method reaches the route table (405 on a known path, 404 elsewhere), not a 501 page."""
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol errors (bad request line, version, oversized headers) in the JSON error shape."""
        if not str(getattr(self, "request_version", "")).startswith("HTTP/1."):
            self.request_version = "HTTP/1.1"  # answer a malformed or unsupported version in HTTP/1.1
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "error"
        error = {"error": {"code": PROTOCOL_CODES.get(code, "http_error"), "message": message or phrase}}
        self.close_connection = True
        self._answer(code, {"Content-Type": "application/json"}, json.dumps(error).encode())

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("MNEME_ACCESS_LOG"):
            super().log_message(format, *args)


def start_sweeper(indexer: Indexer, interval: float) -> threading.Thread:
    """Retry failed index writes in the background, as the scheduled repair does in AWS; and keep the
    embedded index's vector snapshots within reach of its change log (`SqliteSearchIndex.save_snapshots`)."""
    save = getattr(indexer.index, "save_snapshots", None)

    def loop() -> None:
        while True:
            time.sleep(interval)
            try:
                indexer.sweep()
                if save is not None:
                    save(SNAPSHOT_BEHIND)
            except Exception:  # keep sweeping: a failed round is retried on the next one
                logger.exception("index sweep failed")

    thread = threading.Thread(target=loop, name="index-sweeper", daemon=True)
    thread.start()
    return thread


class LocalServer(HTTPServer):
    """An HTTP server whose connections are served by a bounded pool (waiting ones queue, not spawn).

    With `listen_fd`, it serves a listening socket it inherited (a worker process of `serve --workers`).
    The listen backlog is the system's maximum, not http.server's 5: with more clients connecting at once
    than the backlog holds, Linux drops their handshakes and a client can wait a minute for its retries."""

    request_queue_size = SOMAXCONN

    def __init__(self, address: tuple[str, int], workers: int = WORKERS, listen_fd: int | None = None) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mneme-http")  # threads start lazily
        if listen_fd is None:
            super().__init__(address, Handler)
            return
        super().__init__(address, Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = socket_from_fd(listen_fd)
        self.server_address = self.socket.getsockname()

    def share(self) -> None:
        """Let worker processes accept on this socket too: inheritable, and non-blocking so that a
        process that loses the race for a connection goes back to waiting instead of blocking in accept."""
        os.set_inheritable(self.socket.fileno(), True)
        self.socket.setblocking(False)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.pool.submit(self._work, request, client_address)

    def _work(self, request: socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        """A short poll so `shutdown()` returns at once (the default makes it wait up to 0.5 s)."""
        super().serve_forever(poll_interval)

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def make_server(host: str, port: int, workers: int = WORKERS, listen_fd: int | None = None) -> LocalServer:
    runtime.configure()
    return LocalServer((host, port), workers, listen_fd)


def socket_from_fd(fd: int) -> socket:
    sock = socket(fileno=fd)
    sock.setblocking(False)
    return sock


def stop_when_orphaned(server: LocalServer, parent: int, interval: float = 1.0) -> threading.Thread:
    """A worker process stops serving when the process that started it is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        server.shutdown()

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
