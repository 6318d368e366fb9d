"""Every Lambda function, built by one helper from the route table's function names plus the authorizer.

Code: one asset holding `functions/` and `mneme/`. Dependencies: one layer. Each function has its own
role, log group and table access; a function without a `FunctionSpec` fails the synth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aws_cdk import Acknowledgment, AssetHashType, Duration, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.layer_bundling import CopySources, PipLayer, bundling, runtime_requirements
from infra.mneme_infra.config import InfraConfig
from mneme.observability import NAMESPACE, SERVICE

REPO = Path(__file__).resolve().parents[2]
AUTHORIZER = "authorizer"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64


@dataclass(frozen=True)
class FunctionSpec:
    memory_mb: int
    timeout_seconds: int  # below API Gateway's 29 s integration timeout
    table_access: Literal["read", "read_write"]


SPECS: dict[str, FunctionSpec] = {
    AUTHORIZER: FunctionSpec(memory_mb=512, timeout_seconds=5, table_access="read"),
    "retrieve": FunctionSpec(memory_mb=1024, timeout_seconds=10, table_access="read"),
    "remember": FunctionSpec(memory_mb=1024, timeout_seconds=25, table_access="read_write"),
    "recall": FunctionSpec(memory_mb=1024, timeout_seconds=15, table_access="read"),
    "consolidate": FunctionSpec(memory_mb=1024, timeout_seconds=25, table_access="read_write"),
    "curate": FunctionSpec(memory_mb=512, timeout_seconds=15, table_access="read_write"),
}

# grant_read_write_data on a table with a customer key adds these action families, on that key only.
_KEY_ACKNOWLEDGMENTS = tuple(
    Acknowledgment(
        id=f"AwsSolutions-IAM5[Action::{action}]",
        reason="CDK's grant to write the table lets the role use the table's own KMS key, and no other key.",
    )
    for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*")
)


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        table: dynamodb.ITable,
        names: Sequence[str],
    ) -> None:
        super().__init__(scope, construct_id)
        self._config, self._table = config, table
        self.code = lambda_.Code.from_asset(
            str(REPO / "functions"),
            asset_hash_type=AssetHashType.OUTPUT,
            bundling=bundling(CopySources({"functions": REPO / "functions", "mneme": REPO / "shared" / "mneme"})),
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            description="Mneme runtime dependencies (pyproject [project].dependencies without boto3)",
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            removal_policy=config.removal,
            code=lambda_.Code.from_asset(
                str(REPO / "shared"),  # never read: the output below is the asset and its hash
                asset_hash_type=AssetHashType.OUTPUT,
                bundling=bundling(PipLayer(runtime_requirements(REPO / "pyproject.toml"))),
            ),
        )
        self.by_name = {name: self._function(name) for name in dict.fromkeys([*names, AUTHORIZER])}

    @property
    def authorizer(self) -> lambda_.IFunction:
        return self.by_name[AUTHORIZER]

    def _function(self, name: str) -> lambda_.Function:
        spec = SPECS.get(name)
        if spec is None or not (REPO / "functions" / f"{name}.py").is_file():
            raise ValueError(f"function {name!r} needs functions/{name}.py and a FunctionSpec in {__name__}")
        construct_id = name.title().replace("_", "")
        log_group = logs.LogGroup(
            self,
            f"{construct_id}Logs",
            retention=self._config.log_retention,
            removal_policy=self._config.removal,
        )
        role = iam.Role(self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            construct_id,
            description=f"Mneme {name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"functions.{name}.handler",
            code=self.code,
            layers=[self.layer],
            role=role,
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_seconds),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            environment={
                "POWERTOOLS_SERVICE_NAME": SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                "MNEME_STORE__KIND": "dynamodb",
                "MNEME_STORE__TABLE_NAME": self._table.table_name,
                "MNEME_STORE__REGION": Stack.of(self).region,
            },
        )
        Validations.of(function).acknowledge(
            Acknowledgment(
                id="AwsSolutions-L1",
                reason="Python 3.12 on purpose: the dependency layer is built for cp312 (layer_bundling.py).",
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions.",
            )
        )
        if spec.table_access == "read":
            self._table.grant_read_data(function)
        else:
            self._table.grant_read_write_data(function)
            if self._table.encryption_key is not None:
                Validations.of(role).acknowledge(*_KEY_ACKNOWLEDGMENTS)
        return function
