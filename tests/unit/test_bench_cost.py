"""bench/cost.py prices DynamoDB calls by the documented unit rules (aws.amazon.com/dynamodb/pricing/on-demand/):
reads per 4 KB (an 8 KB item: 2 strongly consistent, 1 eventually, 4 in a transaction), writes per 1 KB of
the larger of the old and new item, and one unit per KEYS_ONLY index entry written or deleted."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tests.support.bench import load_bench


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    return load_bench("cost.py", "bench_cost")


def item(size: int, **extra: str) -> dict[str, dict[str, str]]:
    """An item of `size` bytes by DynamoDB's rules (names plus values)."""
    base = {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#1"}, **{k: {"S": v} for k, v in extra.items()}}
    used = sum(len(k) + len(v["S"]) for k, v in base.items())
    return {**base, "pad": {"S": "x" * (size - used - len("pad"))}}


def test_item_sizes_count_names_and_values(cost: ModuleType) -> None:
    assert cost.item_size(item(5093)) == 5093
    mixed = {"n": {"N": "12345"}, "b": {"B": b"\x00" * 10}, "ok": {"BOOL": True}}
    assert cost.item_size(mixed) == (1 + 4) + (1 + 10) + (2 + 1)
    assert cost.item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (1 + 2) + (1 + 2)


def test_read_units_follow_the_pricing_page(cost: ModuleType) -> None:
    assert cost.read_units(8 * 1024, consistent=True) == 2
    assert cost.read_units(8 * 1024, consistent=False) == 1
    assert cost.read_units(8 * 1024, consistent=True, transactional=True) == 4
    assert cost.read_units(0, consistent=False) == 0.5  # a miss still costs the minimum


def test_write_units_count_an_entry_in_each_keys_only_index(cost: ModuleType) -> None:
    """Every index of the table is KEYS_ONLY: an entry is the keys plus 100 bytes, one unit, whatever
    the item's size; an update that leaves an index's keys alone does not write it."""
    episode = item(5093)
    marked = item(5093, GSI1PK="UNINDEXED#03", GSI1SK="2026-12-03")
    assert cost.write_units(None, episode) == 5  # the table only
    assert cost.write_units(None, marked) == 5 + 1  # and one index entry
    assert cost.write_units(marked, item(4995)) == 5 + 1  # unmarking deletes the entry
    moved = item(5093, GSI1PK="UNINDEXED#03", GSI1SK="2026-12-04")
    assert cost.write_units(marked, moved) == 5 + 1 + 1  # a new index key: a delete and a put
    listed = item(900, GSI2PK="T#a#EPISODES", GSI2SK="x", GSI3PK="T#a#SCOPEEPS#s", GSI3SK="x")
    assert cost.write_units(None, listed) == 1 + 2
    assert cost.write_units(listed, {**listed, "indexed": {"BOOL": True}}) == 1  # keys unchanged


def test_the_domain_option_idles_at_its_node_hours_and_volume(cost: ModuleType) -> None:
    """One t3.small.search at $0.036 an hour for 730 hours plus 10 GiB of gp3 at $0.122: $27.50 a month,
    against 2 OCUs (or 1) at $0.24 an hour for the Serverless collection."""
    assert cost.domain_monthly() == pytest.approx(0.036 * 730 + 0.122 * 10)
    assert cost.domain_monthly() == pytest.approx(27.50, abs=0.01)
    assert cost.domain_monthly() < 1 * cost.OCU_HOUR * cost.HOURS_A_MONTH / 6


def test_a_reasoner_call_is_priced_from_the_prompt_the_code_builds(cost: ModuleType) -> None:
    """Consolidation's tokens: the Converse request BedrockReasoner builds for a window (system, turns, tool
    schema) and the answer, at the code's characters per token; output from the recorded answers."""
    from datetime import UTC, datetime

    from mneme.adapters.reasoners import BedrockReasoner
    from mneme.consolidation.reasoning import CHARS_PER_TOKEN
    from mneme.records import Turn

    at = datetime(2026, 3, 2, tzinfo=UTC)
    turns = [
        Turn(number=n, speaker="Ana", text=f"Turn {n}: I moved to Porto last spring.", at=at) for n in range(1, 21)
    ]
    request = BedrockReasoner("m", client=object()).request(turns)
    answer = {"output": {"message": {"content": [{"toolUse": {"input": {"summary": "s", "facts": []}}}]}}}
    cost.METER.reset()
    cost.converse_tokens(request, answer)
    assert cost.METER.converse_calls == 1
    sent = len(json.dumps([request["system"], request["messages"], request["toolConfig"]])) / CHARS_PER_TOKEN
    assert cost.METER.converse_input_tokens == sent + cost.TOOL_USE_TOKENS  # and Claude's own tool-use prompt
    assert 600 < sent < 2000  # our system prompt and schema, then 20 turns
    assert 100 < cost.recorded_output_tokens() < 300  # bench/cost_answers.json: three windows' answers
