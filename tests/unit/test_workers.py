"""`mneme serve --workers`: 'auto' (the default) is one process per usable CPU, capped; a number overrides it."""

from __future__ import annotations

from collections import deque

import pytest

from mneme.cli.app import parser
from mneme.errors import InvalidInput
from mneme.local import workers


def test_the_default_is_auto() -> None:
    assert parser().parse_args(["serve"]).workers == "auto"
    assert parser().parse_args(["serve", "--workers", "1"]).workers == "1"


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 2), (3, 3), (16, workers.AUTO_MAX)])
def test_auto_is_the_usable_cpus_capped(monkeypatch: pytest.MonkeyPatch, cpus: int, expected: int) -> None:
    monkeypatch.setattr(workers, "usable_cpus", lambda: cpus)
    assert workers.worker_count("auto") == expected
    assert workers.worker_count(" AUTO ") == expected


def test_a_number_overrides_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "usable_cpus", lambda: 16)
    assert workers.worker_count("1") == 1
    assert workers.worker_count("6") == 6  # above the cap when asked for


@pytest.mark.parametrize("value", ["0", "-1", "two", "", "1.5", "²"])
def test_bad_counts_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput):
        workers.worker_count(value)


def test_usable_cpus_is_at_least_one() -> None:
    assert workers.usable_cpus() >= 1


class Exited:
    """A worker process that has already exited with `code` (None: still running)."""

    pids = iter(range(1000, 2000))

    def __init__(self, code: int | None) -> None:
        self.pid = next(self.pids)
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_a_dead_worker_is_replaced_at_most_the_restart_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    crashing = workers.Workers(fd=3, argv=["serve"], count=2)
    monkeypatch.setattr(crashing, "_spawn", lambda: Exited(-9))  # every worker dies at once
    crashing.procs = [Exited(None), Exited(-9)]
    running = crashing.procs[0]
    for _ in range(workers.RESTART_LIMIT * 3):
        crashing.check()
    assert len(crashing.restarts) == workers.RESTART_LIMIT  # then it stops trying (for RESTART_WINDOW)
    assert crashing.procs[0] is running and len(crashing.procs) == 2


def test_no_worker_is_restarted_while_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    stopping = workers.Workers(fd=3, argv=["serve"], count=1)
    monkeypatch.setattr(stopping, "_spawn", lambda: Exited(None))
    stopping.procs = [Exited(0)]
    stopping._stopping.set()
    stopping.check()
    assert stopping.restarts == deque() and stopping.procs[0].poll() == 0


def test_the_worker_command_is_explicit() -> None:
    """Not the parent's own argv: `mneme serve`, `python -m mneme.cli serve` and `make serve` start the same."""
    started = workers.Workers(fd=7, argv=["serve", "--home", "/h", "--host", "127.0.0.1", "--port", "8080"], count=1)
    assert started.command[1:] == ["-m", "mneme.cli", "serve", "--home", "/h", "--host", "127.0.0.1", "--port",
                                   "8080", "--listen-fd", "7"]  # fmt: skip
