"""Scope reads of a 200-result recall on DynamoDB (moto): canonical paths come from one batch per depth
level of the tree (`ScopeService.chains_of`), not from a GetItem per ancestor per result.

Run with `-s` to see the counts it measures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mneme import bootstrap
from mneme.adapters.dynamo.store import DynamoRecordStore, create_table
from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.models import Role
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from mneme.settings import Settings
from tests.conftest import FixedClock, principal
from tests.support.embedding import HashEmbedder

RESULTS = 200
SCOPES = [f"root.acme.region{r}.site{s}.line{n}" for r in range(4) for s in range(5) for n in range(3)]  # 60 leaves
CALLS = ("GetItem", "BatchGetItem", "Query")


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[bootstrap.Services, Counter[str]]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(client, "scope-reads")
        calls: Counter[str] = Counter()

        def count(event_name: str, **_: Any) -> None:
            calls[event_name.rsplit(".", 1)[-1]] += 1

        for operation in CALLS:
            client.meta.events.register(f"before-call.dynamodb.{operation}", count)
        services = bootstrap.build(
            Settings(home=tmp_path, cursor_secret="scope-reads"),  # type: ignore[arg-type]
            store=DynamoRecordStore("scope-reads", client=client, feed_horizon_seconds=0),
            clock=FixedClock(),
            embedder=HashEmbedder(),
            index=SqliteSearchIndex(tmp_path / "index.db"),
            background=False,
        )
        yield services, calls


def test_a_200_result_recall_reads_scopes_one_batch_per_level(
    counted: tuple[bootstrap.Services, Counter[str]],
) -> None:
    services, calls = counted
    writer = principal("acme", "wendy", Role.writer)
    items = [
        RememberItem.model_validate(
            {"scope": SCOPES[i % len(SCOPES)], "content": f"Boiler pressure reading {i} logged.", "create_scope": True}
        )
        for i in range(RESULTS + 20)
    ]
    for start in range(0, len(items), 50):
        services.remember.remember(writer, items[start : start + 50])
    calls.clear()

    request = RecallRequest.model_validate(
        {
            "query": "boiler pressure reading",
            "scope": "root.acme",
            "limit": RESULTS,
            "scoring": {"strictness": "recall"},
        }
    )
    response = services.recall.recall(principal("acme", "alice", Role.admin), request)

    assert len(response.results) == RESULTS
    assert {result.scope for result in response.results} <= set(SCOPES)
    print(f"\n200-result recall on DynamoDB: {dict(calls)}")
    # Before: a GetItem per ancestor per result (1,102 GetItems). Now: resolving `root.acme` (2 GetItems,
    # which also caches root and acme), loading the records (a BatchGetItem per 100) and one BatchGetItem
    # per tree level below `root.acme` for the result paths (3).
    assert calls["GetItem"] + calls["BatchGetItem"] <= 12
