"""R6: vectors are stored in DynamoDB as float32 (what every embedder produces), half the bytes of float64:
an episode with a 1024-dimension vector drops from 8,539 to 4,444 bytes, so its writes cost 5 write units,
not 9. Items written as float64 before this change still read back."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import numpy as np

from mneme.adapters.dynamo_codec import to_item, to_model
from mneme.adapters.dynamo_episodes import EPISODE_CODEC
from mneme.models import Episode

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def item_bytes(item: dict[str, dict[str, object]]) -> int:
    """DynamoDB's item size: attribute names plus values (UTF-8 strings, binary bytes, numbers ~ digits)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        ((kind, raw),) = value.items()
        size += len(raw) if kind == "B" else len(str(raw).encode())  # type: ignore[arg-type]
    return size


def an_episode(vector: list[float]) -> Episode:
    return Episode(tenant="acme", episode_id="e1", scope_id="root", content="The boiler broke down.",
                   author="agent", occurred_at=T0, created_at=T0, content_hash="h", vector=vector,
                   model_id="amazon.titan-embed-text-v2:0@1024")  # fmt: skip


def test_a_1024_dimension_vector_is_stored_as_float32_and_reads_back_exactly() -> None:
    vector = np.random.default_rng(7).standard_normal(1024).astype(np.float32)
    vector /= np.linalg.norm(vector)
    episode = an_episode(vector.tolist())
    item = to_item(episode, {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
    assert len(item["vector"]["B"]) == 1 + 4 * 1024  # a format byte, then 4 bytes a dimension
    assert item_bytes(item) == 4444  # was 8,539: 5 write units (1 KB each) instead of 9
    assert to_model(Episode, item, **EPISODE_CODEC).vector == vector.tolist()


def test_an_episode_written_with_a_float64_vector_still_reads() -> None:
    vector = [0.1, -0.2, 1 / 3, 0.0]
    item = to_item(an_episode(vector), {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
    item["vector"] = {"B": struct.pack("<4d", *vector)}  # the encoding before float32
    assert to_model(Episode, item, **EPISODE_CODEC).vector == vector
