"""An attack run on `mneme serve` over loopback: cross-tenant attempts, role escalations, crafted HTTP, and a
write load with worker processes killed with SIGKILL. Prints the counts; exit 1 on any leak, escalation,
lost or duplicated write.

Starts `python -m mneme.cli serve --port 0` (bench/load.py's `start_server`) on a temp MNEME_HOME with two
tenants: A (`default`, seeded with memories, a pending draft, episodes and an alias, every text carrying a
marker) and B (a key per role). Then:

- cross-tenant: every authenticated route, called with each of B's keys on A's ids, paths and aliases
  (and recall / the change feed asked for A's marker), `--rounds` times: a leak is A's marker in any answer,
  or any change to what A's admin sees;
- role escalations: every route called by every key of A whose role is below the route's, plain and with
  a body or headers that claim a tenant or roles: an escalation is any answer but 403;
- crafted HTTP: two Content-Lengths with a smuggled remember, a chunked body behind a Content-Length;
- existence: another writer of A probes the first writer's unapproved work (a key held only by its draft,
  its rejected and withdrawn memories), each probe paired with the same call on a fresh key or an unknown id:
  any difference in status or error code is a leak;
- slowloris: `--slow-clients` connections send one header line a second and never end the head: each must
  get a 408 at the head deadline, and a health check meanwhile must be answered;
- idle connections: `--idle` TCP connections (no key, never a byte; more than every process's connection cap
  together), each re-opened as soon as the server closes it, for 40 s while 20 health checks are made: each
  must be answered 200 (a refusal must be a JSON 503);
- keys in refused heads: heads h11 refuses (a bare CR, a space before the colon, a bad request line, a NUL, a
  bad Content-Length, a chunked body) carrying a live key: no answer and no line of the server's log may hold it;
- metadata partition: Bob's turn (`metadata.user: bob`) and two of Ines's in one scope, consolidated; recall
  under `{"metadata": {"user": "bob"}, "tiers": ["daily", "weekly"]}` and `GET /v1/facts?metadata.user=bob` may
  return nothing with Ines's words;
- load: `--clients` writers remember for `--seconds`, each with its own idempotency keys (retrying a failed
  call with the same key), while a worker process is killed with SIGKILL `--kills` times; then every
  acknowledged episode must be in the change feed once, and no content stored twice.

    .venv/bin/python bench/attack.py [--rounds 5] [--clients 16] [--seconds 58] [--kills 7] [--workers 3]
        [--slow-clients 64] [--idle 800]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from load import start_server

from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.bootstrap import SystemClock
from mneme.http.routes import ROUTES, Route
from mneme.identity import ROLE_RANK, Role
from mneme.services.keys import KeyService

A, B = "default", "tenant-b"
MARK = "A-SECRET-7f3c"
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/retrieve"): {"path": "root.pennine"},
    ("POST", "/v1/remember"): {"items": [{"scope": "root.pennine.vat", "content": "x"}]},
    ("POST", "/v1/recall"): {"query": "kiln episode", "scope": "root.pennine"},  # A's words (the pack echoes a query)
    ("POST", "/v1/sttp/validate"): {"content": "x"},
    ("POST", "/v1/consolidate"): {"scopes": ["root.pennine"]},
    ("POST", "/v1/scopes"): {"path": "root.pennine.new", "parents": True},
    ("POST", "/v1/scopes/rename"): {"path": "root.pennine", "new_path": "root.taken"},
    ("PUT", "/v1/layers"): {"layers": {"1": "regions"}},
    ("POST", "/v1/memories"): {"scope": "root.pennine", "key": "new-note", "body": "hello"},
    ("PATCH", "/v1/memories/{memory_id}"): {"body": "changed"},
    ("POST", "/v1/memories/{memory_id}/reject"): {"reason": "no"},
    ("POST", "/v1/structure/drafts"): {"operations": [{"op": "delete", "path": "root.pennine"}]},
    ("POST", "/v1/keys"): {"principal": "sneaky", "roles": ["admin"]},
}


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url, self.session = url, requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> requests.Response:
        return self.session.request(method, self.url + path, json=body, headers=headers, timeout=60)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        response = self.call(method, path, body)
        assert response.status_code < 300, (method, path, response.status_code, response.text[:300])
        return response.json() if response.content else None


def fill(route: Route, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "unknown"), route.path)


def seed(admin: Api, writer: Api) -> dict[str, str]:
    admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
    admin.ok("POST", "/v1/scopes", {"path": "root.pennine-joinery.vat", "parents": True})
    scoped = admin.ok("POST", "/v1/memories", {"scope": "root.pennine-joinery.vat", "key": "vat", "body": MARK})
    admin.ok("POST", "/v1/memories", {"tag": "services=vat", "key": "rule", "body": f"{MARK} tagged"})
    draft = writer.ok("POST", "/v1/memories", {"scope": "root", "key": "draft", "body": f"{MARK} pending"})
    admin.ok("POST", "/v1/scopes/rename", {"path": "root.pennine-joinery", "new_path": "root.pennine"})
    items = [{"scope": "root.pennine.vat", "content": f"{MARK} kiln episode {i}"} for i in range(20)]
    admin.ok("POST", "/v1/remember", {"items": items})
    run = admin.ok("POST", "/v1/consolidate", {})
    for _ in range(600):  # A's state is compared before and after the attempts: the run must be over first
        if admin.ok("GET", f"/v1/consolidations/{run['run_id']}")["status"] != "running":
            break
        time.sleep(0.1)
    key = admin.ok("POST", "/v1/keys", {"principal": "victim", "roles": ["reader"]})
    return {"memory_id": scoped["memory_id"], "draft_id": draft["memory_id"], "run_id": run.get("run_id", "x"),
            "key_id": key["key_id"], "asset": "index.html"}  # fmt: skip


def state(admin: Api) -> str:
    """What A's admin sees: the bundle through the alias, its memories' versions, the feed's length."""
    bundle = admin.call("POST", "/v1/retrieve", {"path": "root.pennine.vat"}).text
    feed = admin.call("GET", "/v1/changes?limit=200").json()
    return bundle + json.dumps(sorted((c["id"], c.get("record", {}).get("version")) for c in feed["changes"]))


