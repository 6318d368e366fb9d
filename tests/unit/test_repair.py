"""The index repair the `index-repair` schedule runs: sweep, compact, and the backlog metric it emits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.errors import StoreUnavailable
from mneme.models import Role
from mneme.services.remember import RememberItem
from mneme.services.repair import compaction_window, repair_index
from tests.conftest import principal

WRITER = principal("acme", "wendy", Role.writer)


class DownIndex:
    """Wraps an index; every `upsert` fails while `down`; records the windows it was asked to compact."""

    def __init__(self, inner: object) -> None:
        self.inner, self.down, self.compacted = inner, True, list[datetime]()

    def upsert(self, docs: object) -> None:
        if self.down:
            raise StoreUnavailable("index down")
        self.inner.upsert(docs)  # type: ignore[attr-defined]

    def compact_recent(self, since: datetime) -> dict[str, int]:
        self.compacted.append(since)
        return {"acme": 2}

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def remember_while_down(services: Services, count: int) -> DownIndex:
    index = DownIndex(services.index)
    services.indexer.index = index  # type: ignore[assignment]
    services.index = index  # type: ignore[assignment]
    services.scopes.create("acme", "root.acme")
    items = [RememberItem(scope="root.acme", content=f"Crate {i} left the yard.") for i in range(count)]
    services.remember.remember(WRITER, items)
    return index


def test_repair_indexes_what_is_pending_and_compacts_the_window(services: Services) -> None:
    index = remember_while_down(services, 5)
    index.down = False
    since = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    report = repair_index(services.indexer, services.index, compact_since=since)
    assert report.indexed == 5 and report.compacted == {"acme": 2} and index.compacted == [since]
    assert services.store.list_unindexed(10) == []
    again = repair_index(services.indexer, services.index, compact_since=since)  # a retried tick: nothing left
    assert again.indexed == 0


def test_a_sweep_only_tick_indexes_without_compacting(services: Services) -> None:
    """The minute sweep picks up what the first writes missed; compaction waits for its own ticks."""
    index = remember_while_down(services, 2)
    index.down = False
    report = repair_index(services.indexer, services.index, compact_since=None)
    assert report.indexed == 2 and report.compacted == {} and index.compacted == []


NOW = datetime(2026, 12, 3, 5, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("scheduled", "since"),
    [
        ("2026-12-03T04:30:00Z", datetime(2026, 12, 3, 4, 0, tzinfo=UTC)),  # since the previous compaction tick
        ("2026-12-03T05:00:00Z", datetime(2026, 12, 3, 4, 30, tzinfo=UTC)),
        ("2026-12-03T04:31:00Z", None),
        ("2026-12-03T04:59:00Z", None),
        ("<aws.scheduler.scheduled-time>", NOW - timedelta(minutes=30)),  # not substituted (a manual invoke)
        (None, NOW - timedelta(minutes=30)),
    ],
)
def test_compaction_windows_start_at_the_previous_compaction_tick(scheduled: str | None, since: datetime) -> None:
    assert compaction_window(scheduled, 30, NOW) == since


def test_repair_handler_sweeps_every_tick_and_compacts_on_the_due_ones(services: Services) -> None:
    index = remember_while_down(services, 1)
    index.down = False
    from functions.repair import repair_handler

    handler = repair_handler(lambda: services)
    tick = {"source": "mneme.repair", "compact_every_minutes": 30}
    assert handler({**tick, "scheduled_time": "2026-12-03T04:31:00Z"}, LambdaContext())["indexed"] == 1
    assert index.compacted == []
    handler({**tick, "scheduled_time": "2026-12-03T04:30:00Z"}, LambdaContext())
    assert index.compacted == [datetime(2026, 12, 3, 4, 0, tzinfo=UTC)]


def test_repair_handler_emits_the_backlog_metric_the_dashboard_charts(
    services: Services, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three episodes the index refused, and an index still down
    remember_while_down(services, 3)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Mneme")
    from functions.repair import repair_handler
    from mneme.observability import metrics

    handler = repair_handler(lambda: services)

    metrics.clear_metrics()  # the process-wide Metrics keeps what earlier tests added
    capsys.readouterr()
    # When the scheduled repair runs
    result = handler({"source": "mneme.repair"}, LambdaContext())
    # Then nothing landed, and the backlog went out as EMF in the namespace and dimension of the dashboard
    assert result["indexed"] == 0
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (metric,) = [m for m in emf if "IndexRepairBacklog" in m]
    assert metric["IndexRepairBacklog"] in (3.0, [3.0])
    (directive,) = metric["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Mneme" and metric["service"] == "mneme"


class LambdaContext:
    function_name, memory_limit_in_mb, aws_request_id = "index-repair", 1024, "r-1"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:index-repair"

    def get_remaining_time_in_millis(self) -> Any:
        return 60_000
