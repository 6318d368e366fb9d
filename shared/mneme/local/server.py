"""`mneme serve`: HTTP on loopback → the same authorizer and Lambda handlers as in AWS.

HTTP/1.1 is parsed by uvicorn's h11 protocol: one Content-Length (two that differ are refused, so a
body cannot smuggle a second request), no whitespace before a header's colon, no bare CR, no request
without a method, target and version; a body that stops short of its Content-Length (the client
half-closes) is dropped, never served. On top of it (`StrictProtocol`, `app`):

- deadlines: a request's head must arrive within HEAD_TIMEOUT of its first byte (or of the connection,
  however slowly it trickles in), its body within BODY_TIMEOUT: a 408, and the connection closed; an
  idle keep-alive connection is closed after IDLE_TIMEOUT;
- limits: the head's size, its number of headers and the target's length (431 / 414), THREADS requests
  served at once, and MAX_CONNECTIONS connections per process: a connection past it closes the newest idle
  one (no request under way: never used, or kept alive between requests), else the newest whose head is
  still arriving, of those open NEW_GRACE or longer; connections serving requests or just opened may take a
  process to twice the cap, past which a new one is answered 503;
- admission before the body: the route and the API key are checked, and `Content-Length` against the
  route's limit, before a byte of the body is read; a chunked body is refused (411);
- with `MNEME_SERVE__TENANT_RATE_LIMIT` set, each tenant's requests pass a token bucket (mneme.local.throttle):
  past it a 429 `throttled` with `Retry-After`, as API Gateway's usage plan refuses a tenant in AWS;
- every answer, protocol errors included, is JSON in the error shape, with an `X-Request-Id`; an
  unexpected error is logged at ERROR with its traceback and that id (`http.api.unexpected`). A protocol
  error names the problem (and the header), never the refused text: h11 quotes the line it refuses, and
  that line can hold an API key (`protocol_message`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket as sockets
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from socket import SOMAXCONN
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from mneme import bootstrap
from mneme.errors import InvalidInput, MnemeError, PayloadTooLarge, Throttled
from mneme.http import routes
from mneme.http.api import proxy_error, unexpected
from mneme.local import runtime
from mneme.local.events import proxy_event
from mneme.local.gateway import Gateway
from mneme.local.heads import protocol_message, request_path
from mneme.local.throttle import TenantThrottle
from mneme.observability import logger
from mneme.services.indexing import Indexer
from mneme.settings import get_settings

SNAPSHOT_BEHIND = 500  # writes after which the sweeper saves a vector cache's snapshot again

HEAD_TIMEOUT = 10.0  # seconds from a request's first byte (or the connection's start) to the end of its head
BODY_TIMEOUT = 30.0  # seconds from the end of the head to the end of the body
IDLE_TIMEOUT = 15.0  # seconds a keep-alive connection may wait for its next request
MAX_HEAD = 16 * 1024  # bytes of request line and headers
MAX_HEADERS = 100
MAX_TARGET = 8 * 1024  # bytes of the request target (path and query)
MAX_CONNECTIONS = 256  # connections per process past which an idle one is closed (503 past twice as many)
NEW_GRACE = 1.0  # seconds a new connection has to send its first byte before it counts as idle
LINGER = 2.0  # seconds a connection refused with a protocol error is read and dropped before it closes
THREADS = 32  # requests served at once per process (the handlers are blocking: SQLite, the model)
GRACE = 5.0  # seconds a stopping server waits for the requests in progress before it closes their connections

PROTOCOL_CODES = {
    400: "bad_request",
    408: "request_timeout",
    411: "length_required",
    413: "payload_too_large",
    414: "uri_too_long",
    431: "headers_too_large",
    501: "not_implemented",
    503: "service_unavailable",
    505: "http_version_not_supported",
}


class LengthRequired(MnemeError):
    code = "length_required"
    status = 411


class ProtocolError(MnemeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, code=PROTOCOL_CODES.get(status, "http_error"))
        self.status = status


def error_payload(status: int, message: str, request_id: str | None = None) -> bytes:
    error: dict[str, Any] = {"code": PROTOCOL_CODES.get(status, "http_error"), "message": message}
    if request_id:
        error["details"] = {"request_id": request_id}
    return json.dumps({"error": error}).encode()


def content_length(headers: dict[str, str]) -> int:
    """The body's declared length: digits only (no sign, no exponent); chunked bodies are not accepted."""
    if "transfer-encoding" in headers:
        raise LengthRequired("send the body with a Content-Length, not Transfer-Encoding")
    value = headers.get("content-length")
    if value is None:
        return 0
    if not value.strip().isdigit() or not value.strip().isascii():
        raise InvalidInput("Content-Length must be a non-negative integer (its value is not repeated here)")
    return int(value)