def cross_tenant(url: str, b_keys: dict[Role, str], admin_a: Api, ids: dict[str, str], rounds: int) -> tuple[int, int]:
    before, attempts, leaks = state(admin_a), 0, 0
    variants = [ids, {**ids, "memory_id": ids["draft_id"]}]
    for _ in range(rounds):
        for _role, key in b_keys.items():
            api = Api(url, key)
            for route in (r for r in ROUTES if r.role is not None):
                for given in variants:
                    for path in ("root.pennine", "root.pennine-joinery.vat"):  # canonical, then alias
                        body = json.loads(json.dumps(BODIES.get((route.method, route.path)) or {}).replace(
                            "root.pennine", path)) or None  # fmt: skip
                        response = api.call(route.method, fill(route, given), body)
                        attempts += 1
                        if MARK in response.text:
                            leaks += 1
                            print(f"LEAK {route.method} {fill(route, given)}: {response.text[:200]}", file=sys.stderr)
    if state(admin_a) != before:
        leaks += 1
        print("LEAK: what A's admin sees changed", file=sys.stderr)
    return attempts, leaks


def escalations(url: str, a_keys: dict[Role, str], ids: dict[str, str]) -> tuple[int, int]:
    attempts = escalated = 0
    claims: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({}, {}),
        ({"tenant": B, "roles": ["admin"], "principal": "root"}, {}),
        ({}, {"X-Mneme-Tenant": B, "X-Mneme-Roles": "admin", "X-Amzn-Principal": "root"}),
    ]
    for route in (r for r in ROUTES if r.role is not None):
        for role, key in a_keys.items():
            if ROLE_RANK[role] >= ROLE_RANK[route.role]:  # type: ignore[index]
                continue
            for extra, headers in claims:
                body = {**(BODIES.get((route.method, route.path)) or {}), **extra} or None
                response = Api(url, key).call(route.method, fill(route, ids), body, **headers)
                attempts += 1
                escalated += response.status_code != 403
    return attempts, escalated


