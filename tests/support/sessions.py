"""Positions in a session's order for tests that ask for the turns said before a time."""

from __future__ import annotations

from datetime import UTC, datetime

from mneme.models import SessionPosition

EARLIEST_CALL = datetime(2000, 1, 1, tzinfo=UTC)  # before every test's creation times


def said_before(moment: datetime) -> SessionPosition:
    """The position just before every turn said at `moment`: `session_episodes` then gives those said earlier."""
    return SessionPosition(moment, EARLIEST_CALL, 0)
