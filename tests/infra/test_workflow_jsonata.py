"""The consolidation state machine, executed: a small interpreter for the ASL subset the definition uses
(Pass, Task, Choice, inline Map, Fail; JSONata, variables, Retry, Catch), with a scripted stage function
whose batches are validated by the real `Batch` model and whose `finish` is the application's own `step`.

moto cannot run JSONata states (its engine needs a JVM), so this needs `jsonata-python` (dev dependency).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from mneme.consolidation.models import Run
from mneme.consolidation.service import step
from mneme.consolidation.stages import STAGE_NAMES, Batch
from tests.infra.synth import Synth

jsonata = pytest.importorskip("jsonata")
NOW = "2026-11-01T12:00:00Z"


class TaskError(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(error)
        self.error, self.cause = error, cause


def evaluate(template: Any, states: dict[str, Any], variables: MutableMapping[str, Any]) -> Any:
    if isinstance(template, dict):
        return {k: evaluate(v, states, variables) for k, v in template.items()}
    if isinstance(template, list):
        return [evaluate(v, states, variables) for v in template]
    if isinstance(template, str) and template.startswith("{%") and template.endswith("%}"):
        return jsonata.Jsonata(template[2:-2].strip()).evaluate(None, {"states": states, **variables})
    return template


def run(states: dict[str, Any], start: str, data: Any, variables: MutableMapping[str, Any], invoke: Callable) -> Any:
    name = start
    while True:
        state, ctx = states[name], {"State": {"EnteredTime": NOW}, "Execution": {"StartTime": NOW}}
        here: dict[str, Any] = {"input": data, "context": ctx}
        try:
            if state["Type"] == "Choice":
                rules = [r for r in state["Choices"] if evaluate(r["Condition"], here, variables)]
                name = rules[0]["Next"] if rules else state["Default"]
                continue
            if state["Type"] == "Fail":
                raise TaskError(evaluate(state["Error"], here, variables), evaluate(state["Cause"], here, variables))
            if state["Type"] == "Task":
                here["result"] = call(state, evaluate(state["Arguments"], here, variables)["Payload"], invoke)
            elif state["Type"] == "Map":
                results = []
                for item in evaluate(state["Items"], here, variables):
                    selector = {"input": data, "context": {**ctx, "Map": {"Item": {"Value": item}}}}
                    processor = state["ItemProcessor"]
                    item_input = evaluate(state["ItemSelector"], selector, variables)
                    results.append(run(processor["States"], processor["StartAt"], item_input,
                                       ChainMap({}, variables), invoke))  # fmt: skip
                here["result"] = results
            default = "{% $states.result %}" if "result" in here else "{% $states.input %}"
            output = evaluate(state.get("Output", default), here, variables)
            variables.update(evaluate(state.get("Assign", {}), here, variables))
        except TaskError as e:
            catch = next((c for c in state.get("Catch", []) if {"States.ALL", e.error} & set(c["ErrorEquals"])), None)
            if catch is None:
                raise
            here["errorOutput"] = {"Error": e.error, "Cause": e.cause}
            output = evaluate(catch.get("Output", "{% $states.errorOutput %}"), here, variables)
            variables.update(evaluate(catch.get("Assign", {}), here, variables))
            name = catch["Next"]
            data = output
            continue
        if state.get("End"):
            return output
        name, data = state["Next"], output


def call(state: dict[str, Any], payload: dict[str, Any], invoke: Callable) -> dict[str, Any]:
    attempts: dict[int, int] = {}
    while True:
        try:
            return {"Payload": invoke(payload)}
        except TaskError as e:
            retry = next((i for i, r in enumerate(state.get("Retry", [])) if e.error in r["ErrorEquals"]), None)
            if retry is None or attempts.get(retry, 0) + 1 >= state["Retry"][retry]["MaxAttempts"]:
                raise
            attempts[retry] = attempts.get(retry, 0) + 1


class Stages:
    """The stage function: `full_batches` full batches per scope, then one partial; `fail` raises."""

    def __init__(self, full_batches: int = 0, fail: dict[str, TaskError] | None = None, flaky: int = 0) -> None:
        self.full_batches, self.fail, self.flaky = full_batches, fail or {}, flaky
        self.calls: list[str] = []
        self.store = SimpleNamespace(runs={}, get_run=lambda t, r: self.run, put_run=self._put)
        self.run = Run(tenant="acme", run_id="run_1", started_at=datetime(2026, 11, 1, tzinfo=UTC),
                       requested_by="scheduler", scopes=["/a", "/b"])  # fmt: skip

    def _put(self, run: Run) -> None:
        self.run = run

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        stage = event["stage"]
        self.calls.append(stage)
        if stage == "finish":
            deps = SimpleNamespace(store=self.store, clock=SimpleNamespace(now=lambda: datetime.now(UTC)))
            return step(deps, event)  # type: ignore[arg-type]
        if self.flaky and stage == "cluster":
            self.flaky -= 1
            raise TaskError("Throttled", '{"errorMessage": "slow down", "errorType": "Throttled"}')
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


@pytest.fixture(scope="module")
def asl(default: Synth) -> dict[str, Any]:
    return default.state_machine()


def execute(asl: dict[str, Any], stages: Stages, targets: list[str]) -> Any:
    return run(asl["States"], asl["StartAt"], {"tenant": "acme", "run_id": "run_1", "targets": targets}, {}, stages)


def test_each_scope_runs_every_stage_in_order_and_finish_closes_the_run(asl: dict[str, Any]) -> None:
    stages = Stages()
    assert execute(asl, stages, ["s1", "s2"]) == {"run_id": "run_1", "status": "succeeded"}
    assert stages.calls == [*(["begin", *STAGE_NAMES] * 2), "finish"]
    assert stages.run.stages["collect"].counters == {"episodes_read": 6}
    assert stages.run.stages["checkpoint"].counters == {"advanced": 2}


def test_full_batches_loop_until_a_partial_one(asl: dict[str, Any]) -> None:
    stages = Stages(full_batches=2)
    execute(asl, stages, ["s1"])
    assert stages.calls.count("begin") == 3
    assert stages.run.stages["collect"].counters == {"episodes_read": 9}


def test_transient_errors_are_retried(asl: dict[str, Any]) -> None:
    stages = Stages(flaky=2)
    assert execute(asl, stages, ["s1"])["status"] == "succeeded"
    assert stages.calls.count("cluster") == 3


def test_a_failing_stage_is_recorded_and_the_checkpoint_held_then_the_scope_stops(asl: dict[str, Any]) -> None:
    cause = '{"errorMessage": "cluster not consolidated", "errorType": "Conflict", "stackTrace": []}'
    stages = Stages(full_batches=5, fail={"extract": TaskError("Conflict", cause)})
    result = execute(asl, stages, ["s1"])
    assert result == {"run_id": "run_1", "status": "failed"}
    assert stages.calls == ["begin", "collect", "cluster", "extract", "checkpoint", "finish"]
    (error,) = stages.run.errors
    assert (error["stage"], error["message"]) == ("extract", "Conflict: cluster not consolidated")
    assert stages.run.stages["checkpoint"].counters == {"held": 1}


def test_an_unparseable_cause_is_kept_as_text(asl: dict[str, Any]) -> None:
    stages = Stages(fail={"begin": TaskError("Lambda.Unknown", "the function crashed")})
    assert execute(asl, stages, ["s1"])["status"] == "failed"
    (error,) = stages.run.errors
    assert (error["stage"], error["message"]) == ("begin", "Lambda.Unknown: the function crashed")


def test_the_loop_is_bounded(asl: dict[str, Any]) -> None:
    stages = Stages(full_batches=10_000)
    execute(asl, stages, ["s1"])
    assert stages.calls.count("begin") == 50


def test_a_run_without_targets_just_closes_the_record(asl: dict[str, Any]) -> None:
    stages = Stages()
    assert execute(asl, stages, []) == {"run_id": "run_1", "status": "succeeded"}
    assert stages.calls == ["finish"]
