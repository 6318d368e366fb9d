"""AWS on loopback for Lambda functions run in their own processes (bench/cold_start.py,
tests/cloud/test_layer_only.py): moto's server (DynamoDB, Step Functions, Secrets Manager), an
OpenSearch-compatible server and a stdlib Bedrock runtime double, with the template's table, secret and
state machine created on them. A function's template environment resolves to these endpoints (`resolve`),
and the endpoint and credential variables point boto3 at them (`Loopback.variables`). No network.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REGION, ACCOUNT = "eu-west-1", "123456789012"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class BedrockDouble(BaseHTTPRequestHandler):
    """InvokeModel for Titan/Cohere-style embedding requests: a unit vector of the asked dimension."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        dimensions = int(body.get("dimensions") or 1024)
        texts = body.get("texts")
        vector = [1.0] + [0.0] * (dimensions - 1)
        answer = {"embeddings": {"float": [vector for _ in texts]}} if texts else {"embedding": vector}
        payload = json.dumps({**answer, "inputTextTokenCount": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def functions_of(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {handler, environment, memory, traced} for every function described `Mneme <name>`."""
    found = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Lambda::Function":
            props = resource["Properties"]
            name = props.get("Description", "").removeprefix("Mneme ")
            found[name] = {"handler": props["Handler"], "environment": props["Environment"]["Variables"],
                           "memory": props.get("MemorySize", 128), "traced": "TracingConfig" in props}  # fmt: skip
    return found


# What the authorizer's throttle seed derives from (infra/mneme_infra/throttling.py: the stack's UUID).
STACK_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/Mneme-bench/51af3dc0-da77-11e4-872e-1234567db123"


def resolve(value: Any, tokens: dict[str, str]) -> Any:
    """A template value with Ref / GetAtt / Join / Select / Split replaced by what the doubles answer to."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return tokens.get(value["Ref"], tokens["*"])
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return tokens.get(f"{logical}.{attribute}", tokens.get(attribute, tokens["*"]))
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        parts = resolve(parts, tokens) if isinstance(parts, dict) else parts  # a list, or Fn::Split's
        return str(separator).join(str(resolve(part, tokens)) for part in parts)
    if "Fn::Split" in value:
        separator, text = value["Fn::Split"]
        return str(resolve(text, tokens)).split(separator)
    if "Fn::Select" in value:
        index, items = value["Fn::Select"]
        return resolve(items, tokens)[int(index)]
    raise ValueError(f"cannot resolve {value}")


@dataclass(frozen=True)
class Loopback:
    """The started doubles: `tokens` resolve the template's references, `variables` point boto3 at them."""

    tokens: dict[str, str]
    moto_url: str
    bedrock_url: str

    @property
    def variables(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.moto_url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock_url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            **CREDENTIALS,
        }

    def environment(self, template_environment: dict[str, Any]) -> dict[str, str]:
        """A function's template environment, resolved, with the loopback variables."""
        return {k: resolve(v, self.tokens) for k, v in template_environment.items()} | self.variables


@contextmanager
def loopback_aws(template: dict[str, Any], search_url: str | None = None) -> Iterator[Loopback]:
    """moto server + the Bedrock double + OpenSearch (`search_url`, or an osmem-server started here)."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    moto_url = f"http://127.0.0.1:{moto._server.server_port}"  # type: ignore[union-attr]
    bedrock = ThreadingHTTPServer(("127.0.0.1", 0), BedrockDouble)
    threading.Thread(target=bedrock.serve_forever, daemon=True).start()
    search = None
    if search_url is None:
        import osmem_server

        search = osmem_server.OsmemServer.start(japanese=False)
        search_url = str(search.url)
    os.environ |= {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION}
    try:
        resources = template["Resources"]
        (table_id, table), *_ = [(k, r) for k, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"]
        props = table["Properties"]
        dynamodb = boto3.client("dynamodb", endpoint_url=moto_url, region_name=REGION)
        schema = {k: props[k] for k in ("KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes") if k in props}
        dynamodb.create_table(TableName="mneme-bench", BillingMode="PAY_PER_REQUEST", **schema)
        secret = boto3.client("secretsmanager", endpoint_url=moto_url, region_name=REGION).create_secret(
            Name="mneme-bench-cursor", SecretString="x" * 64
        )
        (machine_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::StepFunctions::StateMachine"]
        machine = boto3.client("stepfunctions", endpoint_url=moto_url, region_name=REGION).create_state_machine(
            name="mneme-bench",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/bench",
        )
        secret_id = next(k for k, r in resources.items() if r["Type"] == "AWS::SecretsManager::Secret")
        tokens = {
            "*": "unresolved",
            "AWS::Region": REGION,
            "AWS::StackId": STACK_ID,
            table_id: "mneme-bench",
            secret_id: secret["ARN"],
            machine_id: machine["stateMachineArn"],
            "CollectionEndpoint": search_url,
        }
        yield Loopback(tokens, moto_url, f"http://127.0.0.1:{bedrock.server_address[1]}")
    finally:
        if search is not None:
            search.close()
        bedrock.shutdown()
        moto.stop()


def seed(environment: dict[str, str], loopback: Loopback, tenant: str, principal: str) -> str:
    """An admin API key and the tenant's root scope in the table; returns the key's secret."""
    import boto3

    from mneme import bootstrap
    from mneme.adapters.dynamo_store import DynamoRecordStore
    from mneme.services.keys import KeyService
    from mneme.services.scopes import ScopeService

    client = boto3.client("dynamodb", endpoint_url=loopback.moto_url, region_name=REGION)
    store = DynamoRecordStore(environment["MNEME_STORE__TABLE_NAME"], client=client)
    clock = bootstrap.SystemClock()
    ScopeService(store, clock).root(tenant)
    secret, _ = KeyService(store, clock).create(tenant, principal, ["admin"])
    return secret


def rest_event(method: str, path: str, body: dict[str, Any] | None, authorizer: dict[str, Any]) -> dict[str, Any]:
    """API Gateway's proxy event for `method path`, with the authorizer's context (`principalId` included)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    return {
        "resource": path, "path": path, "httpMethod": method, "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()}, "queryStringParameters": None,
        "multiValueQueryStringParameters": None, "pathParameters": None, "stageVariables": None,
        "requestContext": {"resourcePath": path, "httpMethod": method, "path": f"/prod{path}", "stage": "prod",
                           "requestId": "loopback", "accountId": ACCOUNT, "apiId": "loopback",
                           "identity": {"sourceIp": "127.0.0.1"}, "authorizer": authorizer},
        "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False,
    }  # fmt: skip
