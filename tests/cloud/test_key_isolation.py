"""Only the function that serves /v1/keys may write API-key items: a writer role that leaks (remember,
records, consolidation...) cannot mint itself a key. Judged by the tier's IAM evaluator on each role."""

from __future__ import annotations

from typing import Any

from tests.cloud.iam import dynamodb_requests, evaluate
from tests.cloud.template import Template

KEY_ITEMS = ({"PK": {"S": "APIKEY#" + "ab" * 32}, "SK": {"S": "APIKEY"}},
             {"PK": {"S": "T#acme#APIKEYS"}, "SK": {"S": "KEY#k1"}})  # fmt: skip
EPISODE = {"PK": {"S": "T#acme#EPISODES"}, "SK": {"S": "EP#e1"}}


def allowed(template: Template, function: str, operation: str, params: dict[str, Any]) -> bool:
    statements = template.role_statements(template.functions()[function].role_id)
    return all(evaluate(statements, request).allowed for request in dynamodb_requests(operation, params))


def test_writer_roles_other_than_curate_cannot_write_api_key_items(template: Template) -> None:
    (table_id, _) = template.one("AWS::DynamoDB::Table")
    table = template.physical_name(table_id)
    writers = ("remember", "records", "consolidate", "consolidate-stages", "consolidate-schedule", "curate")
    for name in writers:
        assert allowed(template, name, "PutItem", {"TableName": table, "Item": EPISODE}), name
        for item in KEY_ITEMS:
            for operation, params in (
                ("PutItem", {"TableName": table, "Item": item}),
                ("UpdateItem", {"TableName": table, "Key": item}),
                ("DeleteItem", {"TableName": table, "Key": item}),
                ("BatchWriteItem", {"RequestItems": {table: [{"PutRequest": {"Item": EPISODE}},
                                                             {"PutRequest": {"Item": item}}]}}),
                ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": table, "Item": item}}]}),
            ):  # fmt: skip
                assert allowed(template, name, operation, params) is (name == "curate"), (name, operation, item)
