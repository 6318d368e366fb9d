"""A Bedrock brownout during remember, over HTTP and both record stores: the episode is stored and found by
its words at once (201, `embedding_deferred`), a retry writes nothing twice, and the index repair's tick
embeds it once the model is back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from functions import repair
from mneme.errors import StoreUnavailable
from tests.integration.stacks import STORES, Served, served
from tests.support.embedding import HashEmbedder


class BrownoutEmbedder(HashEmbedder):
    """The test embedder, failing as the Bedrock embedder does once its retries are spent, while `down`."""

    down = True

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.down:
            raise StoreUnavailable("Bedrock model amazon.titan-embed-text-v2:0 failed (ServiceUnavailable, 2 attempts)")
        return super().embed(texts)


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch, embedder=BrownoutEmbedder()) as running:
        yield running


class Context:
    function_name, memory_limit_in_mb, aws_request_id = "index-repair", 1024, "r-1"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:index-repair"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def recall(api: Any, **scoring: Any) -> dict[str, Any]:
    body = {"query": "forklift charger bay three", "scope": "root.depot", "limit": 20}
    found: dict[str, Any] = api.ok("POST", "/v1/recall", {**body, "scoring": {"strictness": "recall", **scoring}})
    return found


def test_remember_during_a_bedrock_brownout_answers_201_and_the_repair_embeds_it_later(stack: Served) -> None:
    writer = stack.key("wes", "writer")
    embedder = stack.services.remember.embedder
    assert isinstance(embedder, BrownoutEmbedder)
    one = {"scope": "root.depot", "content": "The forklift charger moved to bay three.", "create_scope": True}
    items = [
        {"scope": "root.depot", "content": f"Forklift {i} charges in bay three.", "idempotency_key": f"f{i}"}
        for i in range(3)
    ]
    # When an item and a batch are remembered while Bedrock fails
    single = writer.ok("POST", "/v1/remember", one, 201)
    batch = writer.ok("POST", "/v1/remember", {"items": items}, 201)
    # Then both are stored, not yet searchable by meaning, and say so
    assert single["created"] and not single["indexed"] and single["warnings"] == ["embedding_deferred"]
    assert all(r["created"] and r["warnings"] == ["embedding_deferred"] for r in batch["items"])
    stored = {single["episode_id"], *batch["episode_ids"]}
    # And recall (Bedrock still down) finds them by their words at once
    found = recall(writer)
    assert found["retrieval_path"] == "lexical_fallback" and {r["id"] for r in found["results"]} == stored
    # And a retried batch writes nothing twice
    again = writer.ok("POST", "/v1/remember", {"items": items}, 201)
    assert again["episode_ids"] == batch["episode_ids"] and not any(r["created"] for r in again["items"])
    # And the repair tick waits for the model, then embeds and indexes them: found by meaning alone
    tick = {"source": "mneme.repair", "compact_every_minutes": 30, "scheduled_time": "2026-12-03T04:31:00Z"}
    handler = repair.repair_handler(lambda: stack.services)  # the scheduled function over the stack's services
    assert handler(tick, Context())["indexed"] == 0
    embedder.down = False
    assert recall(writer, alpha=1.0, beta=0.0, fallback="never")["results"] == []
    assert handler(tick, Context())["indexed"] == 4
    by_meaning = recall(writer, alpha=1.0, beta=0.0, fallback="never")
    assert by_meaning["retrieval_path"] == "vector" and {r["id"] for r in by_meaning["results"]} == stored
    changes = writer.ok("GET", "/v1/changes?limit=50")["changes"]
    assert sorted(c["id"] for c in changes if c["kind"] == "episode") == sorted(stored)  # each stored once
    settled = writer.ok("POST", "/v1/remember", {"items": items}, 201)["items"]
    assert all(r["indexed"] and r["warnings"] == [] for r in settled)
