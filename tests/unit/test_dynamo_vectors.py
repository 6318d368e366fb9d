"""R6: vectors are stored in DynamoDB a byte a dimension (int8, one scale a vector): an episode with a
1024-dimension vector drops from 8,539 bytes (float64) and 4,444 (float32) to 1,376, so its writes cost 2
write units, not 9 or 5, and a read one unit. Items written as float64 or float32 before still read."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import numpy as np

from mneme.adapters.dynamo.codec import to_item, to_model
from mneme.adapters.dynamo.episodes import EPISODE_CODEC
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


def unit(rng: np.random.Generator, n: int = 1024) -> np.ndarray:
    vector = rng.standard_normal(n).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_a_1024_dimension_vector_is_stored_a_byte_a_dimension_and_ranks_as_before() -> None:
    """Quantised to int8 with one scale a vector: the item is 1,376 bytes (2 write units; 4,444 bytes and 5 as
    float32), and a query's cosine with the stored vector moves by less than 1e-3, so neither the fresh
    tail's order nor a rebuilt index's changes in any way a user would see."""
    rng = np.random.default_rng(7)
    vector = unit(rng)
    item = to_item(an_episode(vector.tolist()), {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
    assert len(item["vector"]["B"]) == 1 + 4 + 1024  # a format byte, the scale, a byte a dimension
    assert item_bytes(item) == 1376  # 4,444 as float32: 2 write units, not 5
    stored = np.asarray(to_model(Episode, item, **EPISODE_CODEC).vector, dtype=np.float32)
    queries = [unit(rng) for _ in range(50)] + [vector + 0.3 * unit(rng) for _ in range(50)]
    moved = max(abs(float(q @ vector) - float(q @ stored)) / float(np.linalg.norm(q)) for q in queries)
    assert moved < 1e-3


def test_a_vector_of_another_dimension_or_not_finite_is_stored_as_float32_exactly() -> None:
    for vector in ([0.1, -0.2, 1 / 3, 0.0, -1e-30], [1.0] * 7 + [float("inf")]):
        exact = [float(np.float32(x)) for x in vector]
        item = to_item(an_episode(vector), {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
        assert len(item["vector"]["B"]) == 1 + 4 * len(vector)
        assert to_model(Episode, item, **EPISODE_CODEC).vector == exact


def test_an_episode_written_with_a_float32_vector_still_reads() -> None:
    vector = unit(np.random.default_rng(3)).tolist()
    item = to_item(an_episode(vector), {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
    item["vector"] = {"B": b"\x04" + struct.pack(f"<{len(vector)}f", *vector)}  # the encoding before int8
    assert to_model(Episode, item, **EPISODE_CODEC).vector == vector


def test_an_episode_written_with_a_float64_vector_still_reads() -> None:
    vector = [0.1, -0.2, 1 / 3, 0.0]
    item = to_item(an_episode(vector), {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}, **EPISODE_CODEC)
    item["vector"] = {"B": struct.pack("<4d", *vector)}  # the encoding before float32
    assert to_model(Episode, item, **EPISODE_CODEC).vector == vector