def check_head(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers (names lowercased), once its version, target and headers are within limits.
    A header that says who is calling or how long the body is may not come twice."""
    if scope["http_version"] not in ("1.0", "1.1"):
        raise ProtocolError(505, f"HTTP/{scope['http_version']} is not supported: use HTTP/1.1")
    if len(scope["raw_path"]) + len(scope["query_string"]) > MAX_TARGET:
        raise ProtocolError(414, f"the request target is longer than {MAX_TARGET} bytes")
    raw = scope["headers"]
    if len(raw) > MAX_HEADERS or sum(len(k) + len(v) + 4 for k, v in raw) > MAX_HEAD:
        raise ProtocolError(431, f"send at most {MAX_HEADERS} headers and {MAX_HEAD} bytes of them")
    headers: dict[str, str] = {}
    for name, value in raw:
        key = name.decode("latin-1")
        if key in headers and key in ("authorization", "content-length", "content-type", "host"):
            raise InvalidInput(f"the {key} header is sent twice")
        headers[key] = value.decode("latin-1")
    return headers


@dataclass
class Admitted:
    route: routes.Route
    params: dict[str, str]
    authorizer: dict[str, Any] | None
    length: int


def admit_head(gateway: Gateway, method: str, path: str, headers: dict[str, str]) -> Admitted:
    """Everything that needs no body: the route, the caller and the declared length (raises MnemeError)."""
    route, params = routes.resolve(method, path)
    authorizer = gateway.authorize(route, method, path, headers.get("authorization"))
    length = content_length(headers)
    if length > route.max_body:
        raise PayloadTooLarge(f"request body exceeds {route.max_body} bytes", details={"limit": route.max_body})
    return Admitted(route, params, authorizer, length)


def answer(error: MnemeError) -> dict[str, Any]:
    response = proxy_error(error)
    if isinstance(error, Throttled) and isinstance(error.details, dict) and "retry_after_seconds" in error.details:
        response["multiValueHeaders"]["Retry-After"] = [str(error.details["retry_after_seconds"])]
    return response


class Mneme:
    """The ASGI application: one request → admission → the route's function on a worker thread."""

    def __init__(self, gateway: Gateway, threads: int, throttle: TenantThrottle | None = None) -> None:
        self.gateway = gateway
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mneme-http")  # threads start lazily
        self.throttle = throttle

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()  # startup
            await send({"type": "lifespan.startup.complete"})
            await receive()  # shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        request_id = str(uuid.uuid4())
        response, close = await self._serve(scope, receive, request_id)
        if response is None:  # the client left (or half-closed) before its body was complete
            return
        await self._send(send, response, request_id, close)

    async def _serve(self, scope: dict[str, Any], receive: Any, request_id: str) -> tuple[dict[str, Any] | None, bool]:
        """(the proxy response, whether to close the connection after it)."""
        run: Callable[..., Awaitable[Any]] = partial(asyncio.get_running_loop().run_in_executor, self.pool)
        method = scope["method"]
        declared = any(k in (b"content-length", b"transfer-encoding") and v.strip(b"0 ") for k, v in scope["headers"])
        try:
            headers = check_head(scope)
            path = request_path(scope["raw_path"])
            # On the loop's thread: a route match and one key lookup (a cached SQLite read), cheaper than a
            # hop to a worker thread and back, which on a busy machine waits for a CPU each way.
            admitted = admit_head(self.gateway, method, path, headers)
            if self.throttle is not None and admitted.authorizer is not None:
                self.throttle.admit(admitted.authorizer["tenant"])
        except MnemeError as error:  # the body, if any, is left unread: the connection closes after the answer
            return answer(error), declared
        except Exception as error:  # the store or the authorizer failed: a 5xx, logged with its id
            return answer(unexpected(error, request_id)), declared
        body: bytes | None = b""
        if admitted.length:
            body = await read_body(receive, BODY_TIMEOUT)
            if body is None:
                return None, True
            if body is TIMED_OUT:
                return answer(ProtocolError(408, f"the body did not arrive within {BODY_TIMEOUT:.0f} s")), True
        try:
            text = body.decode() if body else None
        except UnicodeDecodeError:
            return answer(InvalidInput("the body is not UTF-8 text")), False
        query = scope["query_string"].decode("latin-1")
        event = proxy_event(
            admitted.route, method, path, query, headers, text, admitted.params, admitted.authorizer, request_id
        )
        try:
            response = await run(self.gateway.invoke, admitted.route, event)
        except Exception as error:  # a bug, not a client error: answer like API Gateway does, and log it
            return answer(unexpected(error, request_id)), False
        return response, False

    async def _send(self, send: Any, response: dict[str, Any], request_id: str, close: bool) -> None:
        headers = {**(response.get("headers") or {})}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, values[-1])
        payload = (response.get("body") or "").encode()
        out = [
            (name.lower().encode("latin-1"), str(value).encode("latin-1"))
            for name, value in headers.items()
            if name.lower() not in ("content-length", "connection", "transfer-encoding")
        ]
        out += [(b"content-length", str(len(payload)).encode()), (b"x-request-id", request_id.encode())]
        if close:
            out.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": response["statusCode"], "headers": out})
        await send({"type": "http.response.body", "body": payload})


