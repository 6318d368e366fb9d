"""remember → recall → the schedule starts a run → Step Functions runs the real stage function → recall facts."""

from __future__ import annotations

import json
from typing import Any

from mneme.adapters.dynamo.store import DynamoRecordStore
from tests.cloud.conftest import Cloud
from tests.cloud.deployment import aws_client
from tests.cloud.template import ACCOUNT, REGION

SCOPE = "root.pennine-joinery.vat"
EPISODES = [
    "Pennine Joinery's VAT scheme is flat rate.",
    "Pennine Joinery's VAT scheme is flat rate, Sam confirmed on the call.",
    "Pennine Joinery's VAT scheme is flat rate since 2024.",
]


def execution_arn(cloud: Cloud, run_id: str) -> str:
    machine = cloud.deployment.state_machine_arn().split(":stateMachine:")[1]
    return f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{machine}:{run_id}"


def remember(cloud: Cloud, key: str) -> list[str]:
    assert cloud.api("POST", "/v1/scopes", {"path": SCOPE, "parents": True}, key=key).status == 201
    items = [{"scope": SCOPE, "content": text, "metadata": {"n": i}} for i, text in enumerate(EPISODES)]
    response = cloud.api("POST", "/v1/remember", {"items": items}, key=key)
    assert response.status == 201, str(response)
    return list(response.json()["episode_ids"])


def test_the_schedule_consolidates_episodes_into_a_fact_recall_then_finds(cloud: Cloud, admin: str) -> None:
    episode_ids = remember(cloud, admin)
    before = cloud.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme", "explain": True}, key=admin)
    assert before.status == 200, str(before)
    assert {r["id"] for r in before.json()["results"]} >= set(episode_ids)

    cloud.later(minutes=15)  # the next tick, past the settle time of the episodes
    tick = cloud.fire_schedule()
    (run,) = tick.payload["runs"]
    assert (run["tenant"], run["scopes"]) == ("acme", 1)
    execution = cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]))
    assert execution["status"] == "SUCCEEDED", execution
    record = cloud.api("GET", f"/v1/consolidations/{run['run_id']}", key=admin)
    assert json.loads(execution["output"]) == {"run_id": run["run_id"], "status": "succeeded"}, record.body

    assert record.status == 200, str(record)
    assert record.json()["status"] == "succeeded"
    assert record.json()["stages"]["collect"]["counters"]["episodes_read"] == len(EPISODES)
    converse = [params for operation, params in cloud.bedrock.requests if operation == "Converse"]
    assert converse and all(p["modelId"] == cloud.deployment.functions["consolidate-stages"].environment[
        "MNEME_REASONER__MODEL_ID"] for p in converse)  # fmt: skip

    after = cloud.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme", "kinds": ["fact"]}, key=admin)
    assert after.status == 200, str(after)
    results = after.json()["results"]
    assert {r["kind"] for r in results} == {"fact"}
    (fact,) = [r for r in results if r["fact"]["entity"]]  # the claim; the others are the batch's roll-ups
    assert (fact["fact"]["entity"], fact["fact"]["value"]) == ("Pennine Joinery", "flat rate")
    assert {source["id"] for source in fact["sources"]} == set(episode_ids)
    assert sorted(source["metadata"]["n"] for source in fact["sources"]) == [0, 1, 2]  # metadata kept


def test_runs_are_listed_newest_first_through_gsi2_within_consolidates_role(cloud: Cloud, admin: str) -> None:
    """list_runs reads only the newest runs (GSI2 of the deployed table, newest first, re-read from the
    table), and a run stored before runs were listed so (no GSI2 keys) is still listed."""
    started = []
    for _ in range(3):
        response = cloud.api("POST", "/v1/consolidate", {}, key=admin)
        assert response.status == 202, str(response)
        started.append(response.json()["run_id"])
        cloud.later(minutes=1)
    table_id, _ = cloud.deployment.template.one("AWS::DynamoDB::Table")
    cloud_table = cloud.deployment.template.ref(table_id)
    DynamoRecordStore(cloud_table, client=aws_client("dynamodb")).client.update_item(  # the oldest, as stored before
        TableName=cloud_table,
        Key={"PK": {"S": "T#acme#RUNS"}, "SK": {"S": f"RUN#{started[0]}"}},
        UpdateExpression="REMOVE GSI2PK, GSI2SK",
    )
    before = len(cloud.deployment.invocations)

    newest = cloud.api("GET", "/v1/consolidations", key=admin, query={"limit": "2"})
    every = cloud.api("GET", "/v1/consolidations", key=admin, query={"limit": "10"})

    assert newest.status == 200 and every.status == 200, str(newest)
    assert [run["run_id"] for run in newest.json()["runs"]] == started[:0:-1]
    assert [run["run_id"] for run in every.json()["runs"]] == started[::-1]
    calls = [c for i in cloud.deployment.invocations[before:] if i.function == "consolidate" for c in i.calls]
    assert any(c.request.action == "dynamodb:Query" and c.request.resource.endswith("/index/GSI2") for c in calls)
    assert all(c.decision.allowed for c in calls)


