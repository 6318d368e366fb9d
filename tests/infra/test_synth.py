"""The CDK app, synthesized in-process without bundling or AWS: the route table drives the API, the table
is protected, each function gets only the access it needs, and cdk-nag has nothing left to say."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk
import pytest
from aws_cdk.assertions import Match, Template

from infra.mneme_infra.functions import AUTHORIZER, SPECS
from infra.mneme_infra.stack import build_app
from infra.mneme_infra.storage import TABLE_SCHEMA
from mneme.routes import FUNCTIONS, ROUTES

CDK_JSON = Path(__file__).resolve().parents[2] / "infra" / "cdk.json"
WRITE_ACTIONS = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
GSI_SCHEMA = {
    "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "G1PK", "G1SK")],
    "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "GSI1",
            "KeySchema": [
                {"AttributeName": "G1PK", "KeyType": "HASH"},
                {"AttributeName": "G1SK", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
}
VARIANT = {
    "mneme:stage": "test",
    "mneme:removal_policy": "destroy",
    "mneme:table_encryption": "customer_managed",
    "mneme:log_retention_days": "7",  # as `-c` passes it
}


@dataclass(frozen=True)
class Synth:
    template: Template
    resources: dict[str, dict[str, Any]]
    violations: list[dict[str, Any]]  # cdk-nag findings left after acknowledgments
    acknowledgments: dict[str, str]  # rule id -> reason, as recorded in the stack metadata

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.resources.items() if r["Type"] == resource_type}

    def function_ids(self) -> dict[str, str]:
        """function name -> logical id, from the handler `functions.<name>.handler`."""
        return {
            r["Properties"]["Handler"].split(".")[1]: lid for lid, r in self.of_type("AWS::Lambda::Function").items()
        }


def synthesize(outdir: Path, context: Mapping[str, Any] = {}, schema: Mapping[str, Any] = TABLE_SCHEMA) -> Synth:
    """Synthesize like `cdk synth` (cdk.json context, cdk-nag plugin) but skip asset bundling."""
    cdk_context = json.loads(CDK_JSON.read_text())["context"]
    app, stack = build_app({**cdk_context, **context, "aws:cdk:bundling-stacks": []}, str(outdir), schema)
    try:
        app.synth()
    except RuntimeError as e:  # cdk-nag errors fail the synth after the assembly is written
        assert "ValidationFailed" in str(e), e
    template = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
    report = json.loads((outdir / "validation-report.json").read_text())
    metadata = json.loads((outdir / f"{stack.artifact_id}.metadata.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    acknowledgments = {
        rule.removeprefix("Annotation::"): reason
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == aws_cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule, reason in entry["data"].items()
    }
    return Synth(Template.from_json(template), template["Resources"], violations, acknowledgments)


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A disposable stage with a customer-managed key and a GSI: every conditional branch of the stack."""
    return synthesize(tmp_path_factory.mktemp("variant"), VARIANT, GSI_SCHEMA)


def role_actions(synth: Synth, function: str) -> set[str]:
    role_id = synth.resources[synth.function_ids()[function]]["Properties"]["Role"]["Fn::GetAtt"][0]
    actions: set[str] = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                action = statement["Action"]
                actions |= {action} if isinstance(action, str) else set(action)
    return actions


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
                "SSESpecification": {
                    "SSEEnabled": True,
                    "SSEType": "KMS",
                    "KMSMasterKeyId": Match.any_value(),
                },
                "DeletionProtectionEnabled": False,
            },
            "DeletionPolicy": "Delete",
        },
    )
    variant.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


