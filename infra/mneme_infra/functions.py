"""Every Lambda function, built by one helper: the route table's functions, the authorizer and the entry
points that no route calls (the Step Functions stage task and the two schedule targets).

Code: one asset holding `functions/` and `mneme/`. Dependencies: one layer. Each function has its own
role and log group, the same adapter settings (so `mneme.bootstrap` wires the same services everywhere),
and only the access its `FunctionSpec.uses` names; a function without a spec fails the synth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from aws_cdk import Acknowledgment, AssetHashType, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.layer_bundling import CopySources, PipLayer, bundling
from infra.layer_lock import LOCK_FILE
from infra.mneme_infra.access import (
    TABLE_READ_ACTIONS,
    TABLE_WRITE_ACTIONS,
    api_key_reads_statement,
    delivered_writes_statement,
    indexed_marks_statement,
    invoke_models_statement,
    model_acknowledgments,
    no_api_key_writes_statement,
    through_application_profiles_statement,
)
from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.search import Search
from infra.mneme_infra.search_domain import SearchDomain
from infra.mneme_infra.specs import AUTHORIZER, EXTRA_FUNCTIONS, REPO, SPECS, FunctionSpec, Use, call_budget
from mneme.observability import NAMESPACE, SERVICE

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
# The functions' code asset: these directories side by side (the layer holds the dependencies).
CODE_SOURCES = {"functions": REPO / "functions", "mneme": REPO / "shared" / "mneme"}

# grant_read_write_data on a table with a customer key adds these action families, on that key only.
_KEY_ACKNOWLEDGMENTS = tuple(
    Acknowledgment(
        id=f"AwsSolutions-IAM5[Action::{action}]",
        reason="CDK's grant to write the table lets the role use the table's own KMS key, and no other key.",
    )
    for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*")
)


def construct_name(name: str) -> str:
    return "".join(part.title() for part in re.split(r"[-_]", name))


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        table: dynamodb.ITable,
        search: Search | SearchDomain,
        names: Sequence[str],
        specs: Mapping[str, FunctionSpec] = SPECS,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config, self._table, self._specs = config, table, specs
        self.code = lambda_.Code.from_asset(
            str(REPO / "functions"),
            asset_hash_type=AssetHashType.OUTPUT,
            bundling=bundling(CopySources(CODE_SOURCES, source_only=config.source_only_assets)),
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            description="Mneme runtime dependencies (infra/layer-requirements.txt: locked, without boto3)",
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            # Each deploy that changes the layer publishes a version; CloudFormation deletes the replaced one
            # once the update succeeded (a rollback still finds it). Functions keep working on a deleted
            # version; nothing else uses these, so retaining them only piled them up.
            removal_policy=RemovalPolicy.DESTROY,
            code=lambda_.Code.from_asset(
                str(REPO / "shared"),  # never read: the output below is the asset and its hash
                asset_hash_type=AssetHashType.OUTPUT,
                bundling=bundling(PipLayer(LOCK_FILE, source_only=config.source_only_assets)),
            ),
        )
        self.cursor_secret = self._cursor_secret(config)
        # What the schedules could not deliver and the scheduled functions' failed asynchronous invocations
        # (after their retries): kept 14 days for an operator to read or redrive; alarmed (monitoring.py).
        self.failures = sqs.Queue(
            self,
            "ScheduledFailures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=config.removal,
        )
        Validations.of(self.failures).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This queue is the dead-letter queue: of the schedules (Scheduler DeadLetterConfig) and "
                "of the scheduled functions' asynchronous invocations (OnFailure destination).",
            )
        )
        # The settings every function reads at cold start (mneme.settings); see docs/deploy.md.
        self.environment = {
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            "MNEME_HOME": "/tmp/mneme",  # the only writable path on Lambda; nothing is kept there in AWS
            "MNEME_STORE__KIND": "dynamodb",
            "MNEME_STORE__TABLE_NAME": table.table_name,
            "MNEME_STORE__REGION": Stack.of(self).region,
            "MNEME_EMBEDDER__KIND": "bedrock",
            "MNEME_EMBEDDER__MODEL_ID": config.embedding_model_id,
            "MNEME_EMBEDDER__DIMENSIONS": str(config.embedding_dimensions),
            "MNEME_INDEX__KIND": "opensearch",
            "MNEME_INDEX__ENDPOINT": search.endpoint,
            "MNEME_INDEX__INDEX_NAME": search.index_name,
            "MNEME_INDEX__SERVICE": search.service,
        }
        self.by_name = {name: self._function(name) for name in dict.fromkeys([*names, *EXTRA_FUNCTIONS])}
        search.allow(readers=self.roles_using("index_read"), writers=self.roles_using("index_write"))

    def _cursor_secret(self, config: InfraConfig) -> secretsmanager.ISecret:
        """The change feed's signing key, or the one a destroyed stage retained (`mneme:cursor_secret_arn`):
        imported, so cursors the connectors hold stay valid."""
        if config.cursor_secret_arn is not None:
            return secretsmanager.Secret.from_secret_complete_arn(self, "CursorSecret", config.cursor_secret_arn)
        secret = secretsmanager.Secret(
            self,
            "CursorSecret",
            description="Mneme: signs change-feed cursors (GET /v1/changes)",
            generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True, password_length=64),
            removal_policy=config.removal,
        )
        Validations.of(secret).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason="Rotating the cursor-signing key would invalidate every cursor a connector holds; the app "
                "verifies with one key only, so rotation waits for a two-key (current, previous) reader.",
            )
        )
        return secret

    @property
    def authorizer(self) -> lambda_.Function:
        return self.by_name[AUTHORIZER]

    def roles_using(self, use: Use) -> list[iam.IRole]:
        return [fn.role for name, fn in self.by_name.items() if use in self._specs[name].uses and fn.role]

    def allow_start_runs(self, state_machine: sfn.IStateMachine) -> None:
        """The functions that start consolidation runs get the state machine's ARN and StartExecution on it."""
        for name, function in self.by_name.items():
            if "start_runs" in self._specs[name].uses:
                function.add_environment("MNEME_STATE_MACHINE_ARN", state_machine.state_machine_arn)
                state_machine.grant_start_execution(function)

    def _function(self, name: str) -> lambda_.Function:
        spec = self._specs.get(name)
        module, handler = spec.entry(name) if spec else (name, "handler")
        if spec is None or not (REPO / "functions" / f"{module}.py").is_file():
            raise ValueError(f"function {name!r} needs functions/{module}.py and a FunctionSpec in {__name__}")
        construct_id = construct_name(name)
        log_group = logs.LogGroup(
            self, f"{construct_id}Logs", retention=self._config.log_retention, removal_policy=self._config.removal
        )
        role = iam.Role(self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            construct_id,
            description=f"Mneme {name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"functions.{module}.{handler}",
            code=self.code,
            layers=[self.layer],
            role=role,
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_seconds),
            reserved_concurrent_executions=spec.reserved_concurrency,
            retry_attempts=spec.async_retries,
            on_failure=destinations.SqsDestination(self.failures) if spec.async_retries is not None else None,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            environment={**self.environment, **self._extra_environment(spec)},
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
        self._grant(spec, role)
        return function

    def _extra_environment(self, spec: FunctionSpec) -> dict[str, str]:
        extra: dict[str, str] = {}
        if spec.uses & {"embedder", "index_read", "index_write"}:
            budget = call_budget(spec)  # timeouts and retries that fit the function's own timeout
            extra |= {
                "MNEME_EMBEDDER__TIMEOUT_SECONDS": str(budget.bedrock_read_seconds),
                "MNEME_EMBEDDER__MAX_ATTEMPTS": str(budget.bedrock_attempts),
                "MNEME_INDEX__TIMEOUT_SECONDS": str(budget.search_timeout_seconds),
                "MNEME_INDEX__MAX_RETRIES": str(budget.search_retries),
            }
        if "reasoner" in spec.uses:
            extra |= {"MNEME_REASONER__KIND": "bedrock", "MNEME_REASONER__MODEL_ID": self._config.reasoner_model_id}
        if "cursor_secret" in spec.uses:
            extra["MNEME_CURSOR_SECRET_ARN"] = self.cursor_secret.secret_arn
        return extra

    def _grant(self, spec: FunctionSpec, role: iam.Role) -> None:
        if spec.table_access == "read_keys":
            role.add_to_principal_policy(api_key_reads_statement(self._table))
            if self._table.encryption_key is not None:
                self._table.encryption_key.grant_decrypt(role)
        elif spec.table_access in ("read_write", "read_write_keys"):
            self._table.grant(role, *TABLE_READ_ACTIONS, *TABLE_WRITE_ACTIONS)
            if spec.table_access == "read_write":
                role.add_to_principal_policy(no_api_key_writes_statement(self._table))
            if self._table.encryption_key is not None:
                self._table.encryption_key.grant_encrypt_decrypt(role)
                Validations.of(role).acknowledge(*_KEY_ACKNOWLEDGMENTS)
        else:
            self._table.grant(role, *TABLE_READ_ACTIONS)
            if self._table.encryption_key is not None:
                self._table.encryption_key.grant_decrypt(role)
        narrow_writes = {"read_delivered": delivered_writes_statement, "read_mark_indexed": indexed_marks_statement}
        if spec.table_access in narrow_writes:
            role.add_to_principal_policy(narrow_writes[spec.table_access](self._table))
            if self._table.encryption_key is not None:
                self._table.encryption_key.grant_encrypt(role)
                Validations.of(role).acknowledge(*_KEY_ACKNOWLEDGMENTS)
        models = [
            *([self._config.embedding_model_id] if "embedder" in spec.uses else []),
            *([self._config.reasoner_model_id] if "reasoner" in spec.uses else []),
        ]
        if models:
            role.add_to_principal_policy(invoke_models_statement(self, models))
            if through_profiles := through_application_profiles_statement(models):
                role.add_to_principal_policy(through_profiles)
            if acknowledgments := model_acknowledgments(models):
                Validations.of(role).acknowledge(*acknowledgments)
        if "cursor_secret" in spec.uses:  # GetSecretValue only: CDK's grant_read adds DescribeSecret, never called
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="ReadCursorSecret",
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[self.cursor_secret.secret_arn],
                )
            )
