"""A run whose runner died (kill -9 mid-run, a lost Lambda) is concluded `failed` with the reason when it is
read past its lease, on SQLite and on DynamoDB (moto) alike; a live runner renews it batch after batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mneme import bootstrap
from mneme.models import Role
from mneme.services.remember import RememberItem
from mneme.settings import Settings
from tests.conftest import FixedClock, principal
from tests.support.embedding import HashEmbedder

WRITER = principal("acme", "wendy", Role.writer)


@pytest.fixture(params=["sqlite", "dynamodb"])
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from mneme.adapters.sqlite.index import SqliteSearchIndex

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        if request.param == "sqlite":
            from mneme.adapters.sqlite.store import SqliteRecordStore

            store: Any = SqliteRecordStore(tmp_path / "mneme.db")
        else:
            from mneme.adapters.dynamo.store import DynamoRecordStore, create_table

            client = boto3.client("dynamodb", region_name="eu-west-1")
            create_table(client, "mneme-lease")
            store = DynamoRecordStore("mneme-lease", client=client, feed_horizon_seconds=0)
        clock = FixedClock()
        services = bootstrap.build(
            Settings(home=tmp_path, cursor_secret="lease-tests"),  # type: ignore[arg-type]
            store=store, clock=clock, embedder=HashEmbedder(), index=SqliteSearchIndex(tmp_path / "index.db"),
            background=False,
        )  # fmt: skip
        yield services, clock


def opened(stack: Any) -> tuple[Any, Any, Any, list[str], float]:
    """(services, clock, a run just opened over one dirty scope, its targets, the lease in seconds)."""
    services, clock = stack
    services.remember.remember(WRITER, [RememberItem(scope="root.acme", content="kiln fired", create_scope=True)])
    run, targets = services.consolidation.open(WRITER)
    return services, clock, run, targets, services.consolidation.deps.settings.lease_seconds


def test_a_run_whose_runner_died_is_concluded_failed_past_its_lease(stack: Any) -> None:
    # Given a run opened and then abandoned (its runner killed before it concluded)
    services, clock, run, _, lease = opened(stack)
    consolidation = services.consolidation
    # Then, within its lease, it reads as running
    clock.advance(seconds=lease - 1)
    assert consolidation.get(WRITER, run.run_id).status == "running"
    # And past its lease it reads as failed, with the reason, and stays so (the record was rewritten)
    clock.advance(seconds=2)
    lapsed = consolidation.get(WRITER, run.run_id)
    assert lapsed.status == "failed" and lapsed.finished_at == clock.now()
    assert [e["message"].split(":")[0] for e in lapsed.errors] == ["lease_expired"]
    assert services.store.get_run("acme", run.run_id).status == "failed"
    assert [r.status for r in consolidation.recent(WRITER, 10)] == ["failed"]


def test_a_live_step_functions_run_renews_its_lease_at_every_batch(stack: Any) -> None:
    services, clock, run, targets, lease = opened(stack)
    consolidation = services.consolidation
    # Given a workflow whose batches begin one after the other, each within the lease of the one before
    for _ in range(3):
        clock.advance(seconds=lease - 1)
        consolidation.step({"stage": "begin", "tenant": "acme", "run_id": run.run_id, "scope_id": targets[0]})
        assert consolidation.get(WRITER, run.run_id).status == "running"
    # Then it never lapses, and `finish` concludes it as the runner decides
    done = consolidation.step({"stage": "finish", "tenant": "acme", "run_id": run.run_id, "batches": []})
    assert done["status"] == "succeeded"
    clock.advance(seconds=10 * lease)
    assert consolidation.get(WRITER, run.run_id).status == "succeeded"


def test_the_local_runner_renews_per_batch_and_concludes(stack: Any) -> None:
    services, clock = stack
    consolidation = services.consolidation
    services.remember.remember(WRITER, [RememberItem(scope="root.acme", content="kiln fired", create_scope=True)])
    clock.advance(seconds=consolidation.deps.settings.settle_seconds + 1)
    run, targets = consolidation.open(WRITER)
    finished = consolidation.execute(run, targets)
    assert finished.status in ("succeeded", "partial") and finished.lease_until is not None
    clock.advance(seconds=10 * consolidation.deps.settings.lease_seconds)
    assert consolidation.get(WRITER, run.run_id).status == finished.status


def test_finish_reads_and_writes_the_run_once(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    services, _, run, targets, _ = opened(stack)
    consolidation = services.consolidation
    batch = consolidation.step({"stage": "begin", "tenant": "acme", "run_id": run.run_id, "scope_id": targets[0]})
    calls: list[str] = []
    for name in ("get_run", "put_run"):
        real = getattr(services.store, name)
        monkeypatch.setattr(services.store, name, lambda *a, _n=name, _r=real: (calls.append(_n), _r(*a))[1])
    # When the workflow's `finish` task concludes the run (maintenance sweep included)
    done = consolidation.step({"stage": "finish", "tenant": "acme", "run_id": run.run_id, "batches": [batch]})
    # Then the run record was read once and written once, with the sweep's counters and the status
    assert calls == ["get_run", "put_run"]
    assert done["status"] == services.store.get_run("acme", run.run_id).status
    assert "maintain" in services.store.get_run("acme", run.run_id).stages
