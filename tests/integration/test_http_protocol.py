"""The local server's HTTP edge over raw loopback sockets: slow clients, smuggling, crafted heads, half-closed
bodies, too many connections, and how an unexpected error is answered and logged. Every test is bounded
in time: the server's deadlines are shortened, and every socket has a timeout."""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from mneme import bootstrap
from mneme.local import server as local
from mneme.models import Role

from .helpers import new_key

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture
def fast(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    """The local server with one-second head and body deadlines; yields (host, port)."""
    monkeypatch.setattr(local, "HEAD_TIMEOUT", 1.0)
    monkeypatch.setattr(local, "BODY_TIMEOUT", 1.0)
    httpd = local.make_server("127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def connect(address: tuple[str, int], timeout: float = 10) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the socket's timeout bounds the wait)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def parse(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


def error_code(data: bytes, status: int) -> str:
    got, headers, body = parse(data)
    assert got == status, data[:300]
    assert headers["content-type"] == "application/json"
    return str(json.loads(body[: int(headers["content-length"])])["error"]["code"])


def health(address: tuple[str, int]) -> requests.Response:
    return requests.get(f"http://{address[0]}:{address[1]}/v1/health", timeout=5)


def episodes(tenant: str) -> int:
    store: Any = bootstrap.current().store
    return int(store._rows("SELECT COUNT(*) FROM episodes WHERE tenant = ?", tenant)[0][0])


def remember(key: str, content: str) -> bytes:
    body = json.dumps({"items": [{"content": content, "scope": "root", "create_scope": True}]}).encode()
    return (
        f"POST /v1/remember HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


# -- slow clients ----------------------------------------------------------------------------------------


def test_slowloris_clients_are_cut_off_and_the_server_keeps_serving(fast: tuple[str, int]) -> None:
    # Given 48 clients (more than the old server's 32 threads) each sending one header line every 0.3 s
    slow = [connect(fast) for _ in range(48)]
    start = time.monotonic()
    for sock in slow:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n")

    def trickle() -> None:
        for i in range(20):
            time.sleep(0.3)
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X-%d: y\r\n" % i)

    threading.Thread(target=trickle, daemon=True).start()
    try:
        # Then a real request is answered meanwhile
        assert health(fast).status_code == 200
        # And every slow client gets a 408 once the head deadline passes, however often it sends
        for sock in slow:
            assert error_code(read_all(sock), 408) == "request_timeout"
        assert time.monotonic() - start < 8
    finally:
        for sock in slow:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed_at_the_head_deadline(fast: tuple[str, int]) -> None:
    with connect(fast) as sock:
        start = time.monotonic()
        assert error_code(read_all(sock), 408) == "request_timeout"
        assert 0.8 < time.monotonic() - start < 5


def test_a_body_slower_than_its_deadline_gets_408_and_is_not_served(fast: tuple[str, int]) -> None:
    # Given a writer whose body arrives one byte every 0.3 s
    key = new_key("acme", "alice", Role.writer)
    request = remember(key, "slow body")
    head, _, body = request.partition(b"\r\n\r\n")
    with connect(fast) as sock:
        sock.sendall(head + b"\r\n\r\n")
        try:
            for byte in body[:10]:
                time.sleep(0.3)
                sock.sendall(bytes([byte]))
        except OSError:
            pass  # the server closed first
        # Then a 408, and nothing was written
        assert error_code(read_all(sock), 408) == "request_timeout"
    assert episodes("acme") == 0


# -- answers -----------------------------------------------------------------------------------------------


def test_each_answer_leaves_in_one_send(fast: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A head and a body written apart go out as two segments (TCP_NODELAY), and a client reading the head
    first waits for the second: each answer, head and body, is one send."""
    sends: list[bytes] = []
    real = socket.socket.send

    def send(sock: socket.socket, data: Any, *args: Any) -> int:
        if sock.family == socket.AF_INET and sock.getsockname()[1] == fast[1]:  # the server's end
            sends.append(bytes(data))
        return real(sock, data, *args)

    monkeypatch.setattr(socket.socket, "send", send)
    key = new_key("acme", "alice", Role.writer)
    requests_ = [b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n", remember(key, "one send"),
                 b"GET /v1/nowhere HTTP/1.1\r\nHost: t\r\n\r\n"]  # fmt: skip
    with connect(fast) as sock:
        for request in requests_:
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < int(
                parse(data)[1]["content-length"]
            ):
                data += sock.recv(65536)
    assert len(sends) == 3, [sent[:24] for sent in sends]
    assert [parse(sent)[0] for sent in sends] == [200, 201, 404]
    assert all(len(parse(sent)[2]) == int(parse(sent)[1]["content-length"]) > 0 for sent in sends)


# -- crafted heads: smuggling, bare CR, whitespace, a missing target ----------------------------------------


def smuggle(address: tuple[str, int], framing: Callable[[int], str], body: bytes) -> bytes:
    """A writer's recall framed by `framing(length of what is hidden)`, then `body` and a whole remember
    hidden behind it: what the server sends back."""
    key = new_key("acme", "alice", Role.writer)
    hidden = remember(key, "smuggled")
    head = f"POST /v1/recall HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n{framing(len(hidden))}\r\n"
    with connect(address) as sock:
        sock.sendall(head.encode() + body + hidden)
        return read_all(sock)


def test_two_different_content_lengths_are_refused_and_the_rest_never_runs(fast: tuple[str, int]) -> None:
    # Given a request whose second Content-Length would leave a second request in the body
    data = smuggle(fast, lambda hidden: f"Content-Length: 2\r\nContent-Length: {2 + hidden}\r\n", b"{}")
    # Then one 400 and the connection closed: the smuggled remember never ran
    assert error_code(data, 400) == "bad_request"
    assert data.count(b"HTTP/1.1 ") == 1
    assert episodes("acme") == 0


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/recall HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n",
        b"GET HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 2\r\n\r\n",
    ],
    ids=["space-before-colon", "bare-cr", "no-target", "list-length"],
)
def test_crafted_heads_get_a_status_line_and_a_json_400(fast: tuple[str, int], request_bytes: bytes) -> None:
    with connect(fast) as sock:
        sock.sendall(request_bytes)
        data = read_all(sock)
    assert data.startswith(b"HTTP/1.1 400 ")
    assert error_code(data, 400) == "bad_request"


def test_transfer_encoding_with_a_content_length_is_411_and_the_connection_closes(fast: tuple[str, int]) -> None:
    data = smuggle(fast, lambda hidden: "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n")
    assert error_code(data, 411) == "length_required"
    assert parse(data)[1]["connection"] == "close" and data.count(b"HTTP/1.1 ") == 1
    assert episodes("acme") == 0


def test_a_body_cut_short_by_a_half_close_is_not_served(fast: tuple[str, int]) -> None:
    # Given a remember whose Content-Length promises 20 bytes more than the client sends before SHUT_WR
    key = new_key("acme", "alice", Role.writer)
    request = remember(key, "half closed")
    head, _, body = request.partition(b"\r\n\r\n")
    head = head.replace(f"Content-Length: {len(body)}".encode(), f"Content-Length: {len(body) + 20}".encode())
    with connect(fast) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        data = read_all(sock)
    # Then no answer and nothing written
    assert data == b""
    assert episodes("acme") == 0


# -- unexpected errors: a 5xx with a request id, logged at ERROR with its traceback -------------------------


def test_an_unexpected_error_is_a_500_with_a_request_id_that_the_error_log_carries(
    server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mneme.services.curation.retrieval import RetrievalService

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    key = new_key("acme", "alice", Role.reader)
    monkeypatch.setattr(RetrievalService, "retrieve", broken)
    logger = logging.getLogger("mneme")
    logger.addHandler(caplog.handler)
    try:
        response = requests.post(
            server + "/v1/retrieve", json={"path": "root"}, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
    finally:
        logger.removeHandler(caplog.handler)
    assert response.status_code == 500
    error = response.json()["error"]
    request_id = error["details"]["request_id"]
    assert error["code"] == "internal_error" and "boom" not in response.text
    assert response.headers["X-Request-Id"] == request_id
    record = next(r for r in caplog.records if r.levelno == logging.ERROR)
    assert record.request_id == request_id  # type: ignore[attr-defined]
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])


def test_the_lambda_handler_answers_an_unexpected_error_with_api_gateways_request_id(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from functions import retrieve
    from mneme.http.routes import resolve
    from mneme.local.events import LocalContext, proxy_event
    from mneme.services.curation.retrieval import RetrievalService

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(RetrievalService, "retrieve", broken)
    route, params = resolve("POST", "/v1/retrieve")
    caller = {"tenant": "acme", "principal": "alice", "roles": "reader", "principalId": "alice"}
    event = proxy_event(route, "POST", "/v1/retrieve", "", {}, '{"path": "root"}', params, caller, "apigw-req-1")
    logger = logging.getLogger("mneme")
    logger.addHandler(caplog.handler)
    try:
        response = retrieve.handler(event, LocalContext("retrieve"))
    finally:
        logger.removeHandler(caplog.handler)
    assert response["statusCode"] == 500
    assert json.loads(response["body"])["error"]["details"] == {"request_id": "apigw-req-1"}
    assert any(r.levelno == logging.ERROR and getattr(r, "request_id", None) == "apigw-req-1" for r in caplog.records)


# -- no secret in an error: h11's message quotes the line it refused ------------------------------------------


SECRET = "mnk_never-echo-this-7Qx"


@pytest.mark.parametrize(
    "request_bytes",
    [
        f"GET /v1/health HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {SECRET}\rX: y\r\n\r\n".encode(),
        f"GET /v1/health HTTP/1.1\r\nHost: t\r\nAuthorization : Bearer {SECRET}\r\n\r\n".encode(),
        f"GET /v1/changes?cursor={SECRET} HTTP/1.1 junk\r\nHost: t\r\n\r\n".encode(),
        f"GET /v1/changes?cursor={SECRET}\x80 HTTP/1.1\r\nHost: t\r\n\r\n".encode("latin-1"),
        f"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Token: {SECRET}\x00\r\n\r\n".encode(),
    ],
    ids=["bare-cr-in-authorization", "space-before-colon", "request-line", "non-ascii-target", "nul-in-value"],
)
def test_a_refused_head_names_the_problem_never_the_value(
    fast: tuple[str, int], request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a head h11 refuses, with a secret in the refused line
    caplog.set_level(logging.DEBUG)
    with connect(fast) as sock:
        sock.sendall(request_bytes)
        data = read_all(sock)
    # Then a JSON 400 that says what is wrong, and neither the answer nor any log line holds the secret
    assert error_code(data, 400) == "bad_request"
    assert SECRET.encode() not in data and b"bytearray" not in data
    assert not [r for r in caplog.records if SECRET in r.getMessage() or SECRET in str(r.exc_info)]


def test_a_bare_cr_in_a_header_names_the_header(fast: tuple[str, int]) -> None:
    with connect(fast) as sock:
        sock.sendall(f"GET /v1/health HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {SECRET}\rX: y\r\n\r\n".encode())
        message = json.loads(parse(read_all(sock))[2])["error"]["message"]
    assert "Authorization" in message and SECRET not in message


def test_a_malformed_content_length_is_refused_without_its_value(fast: tuple[str, int]) -> None:
    with connect(fast) as sock:
        sock.sendall(f"POST /v1/recall HTTP/1.1\r\nHost: t\r\nContent-Length: 1{SECRET}\r\n\r\n".encode())
        data = read_all(sock)
    assert parse(data)[0] == 400 and SECRET.encode() not in data


# -- idle connections: the newest idle one makes room -----------------------------------------------------


class Capped:
    """A server whose connection cap is `cap`; what `connect` opens is closed with it."""

    def __init__(self, cap: int, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(local, "MAX_CONNECTIONS", cap)
        self.httpd = local.make_server("127.0.0.1", 0)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.address = ("127.0.0.1", int(self.httpd.server_address[1]))
        self.opened: list[socket.socket] = []

    def connect(self) -> socket.socket:
        self.opened.append(connect(self.address, timeout=5))
        return self.opened[-1]

    def close(self) -> None:
        for sock in self.opened:
            sock.close()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def capped(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], Capped]]:
    servers: list[Capped] = []

    def start(cap: int) -> Capped:
        servers.append(Capped(cap, monkeypatch))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_idle_connections_at_the_cap_make_room_for_a_request(capped: Callable[[int], Capped]) -> None:
    # Given as many idle connections as the server takes, which never send a byte
    server = capped(8)
    idle = [server.connect() for _ in range(8)]
    time.sleep(local.NEW_GRACE + 0.3)  # past the moment a new connection has to send its request
    # Then every health check is answered, one after another, each evicting the newest idle connection
    assert [health(server.address).status_code for _ in range(5)] == [200] * 5
    # And the oldest idle connections are still open (the newest went first)
    idle[0].setblocking(False)
    with pytest.raises(BlockingIOError):
        idle[0].recv(1)


def test_idle_connections_reopened_as_fast_as_they_close_never_shut_a_request_out(
    capped: Callable[[int], Capped],
) -> None:
    # Given an attacker holding more idle connections than the cap, re-opening each one the server closes
    server = capped(8)
    watch = selectors.DefaultSelector()
    for _ in range(12):
        watch.register(server.connect(), selectors.EVENT_READ)
    stop, reopened = threading.Event(), [0]

    def attacker() -> None:
        while not stop.is_set():
            for ready, _ in watch.select(timeout=0.05):
                watch.unregister(ready.fileobj)
                with contextlib.suppress(OSError):
                    watch.register(server.connect(), selectors.EVENT_READ)
                    reopened[0] += 1

    flood = threading.Thread(target=attacker, daemon=True)
    flood.start()
    try:
        # Then every request in the meantime is served
        answers = []
        for _ in range(25):  # 2.5 s: past the grace, the attacker's connections are closed and come back
            time.sleep(0.1)
            answers.append(health(server.address).status_code)
        assert answers == [200] * 25 and reopened[0] >= 4
    finally:
        stop.set()
        flood.join()


def test_a_keep_alive_connection_waiting_for_its_next_request_is_idle_too(capped: Callable[[int], Capped]) -> None:
    server = capped(4)
    url = f"http://{server.address[0]}:{server.address[1]}/v1/health"
    with contextlib.ExitStack() as stack:
        sessions = [stack.enter_context(requests.Session()) for _ in range(4)]
        assert [s.get(url, timeout=5).status_code for s in sessions] == [200] * 4  # four kept-alive connections
        assert health(server.address).status_code == 200  # a fifth client still gets in


def test_past_twice_the_cap_with_every_connection_busy_the_answer_is_a_json_503(
    capped: Callable[[int], Capped],
) -> None:
    # Given twice the cap of connections in the middle of a request (a body that has not arrived yet)
    server = capped(4)
    key = new_key("acme", "alice", Role.writer)
    for _ in range(8):
        server.connect().sendall(remember(key, "slow")[:-5])
    time.sleep(0.3)
    # Then a new request gets a 503 in the error shape
    response = health(server.address)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "service_unavailable"


@pytest.mark.parametrize("target", [b"//[x", b"//[::1/v1/health", b"http://[x/v1/health"])
def test_a_target_no_url_parser_reads_is_a_400_not_a_500(fast: tuple[str, int], target: bytes) -> None:
    with connect(fast) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = read_all(sock)
    assert parse(data)[0] in (400, 404), data[:200]