TIMED_OUT = b"\0timed out"


async def read_body(receive: Any, timeout: float) -> bytes | None:
    """The whole body, None when the client went away first, TIMED_OUT past the deadline."""
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(timeout):  # one deadline for the whole body, however it trickles in
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    return b"".join(chunks)
    except TimeoutError:
        return TIMED_OUT


class _Connection(h11.Connection):
    """h11's connection, remembering the protocol error it raised (for the status it hints at)."""

    error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as error:
            self.error = error
            raise


class _OneSend:
    """The connection's transport, holding what an answer writes while its body is still to come (uvicorn
    writes the head and the body apart: two segments on a TCP_NODELAY socket, and a client that reads the
    head first waits for the second), so that each answer leaves in one send."""

    def __init__(self, transport: asyncio.Transport, protocol: StrictProtocol) -> None:
        self.transport, self.protocol, self.held = transport, protocol, bytearray()

    def write(self, data: bytes) -> None:
        self.held += data
        if self.protocol.conn.our_state is not h11.SEND_BODY:  # the answer is complete (or had no body)
            self.flush()

    def flush(self) -> None:
        if self.held:
            self.transport.write(bytes(self.held))
            self.held.clear()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class StrictProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on the request head (uvicorn has none: a client that
    trickles its headers would hold a connection for ever), protocol errors in the JSON error shape, and
    the connection cap (uvicorn's answers a plain-text 503 to every request while idle sockets hold it)."""

    head_timer: asyncio.TimerHandle | None = None
    lingering = False  # an error was sent: what the client still sends is read and dropped, then we close
    opened = 0  # the connection's place in the order connections were made (the newest is the largest)
    since = 0.0  # the loop's time when it was made
    _order = itertools.count(1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Connection(h11.SERVER, MAX_HEAD)

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.transport = _OneSend(transport, self)  # type: ignore[assignment]
        self.opened, self.since = next(self._order), self.loop.time()
        self._await_head()
        if sum(1 for c in self.connections if _counted(c)) > MAX_CONNECTIONS:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return
        super().data_received(data)
        self._await_head()

    def on_response_complete(self) -> None:
        self._cancel_head()  # the keep-alive timer takes over until the next request's first byte
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        super().connection_lost(exc)

    def waiting(self) -> str | None:
        """`idle` (no request under way and no byte of the next), `head` (a head still arriving), or None
        (a request is being read or served)."""
        if self.conn.their_state is not h11.IDLE or not (self.cycle is None or self.cycle.response_complete):
            return None
        return "head" if self.conn.trailing_data[0] else "idle"

    def _make_room(self) -> None:
        """Past the cap: close the newest idle connection, else the newest whose head is still arriving, of
        those open NEW_GRACE or longer (a client's own connection is never closed in the moment between its
        connect and its request, however fast others connect). With none, connections serving a request or
        just opened take the process past the cap, up to twice it; past that this one is answered 503."""
        settled = self.loop.time() - NEW_GRACE
        others = [c for c in self.connections if c is not self and isinstance(c, StrictProtocol) and _counted(c)]
        old = [c for c in others if c.since <= settled]
        for state in ("idle", "head"):
            waiting = [c for c in old if c.waiting() == state]
            if waiting:
                max(waiting, key=lambda c: c.opened).drop()
                return
        if len(others) >= 2 * MAX_CONNECTIONS:
            self._write_error(503, f"the server is serving {len(others)} connections: retry shortly")

    def drop(self) -> None:
        """Close to make room: silently when no request is under way (as a keep-alive timeout closes), else (a
        head half sent) with a 503."""
        self._cancel_head()
        if self.conn.trailing_data[0]:
            self._write_error(503, "the server is at its connection limit and closed this connection")
            return
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()

    def _await_head(self) -> None:
        waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
        if not waiting or self.transport.is_closing():
            self._cancel_head()
        elif self.head_timer is None and (self.cycle is None or self.conn.trailing_data[0]):
            self.head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_timed_out)

    def _cancel_head(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._write_error(408, f"the request head did not arrive within {HEAD_TIMEOUT:.0f} s")

    def send_400_response(self, msg: str) -> None:
        error = getattr(self.conn, "error", None)
        status = error.error_status_hint if error is not None else 400
        if status == 431 and b"\n" not in self.conn.trailing_data[0]:
            status = 414  # the request line alone is past the limit
        self._write_error(status, protocol_message(error, msg))

    def _write_error(self, status: int, message: str) -> None:
        """A protocol error written straight to the socket (h11 has no request to answer), then close."""
        self._cancel_head()
        payload = error_payload(status, message)
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + payload)
        # Half-close and linger: closing with unread input would reset the connection, and a reset can
        # discard the answer before the client reads it.
        self.lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER, self.transport.close)
        else:
            self.transport.close()