def test_a_second_tick_finds_nothing_new(cloud: Cloud, admin: str) -> None:
    remember(cloud, admin)
    cloud.later(minutes=15)
    (run,) = cloud.fire_schedule().payload["runs"]
    cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]))
    cloud.later(minutes=15)
    assert cloud.fire_schedule().payload["runs"] == []


def test_a_stage_that_keeps_failing_is_retried_then_recorded_and_the_run_fails(cloud: Cloud, admin: str) -> None:
    from botocore.exceptions import ClientError

    remember(cloud, admin)
    outage = ClientError({"Error": {"Code": "ServiceUnavailableException", "Message": "down"}}, "Converse")
    cloud.bedrock.script.extend([outage] * 100)
    cloud.later(minutes=15)
    (run,) = cloud.fire_schedule().payload["runs"]
    execution = cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]))
    assert json.loads(execution["output"])["status"] == "failed"
    record = cloud.api("GET", f"/v1/consolidations/{run['run_id']}", key=admin).json()
    assert record["status"] == "failed"
    errors = [e for report in record["stages"].values() for e in report["errors"]]
    assert [e["stage"] for e in errors] == ["extract"], errors
    assert record["stages"]["checkpoint"]["counters"] == {"held": 1}
    assert "ServiceUnavailableException" in errors[0]["message"]


def test_a_failing_tick_is_retried_then_lands_in_the_failure_queue(cloud: Cloud) -> None:
    """The schedule invokes asynchronously: a tick that keeps failing is retried per the function's
    EventInvokeConfig, then recorded in its on-failure destination, where an alarm and an operator see it."""
    template = cloud.deployment.template
    table_id, _ = template.one("AWS::DynamoDB::Table")
    aws_client("dynamodb").delete_table(TableName=template.ref(table_id))  # an outage
    last = cloud.fire_schedule()
    assert last.error is not None
    ticks = [i for i in cloud.deployment.invocations if i.function == "consolidate-schedule"]
    (config,) = [
        c["Properties"]
        for c in template.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": cloud.deployment.functions["consolidate-schedule"].logical_id}
    ]
    assert len(ticks) == 1 + config["MaximumRetryAttempts"] > 1
    queue_arn = template.resolve(config["DestinationConfig"]["OnFailure"]["Destination"])
    sqs = aws_client("sqs")
    url = sqs.get_queue_url(QueueName=queue_arn.rsplit(":", 1)[1])["QueueUrl"]
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    failure = json.loads(message["Body"])
    assert failure["requestContext"]["condition"] == "RetriesExhausted"
    physical = cloud.deployment.functions["consolidate-schedule"].physical_name
    (schedule,) = [s for s in template.schedules() if s["Target"]["Arn"].endswith(f":function:{physical}")]
    assert failure["requestPayload"] == json.loads(schedule["Target"]["Input"])


def test_a_run_whose_execution_cannot_start_is_recorded_failed(cloud: Cloud, admin: str) -> None:
    """StartExecution fails (here: the state machine is gone): the caller gets a 5xx in Mneme's shape and
    the run record says failed instead of staying 'running' forever."""
    from mneme.adapters.dynamo.codec import tenant_pk

    remember(cloud, admin)
    aws_client("stepfunctions").delete_state_machine(stateMachineArn=cloud.deployment.state_machine_arn())
    started = cloud.api("POST", "/v1/consolidate", {}, key=admin)
    assert started.status == 503 and started.error_code, str(started)
    table_id, _ = cloud.deployment.template.one("AWS::DynamoDB::Table")
    runs = aws_client("dynamodb").query(  # the operator looks at the table
        TableName=cloud.deployment.template.ref(table_id),
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": tenant_pk("acme", "RUNS")}},
    )["Items"]
    (run_id,) = [item["SK"]["S"].removeprefix("RUN#") for item in runs]
    record = cloud.api("GET", f"/v1/consolidations/{run_id}", key=admin)
    assert record.status == 200, str(record)
    assert record.json()["status"] == "failed"


def _episodes(params: dict[str, Any]) -> list[str]:
    from tests.cloud.bedrock import episodes_of

    return episodes_of(params)