def crafted(url: str, writer_key: str, count: Any) -> tuple[int, int]:
    """Smuggling attempts: a remember hidden behind two Content-Lengths, or behind a chunked body."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"items": [{"scope": "root", "content": "SMUGGLED"}]}).encode()
    hidden = (f"POST /v1/remember HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {writer_key}\r\n"
              f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip
    front = f"POST /v1/recall HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {writer_key}\r\n"
    query = '{"query": "x"}'
    heads = [  # the front request is complete by its first framing; the hidden one follows by the other
        f"{front}Content-Length: {len(query) + len(hidden)}\r\nContent-Length: {len(query)}\r\n\r\n{query}",
        f"{front}Content-Length: {len(query) + len(hidden)}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        f"{front}Transfer-Encoding : chunked\r\nContent-Length: {len(query)}\r\n\r\n{query}",
    ]
    for head in heads:
        with socket.create_connection((host, int(port)), timeout=3) as sock, contextlib.suppress(OSError):
            sock.sendall(head.encode() + hidden)
            while sock.recv(65536):  # until the server closes (or keeps the connection: the timeout)
                pass
    return len(heads), count("SMUGGLED")


UNKNOWN_ID = "00000000-0000-0000-0000-000000000000"


def answer(response: requests.Response) -> tuple[int, str | None]:
    """What a caller learns from an answer: its status and its error code."""
    error = response.json().get("error") if response.status_code >= 400 else None
    return response.status_code, error.get("code") if error else None


def existence(admin: Api, author: Api, other: Api) -> tuple[int, int]:
    """Probes of another writer's unapproved work, each paired with the same call on what does not exist: a
    leak is any pair whose answers differ (a key held by a draft vs a fresh key; a rejected or withdrawn
    memory vs an unknown id)."""
    rejected = author.ok("POST", "/v1/memories", {"scope": "root", "key": "to-reject", "body": f"{MARK} r"})
    admin.ok("POST", f"/v1/memories/{rejected['memory_id']}/reject", {"reason": "no"})
    withdrawn = author.ok("POST", "/v1/memories", {"scope": "root", "key": "to-withdraw", "body": f"{MARK} w"})
    author.ok("POST", f"/v1/memories/{withdrawn['memory_id']}/archive")
    pairs = [
        (("POST", "/v1/memories", {"scope": "root", "key": key, "body": "mine"}),
         ("POST", "/v1/memories", {"scope": "root", "key": f"fresh-{key}", "body": "mine"}))
        for key in ("draft", "to-reject", "to-withdraw")
    ]  # fmt: skip
    for memory_id in (rejected["memory_id"], withdrawn["memory_id"]):
        for method, suffix, body in (("PATCH", "", {"body": "x"}), ("POST", "/archive", None)):
            hidden = (method, f"/v1/memories/{memory_id}{suffix}", body)
            pairs.append((hidden, (method, f"/v1/memories/{UNKNOWN_ID}{suffix}", body)))
    leaks = 0
    for hidden, unknown in pairs:
        seen, baseline = answer(other.call(*hidden)), answer(other.call(*unknown))
        if seen != baseline or MARK in other.call(*hidden).text:
            leaks += 1
            print(f"EXISTENCE {hidden[0]} {hidden[1]}: {seen}, unknown: {baseline}", file=sys.stderr)
    return len(pairs), leaks


def slowloris(url: str, clients: int, interval: float, deadline: float) -> dict[str, float]:
    """`clients` connections each sending one header line every `interval` s, never ending the head, while a
    health check is timed: how many were cut off with a 408, and how long the health check took."""
    host, port = url.removeprefix("http://").split(":")
    socks = [socket.create_connection((host, int(port)), timeout=deadline) for _ in range(clients)]
    for sock in socks:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n")
    done = threading.Event()

    def trickle() -> None:
        for i in range(int(deadline / interval)):
            if done.wait(interval):
                return
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X-%d: y\r\n" % i)

    threading.Thread(target=trickle, daemon=True).start()
    start = time.monotonic()
    healthy = requests.get(url + "/v1/health", timeout=deadline).status_code == 200
    health_ms = (time.monotonic() - start) * 1000 if healthy else -1.0
    cut = 0
    for sock in socks:
        data = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                data += chunk
        cut += data.startswith(b"HTTP/1.1 408")
        sock.close()
    done.set()
    return {"clients": clients, "cut_off": cut, "seconds": time.monotonic() - start, "health_ms": health_ms}


def idle_flood(url: str, connections: int, seconds: float, probes: int) -> dict[str, int]:
    """`connections` TCP connections that never send a byte, each re-opened as soon as the server closes it, for
    `seconds`, while `probes` health checks are spread over that time: how each check was answered."""
    host, port = url.removeprefix("http://").split(":")

    def opened() -> socket.socket:
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.setblocking(False)
        return sock

    watch = selectors.DefaultSelector()
    for _ in range(connections):
        watch.register(opened(), selectors.EVENT_READ)
    stop, reopened = threading.Event(), [0]

    def keep_open() -> None:  # the attacker: whatever the server closes comes back at once
        while not stop.is_set():
            for ready, _ in watch.select(timeout=0.2):
                sock = ready.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    if sock.recv(65536):
                        continue  # an answer (408, 503) before the close: read on
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                watch.unregister(sock)
                sock.close()
                with contextlib.suppress(OSError):
                    watch.register(opened(), selectors.EVENT_READ)
                    reopened[0] += 1

    attacker = threading.Thread(target=keep_open, daemon=True)
    attacker.start()
    answers: Counter[str] = Counter()
    for _ in range(probes):
        time.sleep(seconds / probes)
        try:
            response = requests.get(url + "/v1/health", timeout=10)
            json_body = response.headers.get("Content-Type", "").startswith("application/json")
            answers[f"{response.status_code}{'' if json_body else ' (not JSON)'}"] += 1
        except requests.RequestException:
            answers["no answer"] += 1
    stop.set()
    attacker.join()
    for ready in list(watch.get_map().values()):
        ready.fileobj.close()  # type: ignore[union-attr]
    return {"connections": connections, "probes": probes, "reopened": reopened[0], **answers}


def keys_in_refused_heads(url: str, key: str, log: list[str]) -> tuple[int, int, int]:
    """Heads h11 refuses, each carrying a live key where h11 quotes what it refused: (heads sent, answers that
    hold the key, lines of the server's log that hold it)."""
    host, port = url.removeprefix("http://").split(":")
    heads = [
        f"GET /v1/me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\rX: y\r\n\r\n",  # a bare CR
        f"GET /v1/me HTTP/1.1\r\nHost: t\r\nAuthorization : Bearer {key}\r\n\r\n",  # a space before the colon
        f"GET /v1/changes?cursor={key} HTTP/1.1 x\r\nHost: t\r\n\r\n",  # a request line h11 cannot read
        f"GET /v1/changes?cursor={key}\x80 HTTP/1.1\r\nHost: t\r\n\r\n",  # a byte outside ASCII in the target
        f"GET /v1/me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\x00\r\n\r\n",  # a NUL in the value
        f"GET /v1/me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\nContent-Length: 1{key}\r\n\r\n",
        f"POST /v1/recall HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\nTransfer-Encoding: chunked\r\n\r\n"
        f"{key}\r\n",  # a chunk header h11 quotes
    ]
    echoed = 0
    for head in heads:
        answer = b""
        with socket.create_connection((host, int(port)), timeout=5) as sock, contextlib.suppress(OSError):
            sock.sendall(head.encode("latin-1"))
            while chunk := sock.recv(65536):
                answer += chunk
        echoed += key.encode() in answer
    time.sleep(1.0)  # the log is read from the server's output by a thread
    return len(heads), echoed, sum(key in line for line in log)


INES = ("dairy", "cheese", "Ines", "Marta", "sister")  # words only Ines's turns hold


def metadata_partition(admin: Api) -> tuple[int, int]:
    """Bob's turn and two of Ines's in one scope, consolidated; then Bob's view through a metadata filter, on
    roll-ups and facts: (reads, reads that returned a record with Ines's words)."""
    turns = [("bob", "Bob: I booked the table at the bistro for Friday evening."),
             ("ines", "Ines: I have stopped eating cheese, no dairy for me any more."),
             ("ines", "Ines: my sister Marta visits us in June.")]  # fmt: skip
    items = [{"scope": "root.users", "content": text, "metadata": {"user": user}, "create_scope": True,
              "session_id": "dinner"} for user, text in turns]  # fmt: skip
    admin.ok("POST", "/v1/remember", {"items": items})
    time.sleep(3)  # past consolidation's settle window
    run = admin.ok("POST", "/v1/consolidate", {"scopes": ["root.users"]})
    for _ in range(600):
        if admin.ok("GET", f"/v1/consolidations/{run['run_id']}")["status"] != "running":
            break
        time.sleep(0.1)
    reads, leaks = 0, 0
    for query in ("dairy", "what does she eat", "who visits in June", "Friday"):
        body = {"query": query, "scope": "root.users", "metadata": {"user": "bob"}, "tiers": ["daily", "weekly"],
                "scoring": {"strictness": "recall"}}  # fmt: skip
        found = admin.ok("POST", "/v1/recall", body)
        # the pack without the query its header repeats ("# recall: dairy")
        texts = [result["content"] for result in found["results"]] + [found["context"].replace(query, "")]
        reads, leaks = reads + 1, leaks + any(word in text for text in texts for word in INES)
    facts = admin.ok("GET", "/v1/facts?scope=root.users&metadata.user=bob&limit=200")["facts"]
    reads, leaks = reads + 1, leaks + any(word in json.dumps(fact) for fact in facts for word in INES)
    if leaks:
        print(f"PARTITION: {leaks} of {reads} reads filtered on user bob returned Ines's words", file=sys.stderr)
    return reads, leaks


def load(
    url: str, key: str, clients: int, seconds: float, kills: int, workers: Callable[[], list[int]]
) -> dict[str, int]:
    acked: dict[str, str] = {}
    errors = [0]
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def write(wid: int) -> None:
        api, n = Api(url, key), 0
        while time.monotonic() < stop:
            content, idem = f"load {wid}-{n} {random.random()}", f"w{wid}-{n}"
            for _ in range(10):  # retried with the same key until acknowledged (a killed worker drops the call)
                try:
                    response = api.call(
                        "POST",
                        "/v1/remember",
                        {
                            "items": [
                                {
                                    "scope": "root.load",
                                    "content": content,
                                    "idempotency_key": idem,
                                    "create_scope": True,
                                }
                            ]
                        },
                    )
                    if response.status_code == 201:
                        with lock:
                            acked[response.json()["episode_ids"][0]] = content
                        break
                except requests.RequestException:
                    pass
                with lock:
                    errors[0] += 1
                time.sleep(0.1)
            n += 1

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(clients)]
    for t in threads:
        t.start()
    killed = 0
    for _ in range(kills):
        time.sleep(seconds / (kills + 1))
        alive = workers()
        if alive:
            os.kill(random.choice(alive), signal.SIGKILL)
            killed += 1
    for t in threads:
        t.join()
    return {"acked": len(acked), "errors_retried": errors[0], "kills": killed, **check(url, key, acked)}


