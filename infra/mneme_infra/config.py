"""Deployment settings, validated once from CDK context keys prefixed `mneme:`.

Defaults suit a production stage: data is retained and protected. Override per invocation, e.g.
`npx cdk synth -c mneme:stage=alice -c mneme:removal_policy=destroy`. No setting needs AWS credentials.
Model ids and the embedding dimension default to the application's own defaults (mneme.settings), so
the stack and a locally configured client agree unless both are changed.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Node
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.mneme_infra.workflow import max_batches_within_history
from mneme.consolidation.service import MAX_BATCHES_PER_SCOPE
from mneme.settings import BedrockEmbedderSettings, BedrockReasonerSettings

CONTEXT_PREFIX = "mneme:"
# A Bedrock model id, optionally behind a cross-region inference profile prefix (us., eu., global., ...).
MODEL_ID = r"^[a-z0-9-]+(\.[a-z0-9-]+)+(:[a-z0-9-]+)*$"
# An IAM role or user (or an assumed-role session's role) that may use the search collection's data plane.
PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
SCHEDULE = re.compile(r"^(rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)|cron\([^()]+\))$")
# Each bucket is two resources (an API key and its usage-plan key) of CloudFormation's 500 per stack, and
# one of the account's 10,000 API keys per region (API Gateway quotas, not adjustable).
MAX_THROTTLE_BUCKETS = 64
POLICY_NAME_MAX = 32  # an OpenSearch Serverless security or access policy name
_EMBEDDER = BedrockEmbedderSettings(kind="bedrock")
_REASONER = BedrockReasonerSettings(kind="bedrock")

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


class InfraConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")] = "dev"
    removal_policy: Literal["retain", "destroy"] = "retain"
    log_retention_days: int = 30
    table_encryption: Literal["aws_managed", "customer_managed"] = "aws_managed"
    throttle_rate_limit: Annotated[float, Field(gt=0)] = 50.0
    throttle_burst_limit: Annotated[int, Field(gt=0)] = 100
    # per tenant (api.py, docs/deploy.md 'Throttling'): a usage plan throttles each of `tenant_throttle_buckets`
    # API keys; the authorizer puts every tenant in one of them by a hash of its name
    tenant_rate_limit: Annotated[float, Field(gt=0)] = 20.0
    tenant_burst_limit: Annotated[int, Field(gt=0)] = 40
    tenant_throttle_buckets: Annotated[int, Field(ge=1, le=MAX_THROTTLE_BUCKETS)] = 16
    authorizer_cache_seconds: Annotated[int, Field(ge=0, le=3600)] = 300
    # REST API access logs need the account's API Gateway CloudWatch role (one per account and region). On:
    # the stack creates that role and sets it on the account (retained on teardown, since the setting is
    # account-wide). Off (default): no access logs, nothing account-wide; X-Ray and function logs remain.
    api_access_logs: bool = False
    # models (Bedrock): ids as Bedrock names them; the index dimension follows the embedder's
    embedding_model_id: Annotated[str, Field(pattern=MODEL_ID)] = _EMBEDDER.model_id
    embedding_dimensions: int = _EMBEDDER.dimensions  # one of BedrockEmbedderSettings' dimensions
    reasoner_model_id: Annotated[str, Field(pattern=MODEL_ID)] = _REASONER.model_id
    # search: `serverless` (default) an OpenSearch Serverless collection; `domain` a managed OpenSearch
    # Service domain of one `search_domain_instance_type` node for a small tenant (search_domain.py,
    # docs/deploy.md compares them)
    search: Literal["serverless", "domain"] = "serverless"
    search_domain_instance_type: Annotated[str, Field(pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")] = "t3.small.search"
    # Serverless: an OpenSearch Serverless collection named <base>-<standby s|n><key a|k> (`collection_name`);
    # the base defaults to mneme-<stage>
    search_collection_name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{2,23}$")] | None = None
    search_index_name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,79}$")] = "mneme"
    search_encryption: Literal["aws_owned", "customer_managed"] = "aws_owned"
    search_standby_replicas: bool = True  # False halves the idle OCUs: for disposable stages
    # operators: IAM roles/users added to the collection's data access policy with write access to the
    # index, so `mneme reindex` run with their credentials is not refused (docs/deploy.md)
    search_operator_arns: tuple[str, ...] = ()
    # index repair: sweep unindexed episodes on every tick (within a minute of a missed first write), and
    # compact duplicate documents on the ticks every `index_compact_every_minutes` (functions/repair.py)
    index_repair_schedule: str = "rate(1 minute)"
    index_compact_every_minutes: Annotated[int, Field(ge=1, le=1440)] = 30
    index_repair_enabled: bool = True
    # consolidation: the schedule and the state machine's fan-out
    consolidation_schedule: str = "rate(15 minutes)"
    consolidation_enabled: bool = True  # False creates the schedule disabled
    map_concurrency: Annotated[int, Field(ge=1, le=40)] = 4
    max_batches_per_scope: Annotated[int, Field(ge=1, le=max_batches_within_history())] = MAX_BATCHES_PER_SCOPE
    # alarms (the Locus operations chapter's starting thresholds; tune per environment)
    recall_p95_ms: Annotated[int, Field(ge=50, le=30_000)] = 2000
    validation_failure_percent: Annotated[float, Field(gt=0, le=100)] = 2.0
    consolidation_failure_percent: Annotated[float, Field(gt=0, le=100)] = 1.0
    alarm_email: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] | None = None

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, days: int) -> int:
        if days not in _RETENTION:
            raise ValueError(f"log_retention_days must be one of {sorted(_RETENTION)}")
        return days

    @field_validator("embedding_dimensions")
    @classmethod
    def _embedder_dimension(cls, dimensions: int) -> int:
        allowed = get_args(BedrockEmbedderSettings.model_fields["dimensions"].annotation)
        if dimensions not in allowed:
            raise ValueError(f"embedding_dimensions must be one of {allowed}")
        return dimensions

    @field_validator("consolidation_schedule", "index_repair_schedule")
    @classmethod
    def _schedule_expression(cls, expression: str) -> str:
        if not SCHEDULE.match(expression):
            raise ValueError("a schedule must be rate(<n> <unit>) or cron(<fields>)")
        return expression

    @field_validator("search_operator_arns", mode="before")
    @classmethod
    def _operator_arns(cls, value: object) -> object:
        """`-c mneme:search_operator_arns=arn1,arn2` gives a string; cdk.json may give a list."""
        arns = [a.strip() for a in value.split(",") if a.strip()] if isinstance(value, str) else value
        for arn in arns if isinstance(arns, list | tuple) else []:
            if not PRINCIPAL_ARN.match(str(arn)):
                raise ValueError(f"{arn!r} is not an IAM role or user ARN")
        return arns

    @model_validator(mode="after")
    def _tenant_within_stage(self) -> InfraConfig:
        if self.tenant_rate_limit > self.throttle_rate_limit or self.tenant_burst_limit > self.throttle_burst_limit:
            raise ValueError("a tenant's throttle (tenant_rate_limit, tenant_burst_limit) must be within the stage's")
        return self

    @model_validator(mode="after")
    def _collection_name_fits_its_policies(self) -> InfraConfig:
        # Security and access policy names are at most 32 characters (CloudFormation reference,
        # AWS::OpenSearchServerless::SecurityPolicy / AccessPolicy), and they are named <collection>-data.
        if len(f"{self.collection_name}-data") > POLICY_NAME_MAX:
            raise ValueError(
                f"collection name {self.collection_name!r} is too long for its policy names: set a shorter "
                f"search_collection_name (at most {POLICY_NAME_MAX - len('-data-sa')} characters)"
            )
        return self

    @classmethod
    def from_context(cls, node: Node) -> InfraConfig:
        """Every `mneme:<field>` context value (cdk.json or `-c`); an unknown field is an error."""
        context = node.get_all_context()
        return cls.model_validate(
            {
                key.removeprefix(CONTEXT_PREFIX): value
                for key, value in context.items()
                if key.startswith(CONTEXT_PREFIX)
            }
        )

    @property
    def collection_name(self) -> str:
        """The base name, then a letter for each setting the collection can only be created with.

        Name, Tags, StandbyReplicas and the encryption key are create-only (CloudFormation reference,
        AWS::OpenSearchServerless::Collection; "you can't change the encryption key for a collection after
        it's created", OpenSearch Serverless developer guide, serverless-encryption.html), and
        CloudFormation replaces a custom-named resource only under a new name. Changing
        `search_standby_replicas` or `search_encryption` therefore names a new, empty collection, which
        CloudFormation creates before deleting the old one; `mneme reindex` fills it (docs/deploy.md).
        """
        base = self.search_collection_name or f"mneme-{self.stage}"
        standby = "s" if self.search_standby_replicas else "n"
        key = "k" if self.search_encryption == "customer_managed" else "a"
        return f"{base}-{standby}{key}"

    @property
    def removal(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.removal_policy == "retain" else RemovalPolicy.DESTROY

    @property
    def protect_data(self) -> bool:
        return self.removal_policy == "retain"

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION[self.log_retention_days]
