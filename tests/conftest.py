"""Shared fixtures: a fixed clock, services on a fresh SQLite store, principals and a local server."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from mneme import bootstrap
from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.models import Principal, Role
from mneme.settings import Settings
from tests.support.embedding import HashEmbedder

EVENTS = Path(__file__).resolve().parent.parent / "events"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """A native crash prints the stack of the thread that crashed, alone: pytest's own handler prints every thread's,
    and an excerpt of a CI log can cut the one that matters out of the middle (stderr is the terminal here: pytest
    captures output only around each test)."""
    if sys.__stderr__ is not None:
        faulthandler.enable(file=os.dup(sys.__stderr__.fileno()), all_threads=False)


class FixedClock:
    def __init__(self, start: datetime = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current += timedelta(**delta)


def principal(tenant: str = "acme", name: str = "alice", *roles: Role) -> Principal:
    return Principal(tenant=tenant, principal=name, roles=frozenset(roles or (Role.admin,)))


def load_event(name: str, **overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    event.update(overrides)
    return event


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


def embedded(home: Path, clock: FixedClock) -> bootstrap.Services:
    """The real services on SQLite and the embedded index in `home`, with the test-only hashing embedder."""
    return bootstrap.build(
        Settings(home=home),
        store=SqliteRecordStore(home / "mneme.db"),
        clock=clock,
        embedder=HashEmbedder(),
        index=SqliteSearchIndex(home / "index.db"),
        background=False,
    )


@pytest.fixture
def services(tmp_path: Path, clock: FixedClock) -> bootstrap.Services:
    """The real services on SQLite and the embedded index, with the test-only hashing embedder."""
    return embedded(tmp_path, clock)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the process-wide services (handlers, local server) at a fresh MNEME_HOME."""
    monkeypatch.setenv("MNEME_HOME", str(tmp_path / "home"))
    bootstrap.reset()
    yield tmp_path / "home"
    bootstrap.reset()


@pytest.fixture
def server(home: Path) -> Iterator[str]:
    """The local server on an ephemeral loopback port; yields its base URL."""
    from mneme.local.server import make_server

    httpd = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
