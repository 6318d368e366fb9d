"""osmem-server, the in-memory OpenSearch-compatible server the OpenSearch tests run against.

osmem has no `knn` query: every clone is served through `KnnProxy` (tests/support/knn_proxy.py), a test
double that answers `knn` searches as OpenSearch documents them and forwards everything else to osmem.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.knn_proxy import KnnProxy


@dataclass
class KnnClone:
    """An osmem clone behind a `KnnProxy`: `url` is the proxy's; `close()` stops both."""

    clone: Any
    proxy: KnnProxy

    @property
    def url(self) -> str:
        return self.proxy.url

    def close(self) -> None:
        self.proxy.close()
        self.clone.close()


@dataclass
class KnnOsmem:
    """The started osmem server; `clone()` gives a fresh clone with kNN (a `KnnClone`)."""

    server: Any

    def clone(self) -> KnnClone:
        clone = self.server.clone()
        return KnnClone(clone, KnnProxy(clone.url))


def started_osmem() -> Iterator[KnnOsmem]:
    """One server (without Japanese analysis) for a fixture's scope; tests take clones of it. Skips when the
    package or its bundled binary is missing for this platform."""
    osmem_server = pytest.importorskip("osmem_server")
    try:
        server = osmem_server.OsmemServer.start(japanese=False)
    except osmem_server.OsmemError as exc:
        pytest.skip(f"osmem-server did not start: {exc}")
    yield KnnOsmem(server)
    server.close()