# -- functions -----------------------------------------------------------------------------------------
def test_one_function_per_route_function_plus_the_authorizer(default: Synth) -> None:
    assert sorted(default.function_ids()) == sorted([*FUNCTIONS, AUTHORIZER])
    (table_id,) = default.of_type("AWS::DynamoDB::Table")
    (layer_id,) = default.of_type("AWS::Lambda::LayerVersion")
    for name in default.function_ids():
        default.template.has_resource_properties(
            "AWS::Lambda::Function",
            {
                "Handler": f"functions.{name}.handler",
                "Runtime": "python3.12",
                "Architectures": ["arm64"],
                "TracingConfig": {"Mode": "Active"},
                "LoggingConfig": {"LogFormat": "JSON", "LogGroup": Match.any_value()},
                "Layers": [{"Ref": layer_id}],
                "Environment": {
                    "Variables": Match.object_like(
                        {
                            "POWERTOOLS_SERVICE_NAME": "mneme",
                            "POWERTOOLS_METRICS_NAMESPACE": "Mneme",
                            "MNEME_STORE__KIND": "dynamodb",
                            "MNEME_STORE__TABLE_NAME": {"Ref": table_id},
                            "MNEME_STORE__REGION": {"Ref": "AWS::Region"},
                        }
                    )
                },
            },
        )


def test_log_groups_follow_the_configured_retention(default: Synth, variant: Synth) -> None:
    for synth, days in ((default, 30), (variant, 7)):
        groups = synth.of_type("AWS::Logs::LogGroup").values()
        assert len(groups) == len(synth.function_ids()) + 1  # + API access logs
        assert {g["Properties"]["RetentionInDays"] for g in groups} == {days}


def test_each_function_gets_the_table_access_of_its_spec(default: Synth) -> None:
    for name in default.function_ids():
        actions = role_actions(default, name)
        assert {"dynamodb:GetItem", "dynamodb:Query"} <= actions, name
        expected_writes = WRITE_ACTIONS if SPECS[name].table_access == "read_write" else set()
        assert actions & WRITE_ACTIONS == expected_writes, name
    assert not role_actions(default, "retrieve") & WRITE_ACTIONS
    assert role_actions(default, "curate") >= WRITE_ACTIONS
    for role in default.of_type("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]  # logs are granted on each function's group only


# -- api -----------------------------------------------------------------------------------------------
def test_every_route_is_a_method_on_its_path_integrated_with_its_function(default: Synth) -> None:
    methods = api_methods(default)
    assert set(methods) == {(route.method, route.path) for route in ROUTES}
    function_ids = default.function_ids()
    for route in ROUTES:
        integration = methods[route.method, route.path]["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert function_ids[route.function] in json.dumps(integration["Uri"]), route


def test_routes_with_a_role_use_the_token_authorizer_and_health_is_public(default: Synth) -> None:
    methods = api_methods(default)
    (authorizer_id,) = default.of_type("AWS::ApiGateway::Authorizer")
    for route in ROUTES:
        method = methods[route.method, route.path]
        if route.role is None:
            assert method["AuthorizationType"] == "NONE" and "AuthorizerId" not in method, route
        else:
            assert method["AuthorizationType"] == "CUSTOM", route
            assert method["AuthorizerId"] == {"Ref": authorizer_id}, route
    assert [r.path for r in ROUTES if r.role is None] == ["/v1/health"]
    authorizer = default.resources[authorizer_id]["Properties"]
    assert authorizer["Type"] == "TOKEN"
    assert authorizer["IdentitySource"] == "method.request.header.Authorization"
    assert authorizer["AuthorizerResultTtlInSeconds"] == 300
    assert default.function_ids()[AUTHORIZER] in json.dumps(authorizer["AuthorizerUri"])


def test_stage_is_throttled_traced_and_access_logged(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "dev",
            "TracingEnabled": True,
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100, "ResourcePath": "/*"})]
            ),
            "AccessLogSetting": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp("requestId"),
            },
        },
    )


@pytest.mark.parametrize(
    ("response_type", "status", "code"),
    [
        ("UNAUTHORIZED", "401", "unauthorized"),
        ("ACCESS_DENIED", "403", "$context.authorizer.reason"),
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


# -- cdk-nag -------------------------------------------------------------------------------------------
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
