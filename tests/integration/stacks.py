"""The local server over either record store: SQLite, or DynamoDB under moto (same HTTP, same handlers).

`served(kind, tmp_path, monkeypatch)` builds the services with the test-only hashing embedder and the
embedded index, makes them the process-wide services, and serves them on an ephemeral loopback port.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from mneme import bootstrap
from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.models import Role
from mneme.ports import Embedder, RecordStore
from mneme.settings import Settings
from tests.conftest import FixedClock
from tests.integration.helpers import Api
from tests.support.embedding import HashEmbedder
from tests.support.moto import one_call_at_a_time

STORES = ("sqlite", "dynamodb")


@dataclass
class Served:
    admin: Api
    services: bootstrap.Services
    clock: FixedClock

    def key(self, principal: str, *roles: Role | str) -> Api:
        secret, _ = self.services.keys.create("acme", principal, list(roles))
        return self.admin.as_key(secret)


def _store(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RecordStore:
    if kind == "sqlite":
        from mneme.adapters.sqlite.store import SqliteRecordStore

        return SqliteRecordStore(tmp_path / "mneme.db")
    from mneme.adapters.dynamo.store import DynamoRecordStore, create_table

    one_call_at_a_time(monkeypatch)  # the server's threads race; moto must be as isolated as DynamoDB
    client = boto3.client("dynamodb", region_name="eu-west-1")
    create_table(client, "mneme-it")
    return DynamoRecordStore("mneme-it", client=client, feed_horizon_seconds=0)


@contextmanager
def served(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder | None = None
) -> Iterator[Served]:
    from mneme.local.server import make_server

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        clock = FixedClock()
        services = bootstrap.build(
            Settings(home=tmp_path, cursor_secret="integration-secret"),  # type: ignore[arg-type]
            store=_store(kind, tmp_path, monkeypatch),
            clock=clock,
            embedder=embedder or HashEmbedder(),
            index=SqliteSearchIndex(tmp_path / "index.db"),
            background=False,
        )
        httpd = make_server("127.0.0.1", 0, services=lambda: services)  # the server's routes run on these
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            base = f"http://127.0.0.1:{httpd.server_address[1]}"
            secret, _ = services.keys.create("acme", "root-admin", [Role.admin])
            yield Served(Api(base, secret), services, clock)
        finally:
            httpd.shutdown()
            httpd.server_close()
            bootstrap.reset()
