"""`mneme serve` as a subprocess, for the tests that start, signal and kill it: start it on a home, find
its worker processes, stop it, wait for processes to be gone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mneme_sdk import Client as MnemeClient

ROOT = Path(__file__).resolve().parents[2]


def env(home: Path) -> dict[str, str]:
    """The environment of a `python -m mneme.cli` subprocess on `home`, running this checkout's code."""
    return {**os.environ, "MNEME_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}


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


def start(home: Path, *flags: str, launcher: tuple[str, ...] = ()) -> tuple[subprocess.Popen[str], MnemeClient, str]:
    """`mneme serve --port 0 FLAGS` on `home`: the process, a client, and its "serving on" line."""
    proc = subprocess.Popen(
        [*(launcher or (sys.executable, "-m", "mneme.cli")), "serve", "--port", "0", *flags],
        env=env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    url = banner = None
    for line in proc.stdout:
        if match := re.search(r"serving on (http://\S+)", line):
            url, banner = match.group(1), line
        if "API key" in line:
            break
    assert url is not None and banner is not None, "the server did not start"
    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()  # drain
    key = (home / "admin.key").read_text().strip()
    return proc, MnemeClient(url, key, timeout=120.0, max_retries=0), banner


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    """The pids still running after up to `timeout` seconds (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    alive = pids
    while True:
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists()]
        alive = [pid for pid in alive if ") Z " not in Path(f"/proc/{pid}/stat").read_text()]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)
