"""R5/R6: a rebuild (`mneme reindex`) reads a whole tenant's episodes; it needs no read-your-writes (an
episode written meanwhile is indexed by its own write), so it reads eventually consistent: half the read
units of a strongly consistent read. Measured on moto through the requests the store sends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mneme.adapters.dynamo.store import DynamoRecordStore, create_table
from mneme.models import Episode

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DynamoRecordStore, list[dict[str, Any]]]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(client, "mneme-reads")
        sent: list[dict[str, Any]] = []
        client.meta.events.register("provide-client-params.dynamodb.Query", lambda params, **_: sent.append(params))
        yield DynamoRecordStore("mneme-reads", client=client, feed_horizon_seconds=0), sent


def test_a_rebuild_reads_the_tenants_episodes_eventually_consistent(store: Any) -> None:
    records, sent = store
    episodes = [Episode(tenant="acme", episode_id=f"e{i}", scope_id="root", content=f"crate {i}", author="a",
                        occurred_at=T0, created_at=T0, content_hash=f"h{i}") for i in range(3)]  # fmt: skip
    records.put_episodes(episodes)
    sent.clear()
    assert [e.episode_id for batch in records.iter_episodes("acme") for e in batch] == ["e0", "e1", "e2"]
    assert sent and all(not params.get("ConsistentRead") for params in sent)
    sent.clear()
    records.backfill_sessions("acme")
    records.backfill_runs("acme")
    assert sent and all(not params.get("ConsistentRead") for params in sent)
