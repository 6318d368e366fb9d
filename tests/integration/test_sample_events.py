"""Every sample event in events/ run through the handler it is written for, on the embedded engine: the API
events of remember, recall, records and consolidate, and the Step Functions, EventBridge and Scheduler
payloads of the consolidation stages, the run-ended rule, the consolidation schedule and the index repair."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from functions import consolidate, repair
from mneme import bootstrap
from mneme.consolidation.stages import STAGE_NAMES
from mneme.http import routes
from mneme.local.events import LocalContext
from tests.conftest import EVENTS, load_event, principal

from .helpers import invoke

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

SAMPLES = {  # each file in events/ and the handler it is for
    "authorizer_token.json": "authorizer.handler",
    "health.json": "retrieve.handler",
    "retrieve.json": "retrieve.handler",
    "put_layers.json": "curate.handler",
    "create_scope.json": "curate.handler",
    "create_memory_scoped.json": "curate.handler",
    "create_memory_tagged.json": "curate.handler",
    "find_memory.json": "curate.handler",
    "rename_scope.json": "curate.handler",
    "remember.json": "remember.handler",
    "recall.json": "recall.handler",
    "list_episodes.json": "records.handler",
    "consolidate.json": "consolidate.handler",
    "stage_begin.json": "consolidate.stage_handler",
    "stage_collect.json": "consolidate.stage_handler",
    "stage_finish.json": "consolidate.stage_handler",
    "execution_timed_out.json": "consolidate.stage_handler",
    "consolidate_schedule.json": "consolidate.schedule_handler",
    "repair_schedule.json": "repair.handler",
}
SCOPE = "root.pennine-joinery"


@pytest.fixture
def acme(home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The embedded engine with no settle window, and one episode remembered with remember.json."""
    monkeypatch.setenv("MNEME_CONSOLIDATION__SETTLE_SECONDS", "0")
    bootstrap.reset()
    answer = answered("remember", load_event("remember.json"), 201)
    episode_id: str = answer["episode_id"]
    return episode_id


def answered(function: str, event: dict[str, Any], status: int = 200) -> Any:
    response = invoke(function, event)
    assert response["statusCode"] == status, response
    return json.loads(response["body"])


class StageContext(LocalContext):
    def get_remaining_time_in_millis(self) -> int:
        return 600_000  # the stage function's timeout, 600 s (infra/mneme_infra/specs.py)


def stage(event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = consolidate.stage_handler(event, StageContext("consolidate-stages"))
    return result


def test_every_handler_and_task_shape_has_a_sample_event() -> None:
    assert sorted(path.name for path in EVENTS.glob("*.json")) == sorted(SAMPLES)
    written_for = set(SAMPLES.values())
    assert {f"{function}.handler" for function in routes.FUNCTIONS} <= written_for
    assert {"consolidate.stage_handler", "consolidate.schedule_handler", "repair.handler"} <= written_for
    tasks = [load_event(name) for name, handler in SAMPLES.items() if handler == "consolidate.stage_handler"]
    assert {event.get("stage") or event["detail-type"] for event in tasks} == {
        "begin",
        STAGE_NAMES[0],
        "finish",
        "Step Functions Execution Status Change",
    }


def test_the_api_samples_remember_recall_and_list_an_episode(acme: str) -> None:
    # Given the episode remember.json wrote, when recall.json and list_episodes.json ask for it
    recalled = answered("recall", load_event("recall.json"))
    listed = answered("records", load_event("list_episodes.json"))
    # Then recall finds it first, and the list holds it with its session
    assert recalled["results"][0]["id"] == acme
    assert "invoiced quarterly" in recalled["results"][0]["content"]
    assert [(e["id"], e["session_id"]) for e in listed["episodes"]] == [(acme, "call-2026-11-30")]


def test_the_consolidate_sample_starts_a_run_that_finishes(acme: str) -> None:
    started = answered("consolidate", load_event("consolidate.json"), 202)
    assert started["status"] == "running" and started["scopes"] == [SCOPE]
    run_id = started["run_id"]
    read = load_event("list_episodes.json")  # a GET with the same caller: the run's record
    read.update(path=f"/v1/consolidations/{run_id}", resource="/v1/consolidations/{run_id}", body=None)
    read.update(queryStringParameters=None, multiValueQueryStringParameters=None, pathParameters={"run_id": run_id})
    deadline = time.monotonic() + 60
    while (run := answered("consolidate", read))["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run["status"] == "succeeded", run
    assert run["stages"]["collect"]["counters"]["episodes_read"] == 1


def test_the_stage_task_samples_carry_one_batch_through_every_stage(acme: str) -> None:
    # Given a run opened as the API opens one (its id and target scope are what the state machine gets)
    run, (scope_id,) = bootstrap.current().consolidation.open(principal(), [SCOPE])
    # When the sample task events walk it as the state machine does: begin, each stage, finish
    batch = stage(load_event("stage_begin.json", run_id=run.run_id, scope_id=scope_id))
    assert (batch["run_id"], batch["scope_id"], batch["episode_ids"]) == (run.run_id, scope_id, [])
    for name in STAGE_NAMES:
        batch = stage(load_event("stage_collect.json", stage=name, batch=batch))
        assert not batch["errors"], (name, batch["errors"])
    assert batch["episode_ids"] == [acme]
    stage(load_event("stage_finish.json", run_id=run.run_id, batches=[batch]))
    # Then the run is concluded with what the batch did
    finished = bootstrap.current().consolidation.get(principal(), run.run_id)
    assert finished.status == "succeeded" and finished.counter("collect", "episodes_read") == 1


def test_the_execution_ended_sample_concludes_a_run_its_execution_left_running(acme: str) -> None:
    # Given a run whose execution timed out before `finish`
    run, targets = bootstrap.current().consolidation.open(principal(), [SCOPE])
    event = load_event("execution_timed_out.json")
    event["detail"]["input"] = json.dumps({"tenant": "acme", "run_id": run.run_id, "targets": targets})
    # When EventBridge delivers the sample event
    assert stage(event) == {"concluded": True, "run_id": run.run_id, "status": "failed"}
    # Then the run says why; a second delivery changes nothing
    concluded = bootstrap.current().consolidation.get(principal(), run.run_id)
    assert concluded.stages["workflow"].errors == [
        {"stage": "workflow", "message": "execution timed out: States.Timeout"}
    ]
    assert stage(event) == {"concluded": False}


def test_the_schedule_samples_start_a_run_and_repair_the_index(acme: str) -> None:
    runs = consolidate.schedule_handler(load_event("consolidate_schedule.json"), LocalContext("consolidate-schedule"))
    assert [(r["tenant"], r["scopes"]) for r in runs["runs"]] == [("acme", 1)]
    repaired = repair.handler(load_event("repair_schedule.json"), LocalContext("index-repair"))
    assert repaired["indexed"] == 0 and set(repaired["compacted"]) <= {"acme"}
