"""The CDK app, synthesized in-process without bundling or AWS: the route table drives the API, the table
is protected, each function gets only the access it needs, and cdk-nag has nothing left to say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk
import pytest
from aws_cdk.assertions import Match

from infra.mneme_infra.specs import AUTHORIZER, EXTRA_FUNCTIONS, REPAIR, SCHEDULE, SPECS, STAGES
from infra.mneme_infra.storage import TABLE_SCHEMA
from mneme.http.routes import FUNCTIONS, PAGES, ROUTES
from mneme.models import Role
from tests.infra.synth import GSI_SCHEMA, VARIANT, Synth, as_list, synthesize

WRITE_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
}
ALL_FUNCTIONS = sorted([*FUNCTIONS, *EXTRA_FUNCTIONS])
REASONER = "global.anthropic.claude-haiku-4-5-20251001-v1:0"

CURSOR_SIGNERS = {"recall", "records"}  # they sign page cursors with the secret


def api_methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    """(HTTP method, resource path) -> method properties, paths rebuilt from the resource tree."""
    resources = synth.of_type("AWS::ApiGateway::Resource")

    def path(resource_id: str) -> str:
        props = resources[resource_id]["Properties"]
        parent = props["ParentId"]
        return ("" if "Fn::GetAtt" in parent else path(parent["Ref"])) + "/" + props["PathPart"]

    methods = synth.of_type("AWS::ApiGateway::Method").values()
    return {
        (m["Properties"]["HttpMethod"], path(m["Properties"]["ResourceId"]["Ref"])): m["Properties"] for m in methods
    }


# -- storage -------------------------------------------------------------------------------------------
def test_table_is_on_demand_encrypted_recoverable_and_retained(default: Synth) -> None:
    default.template.resource_count_is("AWS::DynamoDB::Table", 1)
    default.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "KeySchema": TABLE_SCHEMA["KeySchema"],
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True},
                "DeletionProtectionEnabled": True,
                "GlobalSecondaryIndexes": TABLE_SCHEMA["GlobalSecondaryIndexes"] or Match.absent(),
                # a forgetting's recent mark (recall's guard while the index lags) expires after a day
                "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                "StreamSpecification": Match.absent(),  # indexing retries by sweep, not a stream
            },
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_table_takes_gsis_from_the_schema_and_a_customer_key_when_configured(variant: Synth) -> None:
    variant.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "GlobalSecondaryIndexes": GSI_SCHEMA["GlobalSecondaryIndexes"],
                "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": Match.any_value()},
                "DeletionProtectionEnabled": False,
            },
            "DeletionPolicy": "Delete",
        },
    )
    variant.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


# -- functions -----------------------------------------------------------------------------------------
def test_one_function_per_route_function_plus_authorizer_stages_and_schedule(default: Synth) -> None:
    default.template.resource_count_is("AWS::Lambda::Function", len(ALL_FUNCTIONS))
    assert sorted(default.function_ids()) == ALL_FUNCTIONS
    (layer_id,) = default.of_type("AWS::Lambda::LayerVersion")
    for name in ALL_FUNCTIONS:
        module, handler = SPECS[name].entry(name)
        props = default.function(name)
        assert props["Handler"] == f"functions.{module}.{handler}"
        assert (props["Runtime"], props["Architectures"]) == ("python3.12", ["arm64"])
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        assert props["Layers"] == [{"Ref": layer_id}]
        assert (props["MemorySize"], props["Timeout"]) == (SPECS[name].memory_mb, SPECS[name].timeout_seconds)
    assert default.function(STAGES)["Handler"] == "functions.consolidate.stage_handler"
    assert default.function(SCHEDULE)["Handler"] == "functions.consolidate.schedule_handler"
    assert default.function(REPAIR)["Handler"] == "functions.repair.handler"
    # No function reserves concurrency: on an account whose quota is 10, any reservation fails the deploy.
    assert not [name for name in ALL_FUNCTIONS if "ReservedConcurrentExecutions" in default.function(name)]


def test_every_function_gets_the_adapter_settings_bootstrap_reads(default: Synth) -> None:
    (table_id,) = default.of_type("AWS::DynamoDB::Table")
    (collection_id,) = default.of_type("AWS::OpenSearchServerless::Collection")
    for name in ALL_FUNCTIONS:
        env = default.function(name)["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == "mneme" and env["POWERTOOLS_METRICS_NAMESPACE"] == "Mneme"
        assert env["MNEME_STORE__KIND"] == "dynamodb" and env["MNEME_STORE__TABLE_NAME"] == {"Ref": table_id}
        assert env["MNEME_EMBEDDER__KIND"] == "bedrock"
        assert env["MNEME_EMBEDDER__MODEL_ID"] == "amazon.titan-embed-text-v2:0"
        assert env["MNEME_EMBEDDER__DIMENSIONS"] == "1024"
        assert env["MNEME_INDEX__KIND"] == "opensearch" and env["MNEME_INDEX__SERVICE"] == "aoss"
        assert env["MNEME_INDEX__ENDPOINT"] == {"Fn::GetAtt": [collection_id, "CollectionEndpoint"]}
        assert ("MNEME_REASONER__KIND" in env) == (name == STAGES), name
        assert ("MNEME_STATE_MACHINE_ARN" in env) == (name in {"consolidate", SCHEDULE}), name
        assert ("MNEME_CURSOR_SECRET_ARN" in env) == (name in CURSOR_SIGNERS), name
        assert "MNEME_CURSOR_SECRET" not in env  # never the secret's value
    (machine_id,) = default.of_type("AWS::StepFunctions::StateMachine")
    assert default.function("consolidate")["Environment"]["Variables"]["MNEME_STATE_MACHINE_ARN"] == {"Ref": machine_id}


def test_log_groups_follow_the_configured_retention(default: Synth, variant: Synth) -> None:
    for synth, days, access_logs in ((default, 30, 0), (variant, 7, 1)):
        groups = synth.of_type("AWS::Logs::LogGroup").values()
        assert len(groups) == len(ALL_FUNCTIONS) + 1 + access_logs  # + state machine (+ API access logs)
        assert {g["Properties"]["RetentionInDays"] for g in groups} == {days}


def test_each_function_gets_the_table_access_of_its_spec(default: Synth) -> None:
    unused = {"dynamodb:Scan", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeTable"}
    for name in ALL_FUNCTIONS:
        actions = default.role_actions(name)
        if SPECS[name].table_access == "read_keys":  # the authorizer: one GetItem on API-key items
            (statement,) = [s for s in default.role_statements(name) if str(s["Action"]).startswith("dynamodb:")]
            assert statement["Action"] == "dynamodb:GetItem", statement
            assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*"]}}
            continue
        assert {"dynamodb:GetItem", "dynamodb:Query"} <= actions, name
        assert not actions & unused, name  # least privilege: no call of the adapter needs them (tests/cloud)
        if SPECS[name].table_access in ("read_write", "read_write_keys"):
            assert actions >= WRITE_ACTIONS, name
        elif SPECS[name].table_access == "read":
            assert not actions & WRITE_ACTIONS, name
    for role in default.of_type("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]  # logs are granted on each function's group only


def test_recall_cannot_write_records_only_its_delivered_session_markers(default: Synth) -> None:
    writes = [s for s in default.role_statements("recall") if set(as_list(s["Action"])) & WRITE_ACTIONS]
    assert len(writes) == 1
    (statement,) = writes
    assert set(as_list(statement["Action"])) == {"dynamodb:BatchWriteItem", "dynamodb:PutItem"}
    assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["T#*#DELIVERED#*"]}}
    assert not default.role_actions("recall") & {"dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    assert not default.role_actions("retrieve") & WRITE_ACTIONS


def test_index_repair_may_update_only_episodes(default: Synth) -> None:
    writes = [s for s in default.role_statements(REPAIR) if set(as_list(s["Action"])) & WRITE_ACTIONS]
    (statement,) = writes
    assert as_list(statement["Action"]) == ["dynamodb:UpdateItem"]
    assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["T#*#EPISODES"]}}
    assert not default.role_actions(REPAIR) & {"states:StartExecution", "secretsmanager:GetSecretValue"}


def bedrock_resources(synth: Synth, function: str) -> list[Any]:
    return [r for s in synth.role_statements(function) if "bedrock:InvokeModel" in as_list(s["Action"])
            for r in as_list(s["Resource"])]  # fmt: skip


def foundation_model(model_id: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":bedrock:", {"Ref": "AWS::Region"},
                              f"::foundation-model/{model_id}"]]}  # fmt: skip


def test_bedrock_is_allowed_only_for_the_configured_models_and_only_where_used(default: Synth) -> None:
    # the default reasoner is a global inference profile: the profile here and its model in any region
    embedder = foundation_model("amazon.titan-embed-text-v2:0")
    profile = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":bedrock:", {"Ref": "AWS::Region"}, ":",
                                 {"Ref": "AWS::AccountId"}, ":inference-profile/" + REASONER]]}  # fmt: skip
    model = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":bedrock:*::foundation-model/"
                               + REASONER.removeprefix("global.")]]}  # fmt: skip
    expected = {"remember": [embedder], "recall": [embedder], "curate": [embedder], REPAIR: [embedder],
                "records": [embedder], STAGES: [embedder, profile, model]}  # fmt: skip
    for name in ALL_FUNCTIONS:
        found, wanted = bedrock_resources(default, name), expected.get(name, [])
        assert sorted(map(json.dumps, found)) == sorted(map(json.dumps, wanted)), name
        assert not {a for a in default.role_actions(name) if a.startswith("bedrock:")} - {"bedrock:InvokeModel"}


def test_an_inference_profile_reasoner_gets_the_profile_and_its_model(variant: Synth) -> None:
    resources = json.dumps(bedrock_resources(variant, STAGES))
    assert ":inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0" in resources
    assert ":bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0" in resources
    assert variant.function(STAGES)["Environment"]["Variables"]["MNEME_EMBEDDER__DIMENSIONS"] == "512"


def test_only_the_run_starters_may_start_executions_and_only_cursor_signers_read_the_secret(default: Synth) -> None:
    for name in ALL_FUNCTIONS:
        actions = default.role_actions(name)
        assert ("states:StartExecution" in actions) == (name in {"consolidate", SCHEDULE}), name
        assert ("secretsmanager:GetSecretValue" in actions) == (name in CURSOR_SIGNERS), name
    (secret_id,) = default.of_type("AWS::SecretsManager::Secret")
    for name in CURSOR_SIGNERS:  # the change feed (recall), episode and fact lists (records)
        (statement,) = [s for s in default.role_statements(name) if "secretsmanager:GetSecretValue" in s["Action"]]
        assert statement["Resource"] == {"Ref": secret_id}


def test_the_records_function_serves_get_list_forget_and_correct_with_the_least_role(default: Synth) -> None:
    served = {(r.method, r.path): r.role for r in ROUTES if r.function == "records"}
    assert served == {
        ("GET", "/v1/episodes"): Role.reader, ("GET", "/v1/episodes/{episode_id}"): Role.reader,
        ("DELETE", "/v1/episodes/{episode_id}"): Role.writer, ("GET", "/v1/facts"): Role.reader,
        ("GET", "/v1/facts/{fact_id}"): Role.reader, ("PATCH", "/v1/facts/{fact_id}"): Role.approver,
        ("DELETE", "/v1/facts/{fact_id}"): Role.approver,
    }  # fmt: skip
    actions = default.role_actions("records")
    assert {"dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:Query"} <= actions
    assert not {"states:StartExecution"} & actions


# -- api -----------------------------------------------------------------------------------------------
def test_every_route_is_a_method_on_its_path_integrated_with_its_function(default: Synth) -> None:
    methods = api_methods(default)
    assert set(methods) == {(route.method, route.path) for route in ROUTES + PAGES}
    function_ids = default.function_ids()
    for route in ROUTES + PAGES:
        integration = methods[route.method, route.path]["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert function_ids[route.function] in json.dumps(integration["Uri"]), route
    integrated = json.dumps([m["Integration"] for m in methods.values()])
    assert function_ids[STAGES] not in integrated and function_ids[SCHEDULE] not in integrated


def test_routes_with_a_role_use_the_token_authorizer_and_health_is_public(default: Synth) -> None:
    methods = api_methods(default)
    (authorizer_id,) = default.of_type("AWS::ApiGateway::Authorizer")
    for route in ROUTES + PAGES:
        method = methods[route.method, route.path]
        if route.role is None:
            assert method["AuthorizationType"] == "NONE" and "AuthorizerId" not in method, route
        else:
            assert method["AuthorizationType"] == "CUSTOM", route
            assert method["AuthorizerId"] == {"Ref": authorizer_id}, route
    assert [r.path for r in ROUTES if r.role is None] == ["/v1/health"]
    assert [(r.method, r.path, r.function) for r in PAGES if r.role is None] == [  # static files only
        ("GET", "/console", "curate"),
        ("HEAD", "/console", "curate"),
        ("GET", "/console/{asset}", "curate"),
        ("GET", "/favicon.ico", "curate"),
        ("GET", "/openapi.json", "curate"),
    ]
    authorizer = default.resources[authorizer_id]["Properties"]
    assert authorizer["Type"] == "TOKEN"
    assert authorizer["IdentitySource"] == "method.request.header.Authorization"
    assert authorizer["AuthorizerResultTtlInSeconds"] == 300
    assert default.function_ids()[AUTHORIZER] in json.dumps(authorizer["AuthorizerUri"])


def test_stage_is_throttled_and_traced_without_account_wide_access_logging(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "dev",
            "TracingEnabled": True,
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100, "ResourcePath": "/*"})]
            ),
            "AccessLogSetting": Match.absent(),
        },
    )
    assert not default.of_type("AWS::ApiGateway::Account")  # a fresh account has no logging role: none needed


def test_access_logs_bring_the_account_logging_role_with_them(variant: Synth) -> None:
    """Access logging needs the account's API Gateway CloudWatch role: with the flag, the stack creates it
    (retained: the account setting outlives the stack), so the stage also deploys on a fresh account."""
    variant.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {"AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")}},
    )
    ((_, account),) = variant.of_type("AWS::ApiGateway::Account").items()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    assert variant.resources[role_id]["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize(
    ("response_type", "status", "code"),
    [
        ("UNAUTHORIZED", "401", "unauthorized"),
        ("ACCESS_DENIED", "401", "$context.authorizer.reason"),
        ("DEFAULT_4XX", None, "request_rejected"),
        ("DEFAULT_5XX", None, "internal_error"),
    ],
)
def test_gateway_errors_have_mnemes_error_shape(
    default: Synth, response_type: str, status: str | None, code: str
) -> None:
    responses = default.of_type("AWS::ApiGateway::GatewayResponse").values()
    (response,) = [r["Properties"] for r in responses if r["Properties"]["ResponseType"] == response_type]
    assert response.get("StatusCode") == status
    rendered = response["ResponseTemplates"]["application/json"].replace("$context.error.messageString", '"m"')
    body = json.loads(rendered)
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["error"]["details"] == {"request_id": "$context.requestId"}


# -- outputs and cdk-nag -------------------------------------------------------------------------------
def test_outputs_name_what_a_client_and_an_operator_need(default: Synth) -> None:
    assert set(default.raw["Outputs"]) == {
        "ApiUrl",
        "TableName",
        "CollectionEndpoint",
        "StateMachineArn",
        "CursorSecretArn",
    }


@pytest.mark.parametrize("config", ["default", "variant"])
def test_cdk_nag_finds_no_unacknowledged_errors(config: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(config)
    errors = [
        f"{v['ruleName']}: {[c['constructPath'] for c in v['violatingConstructs']]}"
        for v in synth.violations
        if v["severity"] == "error"
    ]
    assert errors == []


def test_every_acknowledgment_has_a_reason_and_silences_a_real_finding(
    variant: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert variant.acknowledgments
    for rule, reason in variant.acknowledgments.items():
        assert len(reason) >= 40, f"{rule}: give a concrete reason"
    monkeypatch.setattr(aws_cdk.Validations, "acknowledge", lambda self, *rules: None)
    unacknowledged = synthesize(tmp_path, VARIANT, GSI_SCHEMA)
    assert set(variant.acknowledgments) <= {v["ruleName"] for v in unacknowledged.violations}
