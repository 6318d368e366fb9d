"""What remember's DynamoDB items cost, priced by bench/cost.py's unit rules (tests/unit/test_bench_cost.py):
a busy scope's dirty-mark refresh leaves its index entry alone, and an episode written indexed carries no
unindexed mark to delete later."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from mneme.adapters.dynamo_codec import dirty_mark
from mneme.adapters.dynamo_episodes import DynamoEpisodes
from mneme.models import Episode

T0 = datetime(2026, 12, 3, 8, 15, tzinfo=UTC)


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cost_units", Path(__file__).parents[2] / "bench" / "cost.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_refreshing_a_dirty_mark_within_the_hour_costs_one_write_unit(cost: ModuleType) -> None:
    first = dirty_mark("acme", "scope-1", T0)
    assert cost.write_units(None, first) == 2  # the mark and its index entry
    refreshed = dirty_mark("acme", "scope-1", T0 + timedelta(minutes=30))
    assert refreshed["dirtied_at"] != first["dirtied_at"]
    assert cost.write_units(first, refreshed) == 1  # was 3: the index entry's key held the instant
    next_hour = dirty_mark("acme", "scope-1", T0 + timedelta(hours=1))
    assert cost.write_units(refreshed, next_hour) == 3


def test_an_episode_written_indexed_costs_two_units_and_its_listing_entries(cost: ModuleType) -> None:
    vector = np.random.default_rng(1).standard_normal(1024)
    vector = (vector / np.linalg.norm(vector)).tolist()
    episode = Episode(
        tenant="acme", episode_id="ep_1", scope_id="scope-1", content="The boiler in the north plant lost pressure.",
        author="agent", occurred_at=T0, created_at=T0, content_hash="h", vector=vector,
        model_id="amazon.titan-embed-text-v2:0@1024", indexed=True,
    )  # fmt: skip
    item = DynamoEpisodes._episode_item(episode, "2026-12-03T08:15:00.000000Z")
    assert "GSI1PK" not in item  # no unindexed mark, so none to delete after the index write
    assert cost.write_units(None, item) == 2 + 2  # 1.5 KB, then GSI2 and GSI3 entries
    unindexed = DynamoEpisodes._episode_item(episode.model_copy(update={"indexed": False}), "p")
    assert cost.write_units(None, unindexed) == 2 + 3
