"""osmem-server, the in-memory OpenSearch-compatible server the OpenSearch tests run against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def started_osmem() -> Iterator[Any]:
    """One server (without Japanese analysis) for a fixture's scope; tests take clones of it. Skips when the
    package or its bundled binary is missing for this platform."""
    osmem_server = pytest.importorskip("osmem_server")
    try:
        server = osmem_server.OsmemServer.start(japanese=False)
    except osmem_server.OsmemError as exc:
        pytest.skip(f"osmem-server did not start: {exc}")
    yield server
    server.close()
