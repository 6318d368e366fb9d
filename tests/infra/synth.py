"""Synthesize the CDK app in-process (cdk.json context, cdk-nag plugin, no bundling) and read the result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk
from aws_cdk.assertions import Template

from infra.mneme_infra.stack import build_app
from infra.mneme_infra.storage import TABLE_SCHEMA

CDK_JSON = Path(__file__).resolve().parents[2] / "infra" / "cdk.json"
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
# Every conditional branch of the stack, with values as `-c` passes them (strings).
VARIANT = {
    "mneme:stage": "test",
    "mneme:removal_policy": "destroy",
    "mneme:table_encryption": "customer_managed",
    "mneme:log_retention_days": "7",
    "mneme:search_encryption": "customer_managed",
    "mneme:search_standby_replicas": "false",
    "mneme:reasoner_model_id": "us.anthropic.claude-3-5-haiku-20241022-v1:0",
    "mneme:embedding_dimensions": "512",
    "mneme:consolidation_schedule": "rate(1 hour)",
    "mneme:consolidation_enabled": "false",
    "mneme:index_repair_schedule": "rate(2 hours)",
    "mneme:index_repair_enabled": "false",
    "mneme:search_operator_arns": "arn:aws:iam::123456789012:role/mneme-operator",
    "mneme:map_concurrency": "2",
    "mneme:alarm_email": "ops@example.com",
    "mneme:api_access_logs": "true",
    "mneme:tenant_throttle_buckets": "64",
    "mneme:tenant_rate_limit": "5",
    "mneme:tenant_burst_limit": "10",
}

# A stage brought back on what its destroyed stack retained (docs/deploy.md 'Bring a stage back'), with
# tenants pinned to buckets of their own, the whole-API rate limit and an application inference profile.
RETAINED_TABLE = "Mneme-prod-StorageTableB43FDCE7-1A2B3C4D5E6F"
RETAINED_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:FunctionsCursorSecret1A2B3C-AbCdEf"
APPLICATION_PROFILE = "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3d4e5f6"
BROUGHT_BACK = {
    "mneme:stage": "prod",
    "mneme:table_name": RETAINED_TABLE,
    "mneme:cursor_secret_arn": RETAINED_SECRET,
    "mneme:reasoner_model_id": APPLICATION_PROFILE,
    "mneme:pinned_tenants": "acme,bigco=100/200",
    "mneme:api_requests_per_minute": "6000",
}

OPERATOR = "arn:aws:iam::123456789012:role/mneme-operator"
# The managed-domain search option (infra/mneme_infra/search_domain.py), with an operator to name.
DOMAIN = {"mneme:search": "domain", "mneme:stage": "small", "mneme:search_operator_arns": OPERATOR}


@dataclass(frozen=True)
class Synth:
    template: Template
    raw: dict[str, Any]
    violations: list[dict[str, Any]]  # cdk-nag findings left after acknowledgments
    acknowledgments: dict[str, str]  # rule id -> reason, as recorded in the stack metadata

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.raw["Resources"]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.resources.items() if r["Type"] == resource_type}

    def function_ids(self) -> dict[str, str]:
        """function name -> logical id, from the description `Mneme <name>`."""
        functions = self.of_type("AWS::Lambda::Function").items()
        return {r["Properties"]["Description"].removeprefix("Mneme "): lid for lid, r in functions}

    def function(self, name: str) -> dict[str, Any]:
        return self.resources[self.function_ids()[name]]["Properties"]

    def role_statements(self, function: str) -> list[dict[str, Any]]:
        """Every statement of the policies attached to the function's role."""
        role_id = self.function(function)["Role"]["Fn::GetAtt"][0]
        return self.statements_of_role(role_id)

    def statements_of_role(self, role_id: str) -> list[dict[str, Any]]:
        return [
            statement
            for policy in self.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]

    def role_actions(self, function: str) -> set[str]:
        return {action for s in self.role_statements(function) for action in as_list(s["Action"])}

    def state_machine(self) -> dict[str, Any]:
        """The ASL, with the CloudFormation references in it replaced by `<logical id>`."""
        (machine,) = self.of_type("AWS::StepFunctions::StateMachine").values()
        parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
        return json.loads("".join(part if isinstance(part, str) else reference(part) for part in parts))


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def reference(token: dict[str, Any]) -> str:
    if "Fn::GetAtt" in token:
        return f"<{token['Fn::GetAtt'][0]}>"
    return f"<{token.get('Ref', '?')}>"


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
    return Synth(Template.from_json(template), template, violations, acknowledgments)
