"""What remember's DynamoDB items cost, priced by bench/cost.py's unit rules (tests/unit/test_bench_cost.py):
a busy scope's dirty-mark refresh leaves its index entry alone (moto), and an episode written indexed carries no
unindexed mark to delete later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from mneme.adapters.dynamo.codec import dirty_key, dirty_mark
from mneme.adapters.dynamo.episodes import DynamoEpisodes
from mneme.adapters.dynamo.store import DynamoRecordStore
from mneme.models import Episode
from tests.support.bench import load_bench

T0 = datetime(2026, 12, 3, 8, 15, tzinfo=UTC)
TABLE = "mneme-units"


@pytest.fixture
def aws() -> Any:
    import boto3
    from moto import mock_aws

    from mneme.adapters.dynamo.store import create_table

    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(client, TABLE)
        yield client


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    return load_bench("cost.py", "bench_cost_units")


def test_refreshing_a_dirty_mark_costs_one_write_unit_and_keeps_when_the_scope_became_dirty(
    cost: ModuleType, aws: Any
) -> None:
    store = DynamoRecordStore(TABLE, client=aws)

    def mark() -> dict[str, Any]:
        item: dict[str, Any] = aws.get_item(TableName=TABLE, Key=dirty_key("acme", "scope-1"))["Item"]
        return item

    store.mark_dirty("acme", ["scope-1"], T0)
    first = mark()
    assert first == dirty_mark("acme", "scope-1", T0)
    assert cost.write_units(None, first) == 2  # the mark and its index entry
    store.mark_dirty("acme", ["scope-1"], T0 + timedelta(hours=5))
    refreshed = mark()
    assert refreshed["dirtied_at"] == {"S": "2026-12-03T13:15:00.000000+00:00"}  # what clear_dirty compares
    assert refreshed["GSI1SK"] == first["GSI1SK"]  # dirty since 08:15: the schedule takes it first
    assert cost.write_units(first, refreshed) == 1  # was 3: a new index key is the entry's delete and put
    assert store.list_dirty(None, 10) == [("acme", "scope-1")]


def test_an_episode_written_indexed_costs_two_units_and_its_scope_listing_entry(cost: ModuleType) -> None:
    vector = np.random.default_rng(1).standard_normal(1024)
    vector = (vector / np.linalg.norm(vector)).tolist()
    episode = Episode(
        tenant="acme", episode_id="ep_1", scope_id="scope-1", content="The boiler in the north plant lost pressure.",
        author="agent", occurred_at=T0, created_at=T0, content_hash="h", vector=vector,
        model_id="amazon.titan-embed-text-v2:0@1024", indexed=True,
    )  # fmt: skip
    item = DynamoEpisodes._episode_item(episode, "2026-12-03T08:15:00.000000Z")
    assert "GSI1PK" not in item  # no unindexed mark, so none to delete after the index write
    assert cost.write_units(None, item) == 2 + 1  # 1.4 KB, then its scope's GSI3 entry (GSI2: no longer)
    unindexed = DynamoEpisodes._episode_item(episode.model_copy(update={"indexed": False}), "p")
    assert cost.write_units(None, unindexed) == 2 + 2