def _counted(connection: Any) -> bool:
    """Whether a connection holds a place under the cap (one answered with an error lingers, then closes)."""
    return not getattr(connection, "lingering", False) and not connection.transport.is_closing()


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """`mneme serve` handles its signals itself (the parent stops its workers; a worker ignores Ctrl-C)."""
        yield

    async def startup(self, sockets: list[sockets.socket] | None = None) -> None:
        """asyncio accepts up to `backlog` waiting connections per wake-up, and the processes of `serve
        --workers` share one socket: with uvicorn's 2048, the first process to wake took every client's
        connection and the others idled (bench/load.py at 8 clients). The server is started with a backlog
        of 1, so each wake-up takes one connection, and the socket's listen queue set back to the largest."""
        await super().startup(sockets)
        for sock in sockets or []:
            sock.listen(SOMAXCONN)


class LocalServer:
    """`mneme serve`'s HTTP server on a listening socket it binds, or inherits (`listen_fd`: a worker
    process of `serve --workers`). `serve_forever` runs it on the calling thread until `shutdown`."""

    def __init__(
        self,
        address: tuple[str, int],
        gateway: Gateway,
        threads: int = THREADS,
        listen_fd: int | None = None,
        throttle: TenantThrottle | None = None,
    ) -> None:
        self.socket = bind(address) if listen_fd is None else socket_from_fd(listen_fd)
        self.server_address = self.socket.getsockname()
        self.app = Mneme(gateway, threads, throttle)
        config = uvicorn.Config(
            self.app,
            http=StrictProtocol,
            lifespan="on",
            ws="none",
            interface="asgi3",
            timeout_keep_alive=int(IDLE_TIMEOUT),
            limit_concurrency=None,  # the cap is StrictProtocol's (uvicorn's answers in plain text, idle or not)
            backlog=1,  # connections accepted per wake-up (see _Uvicorn.startup)
            timeout_graceful_shutdown=int(GRACE),
            server_header=False,
            date_header=False,
            log_config=None,
            access_log=_access_log(),
        )
        self.server = _Uvicorn(config)
        self._done = threading.Event()

    def share(self) -> None:
        """Let worker processes accept on this socket too: inheritable, and non-blocking so that a
        process that loses the race for a connection goes back to waiting instead of blocking in accept."""
        os.set_inheritable(self.socket.fileno(), True)
        self.socket.setblocking(False)

    def serve_forever(self) -> None:
        self._done.clear()
        try:
            asyncio.run(self.server.serve(sockets=[self.socket]))
        finally:
            self._done.set()

    def stop(self) -> None:
        """Ask the server to stop (safe from a signal handler): requests in progress finish first."""
        self.server.should_exit = True

    def shutdown(self) -> None:
        self.stop()
        self._done.wait(30)

    def server_close(self, wait: float = 0.0) -> bool:
        """Close the socket and the request threads: those not started are cancelled, those running are
        waited for up to `wait` seconds. True when none is left running."""
        self.socket.close()
        self.app.pool.shutdown(wait=False, cancel_futures=True)
        joined = threading.Thread(target=self.app.pool.shutdown, name="http-drain", daemon=True)  # joins them
        joined.start()
        joined.join(wait)
        return not joined.is_alive()


