"""The consolidation state machine (built from STAGE_NAMES) and its schedule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.specs import REPAIR, SCHEDULE, STAGES
from infra.mneme_infra.workflow import (
    EVENTS_PER_BATCH,
    HISTORY_BUDGET,
    HISTORY_LIMIT,
    LAMBDA_ERRORS,
    TRANSIENT_ERRORS,
    max_batches_within_history,
)
from mneme.consolidation.stages import STAGE_NAMES
from tests.infra.synth import Synth, as_list

TASKS = ("Begin", *(f"Stage_{name}" for name in STAGE_NAMES), "HoldCheckpoint")


@pytest.fixture(scope="module")
def asl(default: Synth) -> dict[str, Any]:
    return default.state_machine()


def per_target(asl: dict[str, Any]) -> dict[str, Any]:
    return asl["States"]["Targets"]["ItemProcessor"]["States"]


def test_one_standard_jsonata_state_machine_logging_all_and_traced(default: Synth) -> None:
    default.template.resource_count_is("AWS::StepFunctions::StateMachine", 1)
    (machine,) = default.of_type("AWS::StepFunctions::StateMachine").values()
    props = machine["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is False  # batches hold tenants' memories
    assert default.state_machine()["QueryLanguage"] == "JSONata"


def test_map_over_targets_then_finish(asl: dict[str, Any], default: Synth, variant: Synth) -> None:
    assert asl["StartAt"] == "Targets"
    targets = asl["States"]["Targets"]
    assert targets["Type"] == "Map" and targets["Items"] == "{% $states.input.targets %}"
    assert targets["ItemSelector"]["scope_id"] == "{% $states.context.Map.Item.Value %}"
    assert targets["MaxConcurrency"] == 4
    assert variant.state_machine()["States"]["Targets"]["MaxConcurrency"] == 2
    assert targets["Next"] == "Finish"
    assert asl["States"]["Finish"]["Arguments"]["Payload"]["stage"] == "finish"
    assert asl["States"]["Finish"].get("End") is True


def test_each_target_is_a_child_standard_execution_so_a_runs_history_does_not_grow_with_its_batches(
    asl: dict[str, Any], default: Synth
) -> None:
    # Given the Targets map: distributed, one Standard child execution per scope
    targets = asl["States"]["Targets"]
    assert targets["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    # Then a child's history holds one scope's batches, each a fixed number of events, within the limit
    child = targets["ItemProcessor"]["States"]
    tasks = [name for name, state in child.items() if state["Type"] == "Task" and name != "HoldCheckpoint"]
    assert 5 * len(tasks) + 2 * 2 == EVENTS_PER_BATCH  # Begin + stages; Summarize and MoreEpisodes
    assert InfraConfig.model_fields["max_batches_per_scope"].metadata[-1].le * EVENTS_PER_BATCH <= HISTORY_BUDGET
    assert HISTORY_BUDGET < HISTORY_LIMIT
    # and the parent may start, describe and stop its own child executions
    (policy,) = [p for lid, p in default.of_type("AWS::IAM::Policy").items() if "DistributedMap" in lid]
    actions = {a for s in policy["Properties"]["PolicyDocument"]["Statement"] for a in as_list(s["Action"])}
    assert {"states:StartExecution", "states:DescribeExecution", "states:StopExecution"} <= actions


def test_a_scope_limit_beyond_the_child_history_is_refused() -> None:
    with pytest.raises(ValidationError):
        InfraConfig(max_batches_per_scope=max_batches_within_history() + 1)


def test_stage_tasks_follow_the_stage_list_order(asl: dict[str, Any]) -> None:
    states = per_target(asl)
    assert states[states["Target"]["Next"]] is states["Begin"]
    order, name = [], states["Begin"]["Next"]
    while name.startswith("Stage_"):
        order.append(name.removeprefix("Stage_"))
        assert states[name]["Arguments"]["Payload"] == {"stage": order[-1], "batch": "{% $states.input %}"}
        assert states[name]["Output"] == "{% $states.result.Payload %}"
        name = states[name]["Next"]
    assert tuple(order) == STAGE_NAMES
    assert name == "Summarize" and states[name]["Next"] == "MoreEpisodes"


def test_every_task_invokes_the_stage_function_and_retries_by_error_name(asl: dict[str, Any], default: Synth) -> None:
    stages_id = default.function_ids()[STAGES]
    tasks = {**{name: per_target(asl)[name] for name in TASKS}, "Finish": asl["States"]["Finish"],
             "RecordRunFailure": asl["States"]["RecordRunFailure"]}  # fmt: skip
    for name, task in tasks.items():
        assert task["Resource"].endswith(":states:::lambda:invoke"), name
        assert task["Arguments"]["FunctionName"] == f"<{stages_id}>", name
        retries = {tuple(r["ErrorEquals"]): r for r in task["Retry"]}
        assert set(retries) == {LAMBDA_ERRORS, TRANSIENT_ERRORS}, name
        assert TRANSIENT_ERRORS == ("Throttled", "StoreUnavailable", "Sandbox.Timedout")  # a Lambda timeout too
        for retry in retries.values():
            assert retry["BackoffRate"] == 2 and retry["JitterStrategy"] == "FULL" and retry["MaxAttempts"] > 1


def test_a_failing_stage_is_caught_recorded_and_the_checkpoint_held(asl: dict[str, Any]) -> None:
    states = per_target(asl)
    for name in ("Begin", *(f"Stage_{s}" for s in STAGE_NAMES)):
        (catch,) = states[name]["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"] and catch["Next"] == "HoldCheckpoint", name
        stage = "begin" if name == "Begin" else name.removeprefix("Stage_")
        assert f'"stage": "{stage}"' in catch["Output"] and "$append($b.errors" in catch["Output"], name
    hold = states["HoldCheckpoint"]
    assert hold["Arguments"]["Payload"] == {"stage": STAGE_NAMES[-1], "batch": "{% $states.input %}"}
    assert hold["Next"] == "Summarize" and hold["Catch"][0]["Next"] == "Summarize"


def test_the_scope_loops_while_the_batch_is_full_and_clean_up_to_the_limit(asl: dict[str, Any]) -> None:
    choice = per_target(asl)["MoreEpisodes"]
    (rule,) = choice["Choices"]
    assert rule["Next"] == "Begin" and choice["Default"] == "TargetDone"
    condition = rule["Condition"]
    assert "$states.input.full = true" in condition and "$count($states.input.errors) = 0" in condition
    assert "$iteration < 50" in condition
    assert per_target(asl)["Begin"]["Assign"] == {"iteration": "{% $iteration + 1 %}"}


def test_a_failed_map_still_closes_the_run_record_then_fails(asl: dict[str, Any]) -> None:
    (catch,) = asl["States"]["Targets"]["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and catch["Next"] == "RecordRunFailure"
    record = asl["States"]["RecordRunFailure"]
    assert record["Arguments"]["Payload"]["stage"] == "finish" and record["Next"] == "ConsolidationFailed"
    assert asl["States"]["ConsolidationFailed"]["Type"] == "Fail"


def referenced_ids(value: Any) -> set[str]:
    """Logical ids of every Fn::GetAtt inside `value`."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        return {i for v in value.values() for i in referenced_ids(v)}
    if isinstance(value, list):
        return {i for v in value for i in referenced_ids(v)}
    return set()