def test_a_window_that_always_fails_is_set_aside_and_the_checkpoint_moves(cloud: Cloud, admin: str) -> None:
    """A window whose every answer is refused by grounding, over three ticks: the first run sets it aside
    with its reason (the run is `partial`, the other window's fact is written), the scope's checkpoint
    moves past it, and the next ticks call the reasoner only for what is new."""
    from tests.cloud.bedrock import tool_answer

    stuck = ["Pallet 7 was damaged in transit again.", "Pallet 7 damaged in transit, the driver said."]
    ungrounded = {"entity": "Globex", "property": "pallet", "value": "nowhere", "summary": "Globex lost a pallet.",
                  "sources": [1], "supersedes": None}  # fmt: skip
    answer = {"summary": None, "facts": [ungrounded]}
    cloud.bedrock.rules.append(
        lambda params: tool_answer(answer) if any("Pallet" in t for t in _episodes(params)) else None
    )
    episode_ids = remember(cloud, admin)
    items = [{"scope": SCOPE, "content": text, "session_id": "pallets"} for text in stuck]  # a window of its own
    assert cloud.api("POST", "/v1/remember", {"items": items}, key=admin).status == 201
    records, calls = [], []
    for tick in range(3):
        before = sum(1 for operation, _ in cloud.bedrock.requests if operation == "Converse")
        cloud.later(minutes=15)
        runs = cloud.fire_schedule().payload["runs"]
        for run in runs:
            cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]))
            records.append(cloud.api("GET", f"/v1/consolidations/{run['run_id']}", key=admin).json())
        calls.append(sum(1 for operation, _ in cloud.bedrock.requests if operation == "Converse") - before)
        if tick < 2:  # something new to consolidate on the next tick
            more = {"scope": SCOPE, "content": f"Pennine Joinery's bank is Barclays, tick {tick}."}
            assert cloud.api("POST", "/v1/remember", {"items": [more]}, key=admin).status == 201
    first = records[0]
    assert first["status"] == "partial", first  # done, and says what it gave up on
    (aside,) = first["set_aside"]
    assert aside["episodes"] == 2 and "not consolidated after 2 attempts" in aside["reason"]
    assert "Globex" in aside["reason"]  # why: the grounding check's refusal
    assert first["stages"]["checkpoint"]["counters"] == {"advanced": len(episode_ids) + 2}
    assert first["stages"]["commit"]["counters"]["facts_written"] >= 1  # the rest of the batch committed
    assert calls[0] <= 2 * first["stages"]["cluster"]["counters"]["clusters"]  # bounded: 2 per window
    assert [r["status"] for r in records[1:]] == ["succeeded", "succeeded"]
    assert all(r["stages"]["collect"]["counters"]["episodes_read"] == 1 for r in records[1:])  # only the new
    assert calls[1:] == [1, 1]  # the stuck window is not asked about again before its backoff


def test_an_execution_that_times_out_concludes_its_run(cloud: Cloud, admin: str) -> None:
    """No catcher sees an execution timeout (or an abort, or States.DataLimitExceeded): the stack's
    EventBridge rule hands the execution's status change to the stage function, which concludes the run."""
    template = cloud.deployment.template
    (rule,) = [r["Properties"] for r in template.of_type("AWS::Events::Rule").values()]
    pattern = rule["EventPattern"]
    assert pattern["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]
    assert template.resolve(pattern["detail"]["stateMachineArn"][0]) == cloud.deployment.state_machine_arn()
    (target,) = rule["Targets"]
    stages = cloud.deployment.functions["consolidate-stages"]
    assert template.resolve(target["Arn"]) == template.get_att(stages.logical_id, "Arn")
    assert target["DeadLetterConfig"] and target["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    permissions = [p["Properties"] for p in template.of_type("AWS::Lambda::Permission").values()]
    assert any(  # the function's resource policy lets EventBridge invoke it for this rule only
        p["Principal"] == "events.amazonaws.com" and template.resolve(p["FunctionName"]) in (
            template.get_att(stages.logical_id, "Arn"), stages.physical_name)
        for p in permissions
    )  # fmt: skip

    remember(cloud, admin)
    started = cloud.api("POST", "/v1/consolidate", {}, key=admin).json()
    run_id = started["run_id"]
    cloud.deployment.wait_for_execution(execution_arn(cloud, run_id))
    from mneme.adapters.dynamo.store import DynamoRecordStore

    table_id, _ = template.one("AWS::DynamoDB::Table")
    store = DynamoRecordStore(template.ref(table_id), client=aws_client("dynamodb"))
    stuck = store.get_run("acme", run_id)
    assert stuck is not None
    store.put_run(stuck.model_copy(update={"status": "running", "finished_at": None}))  # as a timed-out one is
    described = aws_client("stepfunctions").describe_execution(executionArn=execution_arn(cloud, run_id))
    event = {  # what EventBridge delivers for a Standard execution that timed out
        "version": "0",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT,
        "region": REGION,
        "resources": [described["executionArn"]],
        "detail": {
            "executionArn": described["executionArn"],
            "stateMachineArn": cloud.deployment.state_machine_arn(),
            "name": run_id,
            "status": "TIMED_OUT",
            "input": described["input"],
            "error": "States.Timeout",
            "cause": None,
        },
    }
    invocation = cloud.deployment.invoke_async("consolidate-stages", event)
    assert invocation.error is None, invocation.error
    record = cloud.api("GET", f"/v1/consolidations/{run_id}", key=admin).json()
    assert record["status"] in ("failed", "partial")  # what it had done by then decides which
    assert record["stages"]["workflow"]["errors"] == [
        {"stage": "workflow", "message": "execution timed out: States.Timeout"}
    ]
