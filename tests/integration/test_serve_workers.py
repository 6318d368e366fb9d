"""`mneme serve --workers 2`: two processes on one port and one store.

Whichever process serves a request, an acknowledged write is readable by the next request (the
other process's vector cache catches up from the index's change log; the text index and the
records are the same SQLite files), concurrent writes all land, and the workers stop with the
server. Each request is a new connection, so both processes serve some of them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mneme.client import MnemeClient

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heron", "indigo", "jasper", "kelp", "lichen"]


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


Served = tuple[subprocess.Popen[str], MnemeClient]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    env = {**os.environ, "MNEME_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:
        if match := re.search(r"serving on (http://\S+)", line):
            url = match.group(1)
            assert "2 processes" in line
        if "API key" in line:
            break
    assert url is not None, "the server did not start"
    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()  # drain
    key = (tmp_path / "home" / "admin.key").read_text().strip()
    try:
        yield proc, MnemeClient(url, key, timeout=120.0, max_retries=0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


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
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.2)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    assert not [pid for pid in alive if ") Z " not in Path(f"/proc/{pid}/stat").read_text()]  # gone, or a zombie
