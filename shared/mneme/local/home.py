"""Who holds a home (MNEME_HOME): one server at a time, and no restore under anything that has it open.

- `mneme serve` holds `serve.lock` (an exclusive `flock`) for its life; its worker processes inherit the
  descriptor, so the home stays held until the last of them is gone. The holder writes who it is into the
  file, and a second `mneme serve` (or a `mneme restore`) on a held home stops at once with one line
  naming it. The kernel drops a `flock` when its process dies, kill -9 included: a crash never locks a
  home out.
- Every process that opens the store (a server and its workers, `mneme mcp`, any CLI command, `mneme
  backup`, `mneme status`) shares it (`SqliteBase`'s `FileUsers` on `mneme.db-users`): they run beside
  a server and beside each other, as SQLite's own locking lets them.
- `mneme restore` takes both exclusively (`held_for_restore`): refused while a server serves the home or
  any process has its store open.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mneme.adapters.sqlite.base import FileUsers
from mneme.errors import MnemeError
from mneme.local.checks import StoreRefused

SERVE_LOCK = "serve.lock"
LOCK_FILES = (SERVE_LOCK, "mneme.db-lock", "mneme.db-users", "index.db-lock")  # empty files, never data


class HomeInUse(MnemeError):
    code = "home_in_use"
    status = 409


class ServerLock:
    """`serve.lock` held exclusively for the life of this process (and of the processes that inherit `fd`)."""

    def __init__(self, home: Path, fd: int) -> None:
        self.home, self.fd = home, fd

    def describe(self, holder: str) -> None:
        """Say who holds it (read by a process that is refused)."""
        text = f"pid {os.getpid()}: {holder}, since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def hold_server(home: Path, holder: str) -> ServerLock:
    """Hold the home for a server (`holder` says what it is), or raise HomeInUse naming who holds it."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(home / SERVE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        raise StoreRefused(
            f"{home} cannot be written ({e.strerror}: a read-only folder or disk): Mneme needs to write its home",
            code="store_read_only",
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise HomeInUse(f"{home} is held by {holder_of(home)}: stop it first, or use another --home") from None
    lock = ServerLock(home, fd)
    lock.describe(holder)
    return lock


def holder_of(home: Path) -> str:
    """Who holds the home's server lock, as its holder described itself."""
    try:
        text = (home / SERVE_LOCK).read_text().strip()
    except OSError:
        text = ""
    match = re.match(r"pid (\d+): (.*)", text)
    if match is None:
        return "another process"
    pid = int(match.group(1))
    if _alive(pid):
        return text
    return f"the worker processes of pid {pid} ({match.group(2)}; it has exited and they stop within seconds)"


@contextlib.contextmanager
def held_for_restore(home: Path, store: Path) -> Iterator[Callable[[], None]]:
    """The home held by this process alone: no server serves it, no process has its store open (both are
    refused meanwhile). Raises HomeInUse saying which holds it. Yields what lets other processes open the
    store again while servers stay out (for the restore's last step, rebuilding the index)."""
    lock = hold_server(home, "mneme restore")
    users = FileUsers(store)
    try:
        if not users.exclusive():
            pids = _lock_holders(users.path)
            who = f"pid {', '.join(map(str, pids))}" if pids else "another process"
            raise HomeInUse(
                f"{store} is open in {who} (a `mneme` command, `mneme mcp` or a server's worker): stop it first"
            )
        yield users.release
    finally:
        users.release()
        lock.release()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_holders(path: Path) -> list[int]:
    """The pids with a lock on `path` (Linux's /proc/locks; empty elsewhere)."""
    try:
        found = os.stat(path)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    where = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    pids = set()
    for line in lines:
        fields = line.split()  # "1: FLOCK ADVISORY READ 1234 08:01:5678 0 EOF"; a waiter has "->" after "1:"
        if len(fields) > 5 and fields[1] != "->" and fields[5] == where and fields[4].isdigit():
            pids.add(int(fields[4]))
    pids.discard(os.getpid())
    return sorted(pids)
