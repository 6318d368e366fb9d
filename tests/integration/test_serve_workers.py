"""`mneme serve --workers N`: N processes on one port and one store.

Whichever process serves a request, an acknowledged write is readable by the next request (the
other process's vector cache catches up from the index's change log; the text index and the
records are the same SQLite files), concurrent writes all land, and the workers stop with the
server (SIGINT or SIGTERM), and a worker killed with SIGKILL loses no acknowledged write and is replaced.
Each request is a new connection, so every process serves some of them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.serving import Served, children, gone, start, stop

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron", "indigo", "jasper", "kelp", "lichen"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    proc, client, banner = start(tmp_path / "home", "--workers", "2")
    assert "2 processes" in banner
    try:
        yield proc, client
    finally:
        stop(proc)


def test_every_acknowledged_write_is_read_by_the_next_request(served: Served) -> None:
    proc, client = served
    assert len(children(proc.pid)) == 1  # the second worker
    for n, word in enumerate(WORDS):
        done = client.remember("root.lab", f"the {word} sample number {n} was logged", create_scope=True)
        for mode in ({"alpha": 1.0, "beta": 0.0}, {"alpha": 0.0, "beta": 1.0}):  # vector only, then text only
            found = client.recall(f"{word} sample", scope="root.lab", limit=20, scoring=mode)
            assert done.episode_id in {r.id for r in found.results}, (word, mode)


def test_concurrent_writes_through_both_processes_all_land(served: Served) -> None:
    client = served[1]
    acked: list[str] = []
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in range(8):
                acked.append(client.remember("root.lab", f"writer {worker} note {n}", create_scope=True).episode_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seen = {ch.id for ch in client.iter_changes(page_size=200) if ch.kind == "episode" and ch.record is not None}
    assert set(acked) <= seen and len(set(acked)) == 32
    found = client.recall("writer note", scope="root.lab", limit=50, scoring={"alpha": 1.0, "beta": 0.0})
    assert {r.id for r in found.results} >= set(acked)


def test_the_workers_stop_with_the_server(served: Served) -> None:
    proc, _ = served
    workers = children(proc.pid)
    assert workers
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert gone(workers) == []


def test_sigterm_stops_the_server_and_every_worker(tmp_path: Path) -> None:
    proc, client, banner = start(tmp_path / "home", "--workers", "3")
    try:
        assert "3 processes" in banner
        client.remember("root.lab", "the kiln was fired at dawn", create_scope=True)
        workers = children(proc.pid)
        assert len(workers) == 2
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        assert gone(workers) == []
    finally:
        stop(proc)


def test_one_process_when_asked(tmp_path: Path) -> None:
    proc, client, banner = start(tmp_path / "home", "--workers", "1")
    try:
        assert "1 process (pid " in banner
        assert children(proc.pid) == []
        assert client.remember("root.lab", "a single process", create_scope=True).episode_id
    finally:
        stop(proc)


def test_a_killed_worker_loses_no_acknowledged_write_and_is_replaced(served: Served) -> None:
    """SIGKILL of a worker while 4 clients write: every write that was answered is in the feed and found by
    recall; writes cut off with the worker fail on the client's side (never half-done); a new worker takes
    its place and the server goes on answering."""
    proc, client = served
    (victim,) = children(proc.pid)
    acked: list[str] = []
    failed: list[str] = []
    stop_at = threading.Event()

    def write(writer: int) -> None:
        n = 0
        while not stop_at.is_set() and n < 40:
            try:
                done = client.remember("root.lab", f"kiln writer {writer} entry {n}", create_scope=True)
                acked.append(done.episode_id)
            except Exception as exc:  # a connection the killed worker held
                failed.append(type(exc).__name__)
            n += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and children(proc.pid) in ([], [victim]):
        time.sleep(0.2)
    stop_at.set()
    for t in threads:
        t.join()
    replacement = children(proc.pid)
    assert len(replacement) == 1 and replacement != [victim], "the parent did not start a new worker"
    assert proc.poll() is None
    acked.append(client.remember("root.lab", "kiln after the crash", create_scope=True).episode_id)
    seen = {ch.id for ch in client.iter_changes(page_size=200) if ch.kind == "episode" and ch.record is not None}
    assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged writes missing ({len(failed)} failed)"
    found = client.recall("kiln writer entry", scope="root.lab", limit=200, scoring={"alpha": 0.0, "beta": 1.0})
    assert {r.id for r in found.results} >= set(acked) - {acked[-1]}


def test_the_console_script_starts_the_same_workers(tmp_path: Path) -> None:
    """`mneme serve` (the console script `make serve` runs) starts its workers as `python -m mneme.cli serve
    --listen-fd` on the same store, whatever the parent's own command line was."""
    script = Path(sys.executable).parent / "mneme"
    if not script.exists():
        pytest.skip("the mneme console script is not installed next to this interpreter")
    proc, client, banner = start(tmp_path / "home", "--workers", "2", launcher=(str(script),))
    try:
        assert "2 processes" in banner
        (worker,) = children(proc.pid)
        command = Path(f"/proc/{worker}/cmdline").read_bytes().split(b"\0")
        assert b"mneme.cli" in command and b"--listen-fd" in command
        assert command[command.index(b"--home") + 1] == str((tmp_path / "home").resolve()).encode()
        for n in range(6):
            client.remember("root.lab", f"console script note {n}", create_scope=True)
        assert len(client.recall("console script note", scope="root.lab", limit=10).results) == 6
    finally:
        stop(proc)
