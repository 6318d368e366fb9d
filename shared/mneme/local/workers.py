"""The processes of `mneme serve`: how many (`--workers`), started on the parent's listening socket,
restarted when one dies, and stopped together.

Each worker is a fresh interpreter (`python -m mneme.cli serve --listen-fd FD ...`) with its own engine
over the same SQLite files (WAL: readers never wait; writers take turns on SQLite's lock, so a write
stays atomic and idempotent whichever process serves it; each process's vector cache catches up with
the others' writes from the index's change log). Connections go to whichever process accepts first.

A write is acknowledged only after SQLite committed it, so a worker that dies (even by SIGKILL) loses
no acknowledged write: its in-flight requests fail on the client's side, and the parent starts a new
worker in its place (at most `RESTART_LIMIT` times per `RESTART_WINDOW` seconds, so a worker that
cannot start does not spin; past that the remaining processes go on serving).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import deque

from mneme.errors import InvalidInput
from mneme.observability import logger

AUTO_MAX = 4  # `--workers auto`: one process per usable CPU, at most this many (each holds a model: ~400 MB)
RESTART_LIMIT = 5
RESTART_WINDOW = 60.0
POLL = 0.5  # seconds between looks at the workers


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call (macOS)
        return os.cpu_count() or 1


def worker_count(value: str) -> int:
    """`--workers`: 'auto' (usable CPUs, at most AUTO_MAX) or a whole number of at least 1."""
    text = value.strip().lower()
    if text == "auto":
        return max(1, min(usable_cpus(), AUTO_MAX))
    if not (text.isascii() and text.isdecimal()) or int(text) < 1:
        raise InvalidInput(f"--workers must be 'auto' or a whole number of at least 1, not {value[:40]!r}")
    return int(text)


class Workers:
    """`count` worker processes serving the inherited socket `fd`; `argv` is what follows
    `python -m mneme.cli` for each (the parent adds `--listen-fd`). They also inherit the descriptors in
    `keep` (the home's server lock: held until the last of them is gone)."""

    def __init__(self, fd: int, argv: list[str], count: int, keep: tuple[int, ...] = ()) -> None:
        self.fd = fd
        self.keep = keep
        self.command = [sys.executable, "-m", "mneme.cli", *argv, "--listen-fd", str(fd)]
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.restarts: deque[float] = deque()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            self.procs = [self._spawn() for _ in range(self.count)]
        if self.count:
            self._watcher = threading.Thread(target=self._watch, name="worker-watch", daemon=True)
            self._watcher.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command, pass_fds=(self.fd, *self.keep))

    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self.procs]

    def _watch(self) -> None:
        while not self._stopping.wait(POLL):
            self.check()

    def check(self) -> None:
        """Replace the workers that exited (unless stopping, or past the restart limit)."""
        with self._lock:
            for i, proc in enumerate(self.procs):
                code = proc.poll()
                if code is None or self._stopping.is_set():
                    continue
                now = time.monotonic()
                while self.restarts and now - self.restarts[0] > RESTART_WINDOW:
                    self.restarts.popleft()
                if len(self.restarts) >= RESTART_LIMIT:
                    continue  # logged once below, when it is first reached
                self.restarts.append(now)
                self.procs[i] = self._spawn()
                logger.warning(
                    f"mneme serve: worker {proc.pid} exited ({code}); started worker {self.procs[i].pid} in its place"
                )
                if len(self.restarts) == RESTART_LIMIT:
                    logger.error(f"mneme serve: {RESTART_LIMIT} worker restarts in {RESTART_WINDOW:.0f} s; no more")

    def stop(self, timeout: float = 10.0) -> None:
        """Ask every worker to stop (SIGTERM: they finish the requests they hold), then kill stragglers."""
        self._stopping.set()
        with self._lock:
            procs = list(self.procs)
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