def test_state_machine_may_invoke_only_the_stage_function(default: Synth) -> None:
    (machine,) = default.of_type("AWS::StepFunctions::StateMachine").values()
    statements = default.statements_of_role(machine["Properties"]["RoleArn"]["Fn::GetAtt"][0])
    invoke = [s for s in statements if "lambda:InvokeFunction" in json.dumps(s["Action"])]
    assert referenced_ids([s["Resource"] for s in invoke]) == {default.function_ids()[STAGES]}


def schedules(synth: Synth) -> dict[str, dict[str, Any]]:
    """function name -> the properties of the schedule that invokes it."""
    names = {lid: name for name, lid in synth.function_ids().items()}
    return {names[s["Properties"]["Target"]["Arn"]["Fn::GetAtt"][0]]: s["Properties"]
            for s in synth.of_type("AWS::Scheduler::Schedule").values()}  # fmt: skip


@pytest.mark.parametrize(("function", "rate"), [(SCHEDULE, "rate(15 minutes)"), (REPAIR, "rate(1 minute)")])
def test_each_schedule_invokes_its_function_with_retries_and_a_dead_letter_queue(
    default: Synth, function: str, rate: str
) -> None:
    props = schedules(default)[function]
    assert props["ScheduleExpression"] == rate and props["State"] == "ENABLED"
    target = props["Target"]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0
    (queue_id,) = default.of_type("AWS::SQS::Queue")
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    role_id = target["RoleArn"]["Fn::GetAtt"][0]
    trust = default.resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert "aws:SourceAccount" in json.dumps(trust)
    invoke = [s["Resource"] for s in default.statements_of_role(role_id) if "lambda:InvokeFunction" in s["Action"]]
    assert referenced_ids(invoke) == {default.function_ids()[function]}
    sqs_send = [s for s in default.statements_of_role(role_id) if "sqs:SendMessage" in s["Action"]]
    assert [s["Resource"] for s in sqs_send] == [{"Fn::GetAtt": [queue_id, "Arn"]}]


def test_the_repair_sweeps_every_minute_and_compacts_every_thirty(default: Synth) -> None:
    """Episodes a first write missed (a new index still being built) are indexed within a minute; the
    costlier compaction runs on the ticks whose scheduled time falls on its interval."""
    payload = json.loads(schedules(default)[REPAIR]["Target"]["Input"])
    assert payload == {"source": "mneme.repair", "compact_every_minutes": 30,
                       "scheduled_time": "<aws.scheduler.scheduled-time>"}  # fmt: skip


def test_scheduled_functions_retry_failed_invocations_then_send_them_to_the_queue(default: Synth) -> None:
    (queue_id,) = default.of_type("AWS::SQS::Queue")
    configs = {c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
               for c in default.of_type("AWS::Lambda::EventInvokeConfig").values()}  # fmt: skip
    ids = default.function_ids()
    assert set(configs) == {ids[SCHEDULE], ids[REPAIR]}
    for config in configs.values():
        assert config["MaximumRetryAttempts"] == 2
        assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_schedules_follow_the_configured_rates_and_switches(variant: Synth) -> None:
    found = schedules(variant)
    assert found[SCHEDULE]["ScheduleExpression"] == "rate(1 hour)" and found[SCHEDULE]["State"] == "DISABLED"
    assert found[REPAIR]["ScheduleExpression"] == "rate(2 hours)" and found[REPAIR]["State"] == "DISABLED"


def test_the_state_machine_logs_to_a_vendedlogs_group_named_per_stack(default: Synth) -> None:
    """Step Functions adds each log group it writes to the account's CloudWatch Logs resource policy (5,120
    characters) unless its name starts with /aws/vendedlogs/; the stack id's UUID in the name lets a
    stack deleted with its logs retained be deployed again."""
    (machine,) = default.of_type("AWS::StepFunctions::StateMachine").values()
    (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
    group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    name = default.resources[group_id]["Properties"]["LogGroupName"]["Fn::Join"]
    assert name[1][0] == "/aws/vendedlogs/states/mneme-dev-consolidation-"
    assert "AWS::StackId" in json.dumps(name[1][1:])
