"""The consolidation state machine's definition, executed by moto's ASL interpreter (JSONata via
jsonata-python) with its Lambda tasks answered by a scripted stage function: the control flow alone
(order of stages, the batch loop and its bound, retries, catchers, the run record's outcome).
test_consolidation.py runs the same definition with the real stage function.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from mneme.consolidation.service import MAX_BATCHES_PER_SCOPE, finish
from mneme.consolidation.stages import STAGE_NAMES, Batch
from mneme.records import Run
from mneme.settings import ConsolidationSettings
from tests.cloud.conftest import Cloud
from tests.cloud.deployment import TaskFailure, aws_client


class Stages:
    """The stage function: `full_batches` full batches per scope, then one partial; `fail` raises."""

    def __init__(self, full_batches: int = 0, fail: dict[str, TaskFailure] | None = None, flaky: int = 0) -> None:
        self.full_batches, self.fail, self.flaky = full_batches, fail or {}, flaky
        self.calls: list[str] = []
        self.store = SimpleNamespace(get_run=lambda t, r: self.run, put_run=self._put, list_facts=lambda t: [])
        self.run = Run(tenant="acme", run_id="run_1", started_at=datetime(2026, 11, 1, tzinfo=UTC),
                       requested_by="scheduler", scopes=["/a", "/b"])  # fmt: skip

    def _put(self, run: Run) -> None:
        self.run = run

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        stage = event["stage"]
        self.calls.append(stage)
        if stage == "finish":
            now = SimpleNamespace(now=lambda: datetime.now(UTC))
            deps = SimpleNamespace(store=self.store, clock=now, settings=ConsolidationSettings())
            return finish(deps, event)  # type: ignore[arg-type]
        if self.flaky and stage == "cluster":
            self.flaky -= 1
            raise TaskFailure("Throttled", "slow down")
        if stage in self.fail:
            raise self.fail[stage]
        if stage == "begin":
            return Batch(tenant=event["tenant"], scope_id=event["scope_id"], run_id=event["run_id"],
                         started_at=datetime.now(UTC)).model_dump(mode="json")  # fmt: skip
        batch = Batch.model_validate(event["batch"])
        if stage == "collect":
            done = self.calls.count("begin")
            batch.episode_ids = [f"ep_{done}_{i}" for i in range(3)]
            batch.full = done <= self.full_batches
            batch.count("collect", "episodes_read", 3)
        if stage == "checkpoint":
            batch.count("checkpoint", "held" if batch.errors else "advanced")
        return batch.model_dump(mode="json")


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retry intervals the interpreter would sleep, recorded (requested after `cloud`, which skips them)."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    slept: list[float] = []
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=slept.append))
    return slept


def execute(cloud: Cloud, stages: Stages, targets: list[str]) -> tuple[dict[str, Any], Any]:
    cloud.deployment.task_script = stages
    client = aws_client("stepfunctions")
    started = client.start_execution(
        stateMachineArn=cloud.deployment.state_machine_arn(),
        name="run_1",
        input=json.dumps({"tenant": "acme", "run_id": "run_1", "targets": targets}),
    )
    described = cloud.deployment.wait_for_execution(started["executionArn"])
    return described, json.loads(described["output"]) if described.get("output") else None


def test_each_scope_runs_every_stage_in_order_and_finish_closes_the_run(cloud: Cloud) -> None:
    stages = Stages()
    described, output = execute(cloud, stages, ["s1", "s2"])
    assert described["status"] == "SUCCEEDED", described
    assert output == {"run_id": "run_1", "status": "succeeded"}
    assert stages.calls.count("finish") == 1 and stages.calls[-1] == "finish"
    per_scope = stages.calls[:-1]
    assert sorted(per_scope) == sorted(["begin", *STAGE_NAMES] * 2)  # the Map may interleave the two scopes
    assert stages.run.stages["collect"].counters == {"episodes_read": 6}
    assert stages.run.stages["checkpoint"].counters == {"advanced": 2}


def test_full_batches_loop_until_a_partial_one(cloud: Cloud) -> None:
    stages = Stages(full_batches=2)
    execute(cloud, stages, ["s1"])
    assert stages.calls.count("begin") == 3
    assert stages.run.stages["collect"].counters == {"episodes_read": 9}


def test_transient_errors_are_retried(cloud: Cloud, waits: list[float]) -> None:
    stages = Stages(flaky=2)
    described, output = execute(cloud, stages, ["s1"])
    assert output["status"] == "succeeded", described
    assert stages.calls.count("cluster") == 3
    assert len(waits) == 2


def test_a_failing_stage_is_recorded_and_the_checkpoint_held_then_the_scope_stops(cloud: Cloud) -> None:
    stages = Stages(full_batches=5, fail={"extract": TaskFailure("Conflict", "cluster not consolidated")})
    _, output = execute(cloud, stages, ["s1"])
    assert output == {"run_id": "run_1", "status": "failed"}
    assert stages.calls == ["begin", "collect", "cluster", "extract", "checkpoint", "finish"]
    (error,) = stages.run.errors
    assert (error["stage"], error["message"]) == ("extract", "Conflict: cluster not consolidated")
    assert stages.run.stages["checkpoint"].counters == {"held": 1}


def test_the_loop_is_bounded(cloud: Cloud) -> None:
    """Executing 50 batches through moto takes minutes, so the bound is read from the executed definition
    (the loop itself runs above, three batches)."""
    _, machine = cloud.deployment.template.state_machine()
    (processor,) = [s["ItemProcessor"] for s in machine["Definition"]["States"].values() if s["Type"] == "Map"]
    (choice,) = [s for s in processor["States"].values() if s["Type"] == "Choice"]
    (rule,) = choice["Choices"]
    assert f"$iteration < {MAX_BATCHES_PER_SCOPE}" in rule["Condition"]


def test_a_run_without_targets_just_closes_the_record(cloud: Cloud) -> None:
    stages = Stages()
    _, output = execute(cloud, stages, [])
    assert output == {"run_id": "run_1", "status": "succeeded"}
    assert stages.calls == ["finish"]
