"""Deployment settings, validated once from CDK context keys prefixed `mneme:`.

Defaults suit a production stage: data is retained and protected. Override per invocation, e.g.
`npx cdk synth -c mneme:stage=alice -c mneme:removal_policy=destroy`. No setting needs AWS credentials.
"""

from __future__ import annotations

from typing import Annotated, Literal

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Node
from pydantic import BaseModel, ConfigDict, Field, field_validator

CONTEXT_PREFIX = "mneme:"

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
    authorizer_cache_seconds: Annotated[int, Field(ge=0, le=3600)] = 300

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, days: int) -> int:
        if days not in _RETENTION:
            raise ValueError(f"log_retention_days must be one of {sorted(_RETENTION)}")
        return days

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
    def removal(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.removal_policy == "retain" else RemovalPolicy.DESTROY

    @property
    def protect_data(self) -> bool:
        return self.removal_policy == "retain"

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION[self.log_retention_days]
