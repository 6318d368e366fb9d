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
from mneme.services.keys import NAME_RE
from mneme.settings import BedrockEmbedderSettings, BedrockReasonerSettings

CONTEXT_PREFIX = "mneme:"
# What Bedrock's InvokeModel and Converse take as `modelId` (access.py grants each kind): a model id,
# optionally behind a system inference profile prefix (us., eu., global., ...), or the ARN of a foundation
# model, of a system inference profile, or of an application inference profile (cost allocation per tenant
# or team; the model behind it is chosen when the profile is created, not named here).
MODEL_ID = (
    r"^([a-z0-9-]+(\.[a-z0-9-]+)+(:[a-z0-9-]+)*"
    r"|arn:aws[a-z-]*:bedrock:[a-z0-9-]+:(\d{12})?:"
    r"(foundation-model|inference-profile|application-inference-profile)/[A-Za-z0-9._:-]+)$"
)
# An IAM role or user (or an assumed-role session's role) that may use the search collection's data plane.
PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
KMS_KEY_ARN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$"
# A secret's complete ARN: its name, a hyphen and the six random characters Secrets Manager appends.
SECRET_ARN = r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$"
SCHEDULE = re.compile(r"^(rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)|cron\([^()]+\))$")
# Each bucket is two resources (an API key and its usage-plan key) of CloudFormation's 500 per stack, and
# one of the account's 10,000 API keys per region (API Gateway quotas, not adjustable).
MAX_THROTTLE_BUCKETS = 64
MAX_PINNED_TENANTS = 32  # each one an API key and its usage-plan key too (api.py)
# AWS WAF rate-based rules: at least 10 requests per evaluation window (AWS What's New, 2024-08-30)
WAF_MIN_REQUESTS = 10
RENAMED = {
    "throttle_rate_limit": "method_rate_limit",
    "throttle_burst_limit": "method_burst_limit",
}
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


class PinnedTenant(BaseModel):
    """A tenant with a throttle bucket of its own (api.py): `acme`, or `acme=100/200` for its own rate and
    burst instead of the tenant limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str
    rate_limit: Annotated[float, Field(gt=0)] | None = None
    burst_limit: Annotated[int, Field(gt=0)] | None = None

    @field_validator("tenant")
    @classmethod
    def _tenant_name(cls, tenant: str) -> str:
        if not NAME_RE.fullmatch(tenant):
            raise ValueError(f"{tenant!r} is not a tenant name (1-128 of A-Z a-z 0-9 . _ @ -)")
        return tenant

    @classmethod
    def parse(cls, value: object) -> object:
        """`acme` or `acme=100/200` (as `-c` passes it); anything else is validated as a mapping."""
        if not isinstance(value, str):
            return value
        tenant, _, limits = value.strip().partition("=")
        if not limits:
            return {"tenant": tenant}
        rate, _, burst = limits.partition("/")
        if not burst:
            raise ValueError(f"{value!r}: a pinned tenant's limits are <rate>/<burst>, e.g. acme=100/200")
        return {"tenant": tenant, "rate_limit": rate, "burst_limit": burst}


class InfraConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")] = "dev"
    removal_policy: Literal["retain", "destroy"] = "retain"
    log_retention_days: int = 30
    table_encryption: Literal["aws_managed", "customer_managed"] = "aws_managed"
    # per method (api.py, docs/deploy.md 'Throttling'): the stage's default method throttle, which API Gateway
    # applies to each method on its own (a token bucket of this size per method), not to the API as a whole
    method_rate_limit: Annotated[float, Field(gt=0)] = 50.0
    method_burst_limit: Annotated[int, Field(gt=0)] = 100
    # per tenant: a usage plan throttles each of `tenant_throttle_buckets` API keys; the authorizer puts every
    # tenant in one of them by a hash of the deployment's seed and its name, or a pinned tenant in its own
    tenant_rate_limit: Annotated[float, Field(gt=0)] = 20.0
    tenant_burst_limit: Annotated[int, Field(gt=0)] = 40
    tenant_throttle_buckets: Annotated[int, Field(ge=1, le=MAX_THROTTLE_BUCKETS)] = 16
    pinned_tenants: Annotated[tuple[PinnedTenant, ...], Field(max_length=MAX_PINNED_TENANTS)] = ()
    # the whole API: an AWS WAF web ACL on the stage whose rate-based rule counts every request together and
    # refuses (429) once more than this many arrived within the last minute; none by default (a web ACL is
    # billed monthly and per request: docs/deploy.md)
    api_requests_per_minute: Annotated[int, Field(ge=WAF_MIN_REQUESTS, le=2_000_000_000)] | None = None
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
    # a stage brought back after `cdk destroy` (docs/deploy.md 'Bring a stage back'): the retained table (and
    # its customer-managed key) and cursor secret, imported by name: the stack uses them and creates none
    table_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{3,255}$")] | None = None
    table_key_arn: Annotated[str, Field(pattern=KMS_KEY_ARN)] | None = None
    cursor_secret_arn: Annotated[str, Field(pattern=SECRET_ARN)] | None = None
    # assets without bytecode: the synth fails without a CPython 3.12 unless this is set (layer_bundling.py)
    source_only_assets: bool = False

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

    @field_validator("pinned_tenants", mode="before")
    @classmethod
    def _pinned(cls, value: object) -> object:
        """`-c mneme:pinned_tenants=acme,bigco=100/200` gives a string; cdk.json may give a list."""
        entries = [e for e in value.split(",") if e.strip()] if isinstance(value, str) else value
        if not isinstance(entries, list | tuple):
            return entries
        parsed = [PinnedTenant.parse(e) for e in entries]
        names = [p["tenant"] if isinstance(p, dict) else getattr(p, "tenant", p) for p in parsed]
        if len(set(names)) != len(names):
            raise ValueError("a tenant is pinned twice")
        return parsed

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, values: object) -> object:
        for old, new in RENAMED.items():
            if isinstance(values, dict) and old in values:
                raise ValueError(
                    f"mneme:{old} is now mneme:{new}: API Gateway applies a stage's limit to each method on its "
                    "own, not to the API (docs/deploy.md 'Throttling')"
                )
        return values

    @model_validator(mode="after")
    def _table_key_with_its_table(self) -> InfraConfig:
        if self.table_key_arn and not self.table_name:
            raise ValueError("table_key_arn names the key of an imported table: set table_name too")
        if self.table_name and (self.table_encryption == "customer_managed") != bool(self.table_key_arn):
            raise ValueError(
                "an imported table encrypted with a customer-managed key needs table_key_arn (and "
                "table_encryption=customer_managed); one with the AWS-managed key needs neither"
            )
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