def check(url: str, key: str, acked: dict[str, str]) -> dict[str, int]:
    api, cursor, stored = Api(url, key), None, {}
    contents: dict[str, int] = {}
    while True:
        query = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = api.session.get(url + "/v1/changes", params=query, timeout=60).json()
        for change in page["changes"]:
            record = change.get("record") or {}
            if change["kind"] == "episode" and str(record.get("content", "")).startswith("load "):
                stored[change["id"]] = record["content"]
                contents[record["content"]] = contents.get(record["content"], 0) + 1
        cursor = page.get("next_cursor")
        if not page.get("has_more"):
            break
    lost = sum(1 for episode_id in acked if episode_id not in stored)
    return {"lost": lost, "duplicated": sum(n - 1 for n in contents.values() if n > 1)}


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="cross-tenant rounds over every route and key")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=58.0)
    parser.add_argument("--kills", type=int, default=7)
    parser.add_argument("--workers", default="3")
    parser.add_argument("--slow-clients", type=int, default=64, help="slowloris connections")
    parser.add_argument("--idle", type=int, default=800, help="idle connections (3 processes take 3 x 256)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, log = Path(tmp) / "home", []
        proc, url, admin_key = start_server(home, log, args.workers)
        try:
            keys = KeyService(SqliteRecordStore(home / "mneme.db"), SystemClock())
            a_keys = {role: keys.create(A, f"a-{role.value}", [role])[0] for role in Role}
            b_keys = {role: keys.create(B, f"b-{role.value}", [role])[0] for role in Role}
            admin_a = Api(url, admin_key)
            ids = seed(admin_a, Api(url, a_keys[Role.writer]))
            tried, leaks = cross_tenant(url, b_keys, admin_a, ids, args.rounds)
            print(f"cross-tenant attempts: {tried}, leaks: {leaks}")
            tried, escalated = escalations(url, a_keys, ids)
            print(f"role escalation attempts: {tried}, escalations: {escalated}")

            def smuggled(text: str) -> int:
                found = admin_a.call("POST", "/v1/recall", {"query": text, "scope": "root"}).json()
                return sum(text in (r.get("content") or "") for r in found["results"])

            tried, through = crafted(url, a_keys[Role.writer], smuggled)
            print(f"smuggling attempts: {tried}, smuggled writes: {through}")
            other = Api(url, keys.create(A, "a-other-writer", [Role.writer])[0])
            probes, existing = existence(admin_a, Api(url, a_keys[Role.writer]), other)
            print(f"existence probes: {probes}, answers that differ from the unknown's: {existing}")
            slow = slowloris(url, args.slow_clients, 1.0, 40.0)
            print(
                f"slowloris: {slow['clients']} clients sending a header line a second, {slow['cut_off']} cut off "
                f"with 408 within {slow['seconds']:.1f} s; a health check meanwhile took {slow['health_ms']:.0f} ms"
            )
            idle = idle_flood(url, args.idle, 40.0, 20)
            answered = ", ".join(f"{n} {status}" for status, n in sorted(idle.items()) if status[0].isdigit()
                                 or status == "no answer")  # fmt: skip
            print(
                f"idle connections: {idle['connections']} never sending a byte, re-opened when closed "
                f"({idle['reopened']} times) for 40 s: {idle['probes']} health checks answered {answered}"
            )
            heads, echoed, logged = keys_in_refused_heads(url, a_keys[Role.reader], log)
            print(f"keys in refused heads: {heads} heads carrying a live key, {echoed} answers and {logged} log "
                  "lines holding it")  # fmt: skip
            reads, partition_leaks = metadata_partition(admin_a)
            print(f"metadata partition: {reads} reads filtered on Bob's metadata, {partition_leaks} with Ines's words")
            result = load(url, admin_key, args.clients, args.seconds, args.kills, lambda: children(proc.pid))
            print(
                f"load: {args.clients} clients for {args.seconds:.0f} s, {result['kills']} kill -9 rounds: "
                f"{result['acked']} acknowledged episodes, {result['lost']} lost, {result['duplicated']} duplicated "
                f"({result['errors_retried']} failed calls retried with their idempotency key)"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    failed = leaks or escalated or through or existing or slow["cut_off"] < slow["clients"] or slow["health_ms"] < 0
    failed = failed or idle.get("200", 0) < idle["probes"] or echoed or logged or partition_leaks
    sys.exit(1 if failed or result["lost"] or result["duplicated"] else 0)


if __name__ == "__main__":
    main()
