"""The record store: one DynamoDB table whose keys and indexes come from the adapter's TABLE_SCHEMA.

Or, with `mneme:table_name`, a table that already exists (a stage brought back on the table its destroyed
stack retained: docs/deploy.md 'Bring a stage back'): imported by name, so the stack grants access to it
and never creates, changes or deletes it.

TTL on `expires_at` (the adapter's EXPIRES_AT): only the short-lived marks of a recent forgetting carry it
(recall reads them while the search index may still show the forgotten record). No stream: a failed
index write is retried by the indexer's sweep, not by a stream consumer. Add one here when the adapter
starts to rely on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aws_cdk import Acknowledgment, CfnElement, Duration, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk.aws_dynamodb import Attribute
from constructs import Construct

from infra.mneme_infra.config import InfraConfig
from mneme.adapters.dynamo_store import EXPIRES_AT, TABLE_SCHEMA

_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _keys(schema: Mapping[str, Any], key_schema: list[dict[str, str]]) -> tuple[Attribute, Attribute | None]:
    """(partition key, sort key or None) of a key schema, typed from the attribute definitions."""
    types = {d["AttributeName"]: _TYPES[d["AttributeType"]] for d in schema["AttributeDefinitions"]}
    by_role = {k["KeyType"]: Attribute(name=k["AttributeName"], type=types[k["AttributeName"]]) for k in key_schema}
    return by_role["HASH"], by_role.get("RANGE")


class Storage(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        schema: Mapping[str, Any] = TABLE_SCHEMA,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table: dynamodb.ITable
        if config.table_name is not None:
            self.table = dynamodb.Table.from_table_attributes(
                self,
                "Table",
                table_name=config.table_name,
                encryption_key=kms.Key.from_key_arn(self, "TableKey", config.table_key_arn)
                if config.table_key_arn
                else None,
                global_indexes=[index["IndexName"] for index in schema.get("GlobalSecondaryIndexes", [])],
            )
            if schema.get("GlobalSecondaryIndexes"):
                self._acknowledge_index_grants(f"arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:"
                                               f"table/{config.table_name}")  # fmt: skip
            return
        self.table = self._create(config, schema)

    def _create(self, config: InfraConfig, schema: Mapping[str, Any]) -> dynamodb.Table:
        partition_key, sort_key = _keys(schema, schema["KeySchema"])
        key, encryption = None, dynamodb.TableEncryption.AWS_MANAGED
        if config.table_encryption == "customer_managed":
            key = kms.Key(self, "TableKey", description="Mneme records", enable_key_rotation=True,
                          removal_policy=config.removal, pending_window=Duration.days(30))  # fmt: skip
            encryption = dynamodb.TableEncryption.CUSTOMER_MANAGED
        table = dynamodb.Table(
            self,
            "Table",
            partition_key=partition_key,
            sort_key=sort_key,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=encryption,
            encryption_key=key,
            deletion_protection=config.protect_data,
            removal_policy=config.removal,
            time_to_live_attribute=EXPIRES_AT,
        )
        for index in schema.get("GlobalSecondaryIndexes", []):
            index_partition, index_sort = _keys(schema, index["KeySchema"])
            projection = index.get("Projection", {"ProjectionType": "ALL"})
            table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=index_partition,
                sort_key=index_sort,
                projection_type=dynamodb.ProjectionType[projection["ProjectionType"]],
                non_key_attributes=projection.get("NonKeyAttributes"),
            )
        if schema.get("GlobalSecondaryIndexes"):
            stack = Stack.of(self)
            logical_id = stack.resolve(stack.get_logical_id(cast(CfnElement, table.node.default_child)))
            self._acknowledge_index_grants(f"<{logical_id}.Arn>")
        return table

    def _acknowledge_index_grants(self, table_arn: str) -> None:
        """`grant_*` on an indexed table also allows `<table arn>/index/*`: this table's indexes only."""
        Validations.of(Stack.of(self)).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{table_arn}/index/*]",
                reason="Grants on the table also cover its own GSIs (TABLE_SCHEMA), which serve its queries.",
            )
        )