def _access_log() -> bool:
    """With MNEME_ACCESS_LOG set, one line a request on stderr: client, request line, status (uvicorn's
    access logger; `log_config=None` leaves it without a handler). Keys travel in headers, never logged."""
    if not os.environ.get("MNEME_ACCESS_LOG"):
        return False
    access = logging.getLogger("uvicorn.access")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    return True


def bind(address: tuple[str, int]) -> sockets.socket:
    """A listening socket with the system's largest backlog (with more clients connecting at once than the
    backlog holds, Linux drops their handshakes and a client can wait a minute for its retries)."""
    family = sockets.AF_INET6 if ":" in address[0] else sockets.AF_INET
    sock = sockets.create_server(address, family=family, backlog=SOMAXCONN)
    sock.setsockopt(sockets.IPPROTO_TCP, sockets.TCP_NODELAY, 1)
    return sock


def make_server(
    host: str,
    port: int,
    threads: int = THREADS,
    listen_fd: int | None = None,
    throttle: TenantThrottle | None = None,
    *,
    services: bootstrap.Provide = bootstrap.current,
) -> LocalServer:
    """The server over `services` (the process's, built from its settings, unless given); its per-tenant
    limit is `throttle`, else the one `MNEME_SERVE__*` sets (none by default)."""
    runtime.configure()
    return LocalServer((host, port), Gateway(services), threads, listen_fd, throttle or configured_throttle())


def configured_throttle() -> TenantThrottle | None:
    serve = get_settings().serve
    return TenantThrottle(serve.tenant_rate_limit, serve.tenant_burst_limit) if serve.tenant_rate_limit else None


def socket_from_fd(fd: int) -> sockets.socket:
    sock = sockets.socket(fileno=fd)
    sock.setblocking(False)
    return sock


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


def stop_when_orphaned(stop: Callable[[], None], parent: int, interval: float = 1.0) -> threading.Thread:
    """A worker process stops serving (`stop`) when the process that started it is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        stop()

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
