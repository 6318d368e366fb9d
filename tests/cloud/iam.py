"""Every AWS call a function makes, as IAM sees it, judged against that function's role policy.

No maintained IAM policy evaluator exists on the package index (policyuniverse, parliament, cloudsplaining
and policy_sentry lint or expand policies; moto's `IAMPolicyStatement` treats an unmet condition as an
explicit deny, matches actions case-sensitively and knows only `StringEquals`), so this is a small one,
limited to what the template uses and loud about the rest:

- identity policies only (the role's statements); implicit deny; an explicit Deny wins;
- `Action` (case-insensitive) and `Resource` (case-sensitive) with `*` and `?` wildcards;
- `Condition` operators StringEquals, StringLike, ArnLike, ArnEquals, each optionally ForAllValues: or
  ForAnyValue:; context keys the caller supplies (here `dynamodb:LeadingKeys`); a key missing from the
  request fails a plain or ForAnyValue operator and passes ForAllValues (IAM's set semantics);
- `NotAction`, `NotResource`, `Principal` in an identity statement and any other operator raise: the
  evaluator has to learn them before the template may use them.

`calls_as_iam` turns a botocore call into the IAM requests it makes: action(s), resource ARN(s) and the
DynamoDB leading keys (TransactWriteItems is authorised per item action, as DynamoDB does).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tests.cloud.template import ACCOUNT, REGION, as_list

OPERATORS = {"StringEquals", "StringLike", "ArnLike", "ArnEquals"}
# The Bedrock operations and the IAM action each needs (Converse is authorised as InvokeModel).
BEDROCK_ACTIONS = {
    "InvokeModel": "bedrock:InvokeModel",
    "Converse": "bedrock:InvokeModel",
    "InvokeModelWithResponseStream": "bedrock:InvokeModelWithResponseStream",
    "ConverseStream": "bedrock:InvokeModelWithResponseStream",
}
SERVICE_PREFIX = {"stepfunctions": "states", "bedrock-runtime": "bedrock", "cloudwatch": "cloudwatch"}


@dataclass(frozen=True)
class Request:
    """One authorisation request: what IAM evaluates."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def describe(self) -> str:
        keys = "".join(f" {k}={list(v)}" for k, v in self.context.items())
        return f"{self.action} on {self.resource}{keys}"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    statement: int | None  # index of the allowing statement
    reason: str


def _like(pattern: str, value: str, *, case: bool = True) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, tuple[str, ...]]) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if base not in OPERATORS or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise NotImplementedError(f"condition operator {operator} is not supported by the tier's evaluator")
    patterns = [str(p) for p in as_list(expected)]
    like = base in ("StringLike", "ArnLike")

    def one(value: str) -> bool:
        return any(_like(p, value) if like else p == value for p in patterns)

    values = context.get(key)
    if values is None:
        return qualifier == "ForAllValues"  # an absent key: the empty set is a subset of anything
    if qualifier == "ForAllValues":
        return all(one(v) for v in values)
    if qualifier == "ForAnyValue":
        return any(one(v) for v in values)
    if len(values) != 1:
        raise NotImplementedError(f"{operator} on the multi-valued key {key}")
    return one(values[0])


def _matches(statement: Mapping[str, Any], request: Request) -> bool:
    for unsupported in ("NotAction", "NotResource", "Principal", "NotPrincipal"):
        if unsupported in statement:
            raise NotImplementedError(f"{unsupported} in an identity policy statement")
    if not any(_like(a, request.action, case=False) for a in as_list(statement["Action"])):
        return False
    if not any(_like(r, request.resource) for r in as_list(statement["Resource"])):
        return False
    for operator, keys in statement.get("Condition", {}).items():
        for key, expected in keys.items():
            if not _condition_holds(operator, key, expected, request.context):
                return False
    return True


def evaluate(statements: Sequence[Mapping[str, Any]], request: Request) -> Decision:
    allowing = None
    for i, statement in enumerate(statements):
        if _matches(statement, request):
            if statement["Effect"] == "Deny":
                return Decision(False, i, f"explicitly denied by statement {statement.get('Sid', i)}")
            allowing = i if allowing is None else allowing
    if allowing is None:
        return Decision(False, None, "no statement allows it (implicit deny)")
    return Decision(True, allowing, "allowed")


# -- botocore calls -> IAM requests ---------------------------------------------------------------
def _table_arn(table: str) -> str:
    return table if table.startswith("arn:") else f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


def _attribute(value: Mapping[str, Any]) -> str:
    ((_, v),) = value.items()
    return str(v)


_KEY_EQUALS = re.compile(r"^\s*\(?\s*([#\w]+)\s*=\s*(:\w+)")


def _query_leading_key(params: Mapping[str, Any], partition_key: str) -> list[str]:
    """The partition key value of a Query on the table (not on an index)."""
    if params.get("IndexName"):
        return []
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    for clause in re.split(r"\s+AND\s+", params.get("KeyConditionExpression", ""), flags=re.I):
        found = _KEY_EQUALS.match(clause)
        if found and names.get(found.group(1), found.group(1)) == partition_key:
            return [_attribute(values[found.group(2)])]
    return []


