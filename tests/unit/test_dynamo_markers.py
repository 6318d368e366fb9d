"""R7: the cross-tenant marks (unindexed episodes, dirty scopes) live in GSI1 partitions sharded by a hash
of the tenant, not in one `UNINDEXED` / `DIRTY` partition every tenant writes (a hot partition). The sweep
and the consolidation schedule still see every tenant's marks, oldest first, and marks written before the
sharding (the bare partition) too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mneme.adapters.dynamo.codec import DIRTY, marker_partition
from mneme.adapters.dynamo.store import DynamoRecordStore, create_table
from mneme.models import Episode

T0 = datetime(2026, 12, 1, tzinfo=UTC)
TENANTS = [f"tenant-{i}" for i in range(12)]


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DynamoRecordStore, Any]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(client, "mneme-marks")
        yield DynamoRecordStore("mneme-marks", client=client, feed_horizon_seconds=0), client


def gsi1_partitions(client: Any) -> set[str]:
    items = client.scan(TableName="mneme-marks")["Items"]
    return {item["GSI1PK"]["S"] for item in items if "GSI1PK" in item}


def test_unindexed_marks_spread_over_partitions_and_are_all_listed_oldest_first(store: Any) -> None:
    records, client = store
    for i, tenant in enumerate(TENANTS):
        created = T0 + timedelta(minutes=i)
        records.put_episodes([Episode(tenant=tenant, episode_id="e", scope_id="root", content="x", author="a",
                                      occurred_at=created, created_at=created, content_hash="h")])  # fmt: skip
    partitions = gsi1_partitions(client)
    assert len(partitions) > 4 and all(p.startswith("UNINDEXED#") for p in partitions)
    assert [e.tenant for e in records.list_unindexed(100)] == TENANTS
    assert [e.tenant for e in records.list_unindexed(3)] == TENANTS[:3]


def test_dirty_marks_spread_over_partitions_and_the_schedule_sees_them_all(store: Any) -> None:
    records, client = store
    for i, tenant in enumerate(TENANTS):
        records.mark_dirty(tenant, ["s1"], T0 + timedelta(minutes=i))
    assert len({p for p in gsi1_partitions(client) if p.startswith(f"{DIRTY}#")}) > 4
    assert records.list_dirty(None, 100) == [(tenant, "s1") for tenant in TENANTS]
    assert marker_partition(DIRTY, "tenant-0") == marker_partition(DIRTY, "tenant-0")  # stable per tenant


def test_marks_written_before_the_sharding_are_still_found(store: Any) -> None:
    records, client = store
    records.put_episodes([Episode(tenant="acme", episode_id="old", scope_id="root", content="x", author="a",
                                  occurred_at=T0, created_at=T0, content_hash="h")])  # fmt: skip
    (item,) = [i for i in client.scan(TableName="mneme-marks")["Items"] if "GSI1PK" in i]
    bare = {":bare": {"S": "UNINDEXED"}}
    client.update_item(TableName="mneme-marks", Key={"PK": item["PK"], "SK": item["SK"]},
                       UpdateExpression="SET GSI1PK = :bare", ExpressionAttributeValues=bare)  # fmt: skip
    assert [e.episode_id for e in records.list_unindexed(10)] == ["old"]
