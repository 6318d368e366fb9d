"""`mneme reindex` (Indexer.rebuild) over both stores completes what older versions of a store did not
write: DynamoDB runs stored before they were listed by start time are listed, and stay listed in order."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mneme.records import Run
from tests.integration.stacks import STORES, Served, served
from tests.support.legacy import forget_run_listing

T = datetime(2025, 6, 15, 18, 0, tzinfo=UTC)


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def listed(stack: Served, limit: int) -> list[str]:
    runs = stack.admin.ok("GET", f"/v1/consolidations?limit={limit}")["runs"]
    return [run["run_id"] for run in runs]


def test_reindex_lists_older_runs_by_start_time(stack: Served) -> None:
    ids = ["run_c", "run_a", "run_d", "run_b"]  # started in this order
    for n, run_id in enumerate(ids):
        stack.services.store.put_run(
            Run(tenant="acme", run_id=run_id, started_at=T + timedelta(minutes=n), requested_by="ada")
        )
    older = forget_run_listing(stack.services.store, "acme", ids[:2])
    assert listed(stack, 10) == ids[::-1]
    assert listed(stack, 3) == ids[:0:-1]

    rebuilt = stack.services.indexer.rebuild("acme")

    assert rebuilt.runs == (2 if older else 0)
    assert listed(stack, 10) == ids[::-1] and listed(stack, 1) == ["run_b"]
    assert stack.services.indexer.rebuild("acme").runs == 0