def dynamodb_requests(operation: str, params: Mapping[str, Any], partition_key: str = "PK") -> list[Request]:
    def leading(keys: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
        values = tuple(dict.fromkeys(_attribute(k[partition_key]) for k in keys if partition_key in k))
        return {"dynamodb:LeadingKeys": values} if values else {}

    if operation in ("TransactWriteItems", "TransactGetItems"):
        out = []
        kinds = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
            "Get": "GetItem",
        }
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            key = body.get("Item") or body.get("Key") or {}
            out.append(Request(f"dynamodb:{kinds[kind]}", _table_arn(body["TableName"]), leading([key])))
        return out
    if operation == "BatchWriteItem":
        return [
            Request(
                "dynamodb:BatchWriteItem",
                _table_arn(table),
                leading(w.get("PutRequest", {}).get("Item") or w.get("DeleteRequest", {}).get("Key") for w in writes),
            )
            for table, writes in params["RequestItems"].items()
        ]
    if operation == "BatchGetItem":
        return [
            Request("dynamodb:BatchGetItem", _table_arn(table), leading(spec["Keys"]))
            for table, spec in params["RequestItems"].items()
        ]
    resource = _table_arn(params["TableName"])
    if params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    if operation == "Query":
        keys = _query_leading_key(params, partition_key)
        return [Request("dynamodb:Query", resource, {"dynamodb:LeadingKeys": tuple(keys)} if keys else {})]
    key = params.get("Key") or params.get("Item")
    return [Request(f"dynamodb:{operation}", resource, leading([key]) if key else {})]


# An application inference profile routes to the model it was created from, which its ARN does not name;
# the tier's profiles route to this one.
PROFILE_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"


def bedrock_model_arns(model_id: str) -> list[str]:
    """A model id, an inference profile id or an ARN → the ARNs InvokeModel is authorised on."""
    return [request.resource for request in bedrock_requests("bedrock:InvokeModel", model_id)]


def bedrock_requests(action: str, model_id: str) -> list[Request]:
    """What Bedrock authorises a call to `model_id` on: the model, or the profile and the model it routes to
    (through an application profile, with the profile in the request's `bedrock:InferenceProfileArn`)."""
    from infra.mneme_infra.access import is_inference_profile

    kind, name = model_id.split(":", 5)[5].split("/", 1) if model_id.startswith("arn:") else (None, model_id)
    profile = name if kind == "inference-profile" or (kind is None and is_inference_profile(name)) else None
    if kind == "application-inference-profile":
        model = f"arn:aws:bedrock:{REGION}::foundation-model/{PROFILE_MODEL}"
        return [Request(action, model_id), Request(action, model, {"bedrock:InferenceProfileArn": (model_id,)})]
    if kind == "foundation-model":
        return [Request(action, model_id)]
    if profile is not None:
        return [
            Request(action, model_id if kind else f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model_id}"),
            Request(action, f"arn:aws:bedrock:{REGION}::foundation-model/{profile.split('.', 1)[1]}"),  # a region
        ]
    return [Request(action, f"arn:aws:bedrock:{REGION}::foundation-model/{model_id}")]


def requests_for(service: str, operation: str, params: Mapping[str, Any]) -> list[Request]:
    if service == "dynamodb":
        return dynamodb_requests(operation, params)
    if service == "bedrock-runtime":
        return bedrock_requests(BEDROCK_ACTIONS[operation], params["modelId"])
    if service == "secretsmanager" and "SecretId" in params:
        secret = params["SecretId"]
        arn = (
            secret if secret.startswith("arn:") else f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{secret}-??????"
        )
        return [Request(f"secretsmanager:{operation}", arn)]
    if service == "stepfunctions":
        if "stateMachineArn" in params:
            return [Request(f"states:{operation}", params["stateMachineArn"])]
        if "executionArn" in params:
            return [Request(f"states:{operation}", params["executionArn"])]
    if service == "sqs" and "QueueUrl" in params:
        path = urlparse(params["QueueUrl"]).path.strip("/").split("/")
        return [Request(f"sqs:{operation}", f"arn:aws:sqs:{REGION}:{path[0]}:{path[1]}")]
    if service == "lambda" and "FunctionName" in params:
        name = params["FunctionName"]
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        return [Request("lambda:InvokeFunction" if operation == "Invoke" else f"lambda:{operation}", arn)]
    return [Request(f"{SERVICE_PREFIX.get(service, service)}:{operation}", "*")]


# -- OpenSearch Serverless: the collection's API (IAM) and its data access policy ----------------------
def aoss_permission(method: str, path: str) -> str:
    """The data access permission an OpenSearch request needs (the index-level ones Mneme uses)."""
    parts = [p for p in path.split("/") if p]
    api = next((p for p in parts[1:] if p.startswith("_")), None)
    if api in ("_search", "_count", "_msearch", "_mget") or (api == "_doc" and method in ("GET", "HEAD")):
        return "aoss:ReadDocument"
    if api in ("_bulk", "_doc", "_update", "_create", "_delete_by_query", "_update_by_query"):
        return "aoss:WriteDocument"
    if api in ("_mapping", "_mappings", "_settings") and method in ("PUT", "POST"):
        return "aoss:UpdateIndex"
    if method == "PUT" and len(parts) == 1:
        return "aoss:CreateIndex"
    if method == "DELETE" and len(parts) == 1:
        return "aoss:DeleteIndex"
    return "aoss:DescribeIndex"


def data_access_allows(rules: Sequence[Mapping[str, Any]], role_arn: str, index: str, permission: str) -> bool:
    for policy in rules:
        if role_arn not in policy.get("Principal", []):
            continue
        for rule in policy["Rules"]:
            if rule["ResourceType"] != "index":
                continue
            if any(_like(r, index) for r in rule["Resource"]) and any(
                _like(p, permission, case=False) or p == "aoss:*" for p in rule["Permission"]
            ):
                return True
    return False
