"""Fixtures the integration tests share."""

from __future__ import annotations

import pytest

from mneme import cli
from tests.integration.helpers import Api


@pytest.fixture
def admin(server: str) -> Api:
    """The admin key of the server's first run: `mneme serve` calls ensure_first_run; the `server` fixture does not."""
    key_file, created = cli.ensure_first_run()
    assert created
    return Api(server, key_file.read_text().strip())
