"""The synthesized stack 'deployed' on loopback doubles, and its functions invoked the way Lambda does.

`Deployment.create` makes, inside moto, the resources the functions talk to, from their template
properties (the table with its key schema and indexes, the cursor secret with a generated value, the state
machine with its resolved definition), and points the collection endpoint at an osmem-server clone. A table
or secret the template imports by name (a stage brought back) is not created: it must already be there.
`destroy` is `cdk destroy`: what the template retains (DeletionPolicy Retain) stays, the rest goes.

`invoke(name, event)` runs a function in-process with exactly its template environment plus what the
Lambda runtime itself sets (region, credentials, function name and memory): the process environment is
replaced for the call (nothing from the developer's shell leaks in), `mneme.bootstrap` is reset before and
after (every invocation is a cold start), and every AWS call it makes is judged against its role
(`tests.cloud.calls`). An unhandled exception becomes Lambda's error payload, as a caller sees it.

Step Functions: moto executes the template's definition (`execute_state_machine`), its JSONata hook wired
to jsonata-python, and its Lambda task invocations routed to `invoke` after the state machine's role is
checked for `lambda:InvokeFunction`.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import string
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from mneme import bootstrap
from tests.cloud.calls import WATCH, Principal, Seen
from tests.cloud.iam import Request, evaluate
from tests.cloud.template import ACCOUNT, REGION, Function, Template

# What the Lambda runtime adds to a function's own variables (the reserved ones this code reads).
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "ASIATESTTESTTEST",
    "AWS_SECRET_ACCESS_KEY": "fake",
    "AWS_SESSION_TOKEN": "fake",
}
_INVOKE_LOCK = threading.RLock()  # one function at a time: the process environment is shared


def aws_client(service: str) -> Any:
    """A client for the tests' own calls, built while no function runs: building one reads the whole process
    environment, which an invocation on a state machine's thread replaces (a KeyError midway otherwise)."""
    with _INVOKE_LOCK:
        return boto3.client(service, region_name=REGION)


class AccessDenied(AssertionError):
    pass


class TaskFailure(Exception):
    """A scripted function error: Lambda's unhandled-error payload (errorType becomes the state's Error)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.payload = {"errorType": error_type, "errorMessage": message, "stackTrace": []}


@dataclass
class LambdaContext:
    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/mneme"
    log_stream_name: str = "tier"
    timeout_seconds: int = 30  # the function's Timeout (the invocation is taken to start now)

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_seconds * 1000


@dataclass
class Invocation:
    function: str
    payload: Any
    error: dict[str, Any] | None
    calls: list[Seen]

    @property
    def denied(self) -> list[Seen]:
        return [c for c in self.calls if not c.decision.allowed]


@dataclass
class Deployment:
    template: Template
    functions: dict[str, Function]
    osmem_url: str
    invocations: list[Invocation] = field(default_factory=list)
    strict: bool = True  # a denied call fails the invocation (AccessDenied) after it returns
    # Step Functions' Lambda tasks answered by a script instead of the function (workflow-only tests):
    # it returns the payload, or raises TaskFailure for a function error.
    task_script: Callable[[dict[str, Any]], Any] | None = None

    @classmethod
    def create(cls, template: Template, osmem_url: str) -> Deployment:
        base = template
        dynamodb = aws_client("dynamodb")
        for table_id, resource in base.of_type("AWS::DynamoDB::Table").items():
            table = resource["Properties"]
            dynamodb.create_table(
                TableName=base.ref(table_id),
                BillingMode=table.get("BillingMode", "PAY_PER_REQUEST"),
                AttributeDefinitions=table["AttributeDefinitions"],
                KeySchema=table["KeySchema"],
                **(
                    {"GlobalSecondaryIndexes": table["GlobalSecondaryIndexes"]}
                    if table.get("GlobalSecondaryIndexes")
                    else {}
                ),
            )
        overrides: dict[Any, str] = {}
        secrets_client = aws_client("secretsmanager")
        for lid, secret in base.of_type("AWS::SecretsManager::Secret").items():
            generate = secret["Properties"].get("GenerateSecretString", {})
            alphabet = string.ascii_letters + string.digits
            value = "".join(secrets.choice(alphabet) for _ in range(generate.get("PasswordLength", 32)))
            created = secrets_client.create_secret(Name=base.physical_name(lid), SecretString=value)
            overrides[lid] = created["ARN"]
        for collection_id in base.of_type("AWS::OpenSearchServerless::Collection"):
            overrides[(collection_id, "CollectionEndpoint")] = osmem_url
        template = base.with_overrides(overrides)
        deployment = cls(template, template.functions(), osmem_url)
        for _lid, sqs in template.of_type("AWS::SQS::Queue").items():
            aws_client("sqs").create_queue(QueueName=template.physical_name(_lid))
            del sqs
        machine_id, machine = template.state_machine()
        aws_client("stepfunctions").create_state_machine(
            name=template.physical_name(machine_id),
            definition=json.dumps(machine["Definition"]),
            roleArn=machine["RoleArn"],
            type=machine.get("StateMachineType", "STANDARD"),
        )
        return deployment

    @property
    def table_name(self) -> str:
        """The table the functions use: the stack's own, or the one it imported by name."""
        return self.functions["curate"].environment["MNEME_STORE__TABLE_NAME"]

    def destroy(self) -> None:
        """`cdk destroy`: every resource the tier made goes, but those the template retains."""
        template = self.template

        def goes(logical_id: str) -> bool:
            return template.resources[logical_id].get("DeletionPolicy", "Delete") != "Retain"

        machine_id, _ = template.state_machine()
        if goes(machine_id):
            aws_client("stepfunctions").delete_state_machine(stateMachineArn=self.state_machine_arn())
        sqs = aws_client("sqs")
        for queue_id in filter(goes, template.of_type("AWS::SQS::Queue")):
            sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=template.physical_name(queue_id))["QueueUrl"])
        for secret_id in filter(goes, template.of_type("AWS::SecretsManager::Secret")):
            aws_client("secretsmanager").delete_secret(
                SecretId=template.ref(secret_id), ForceDeleteWithoutRecovery=True
            )
        for table_id in filter(goes, template.of_type("AWS::DynamoDB::Table")):
            aws_client("dynamodb").delete_table(TableName=template.ref(table_id))

    # -- invoking functions ---------------------------------------------------------------------
    def principal(self, function: Function) -> Principal:
        role_arn = self.template.get_att(function.role_id, "Arn")
        statements = self.template.role_statements(function.role_id)
        for domain_id in self.template.of_type("AWS::OpenSearchService::Domain"):  # mneme:search=domain
            return Principal(
                function=function.name,
                role_arn=role_arn,
                statements=statements,
                domain_arn=self.template.get_att(domain_id, "Arn"),
                domain_policy=self.template.domain_access_policy(),
            )
        (collection_id, collection), *_ = self.template.of_type("AWS::OpenSearchServerless::Collection").items()
        return Principal(
            function=function.name,
            role_arn=role_arn,
            statements=statements,
            collection_arn=self.template.get_att(collection_id, "Arn"),
            collection_name=collection["Properties"]["Name"],
            data_rules=self.template.data_access_rules(),
        )

    def environment(self, function: Function) -> dict[str, str]:
        # A domain's endpoint is https://<DomainEndpoint>; the tier's OpenSearch double serves plain HTTP.
        domain = (
            {"MNEME_INDEX__ENDPOINT": self.osmem_url}
            if function.environment.get("MNEME_INDEX__SERVICE") == "es"
            else {}
        )
        return {
            **function.environment,
            **domain,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            **FAKE_CREDENTIALS,
            "AWS_LAMBDA_FUNCTION_NAME": function.physical_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
            "TZ": ":UTC",
        }

    @contextmanager
    def _as(self, function: Function) -> Iterator[list[Seen]]:
        with _INVOKE_LOCK:
            saved = dict(os.environ)
            os.environ.clear()
            os.environ.update(self.environment(function))
            bootstrap.reset()
            try:
                with WATCH.running(self.principal(function)) as calls:
                    yield calls
            finally:
                bootstrap.reset()
                os.environ.clear()
                os.environ.update(saved)

    def invoke(self, name: str, event: Any) -> Invocation:
        """Run function `name` on `event`; returns its payload or Lambda's error payload."""
        function = self.functions[name]
        module_name, attribute = function.handler.rsplit(".", 1)
        context = LambdaContext(
            function.physical_name,
            self.template.get_att(function.logical_id, "Arn"),
            function.memory_mb,
            timeout_seconds=int(function.properties.get("Timeout", 3)),
        )
        with self._as(function) as calls:
            try:
                handler = getattr(importlib.import_module(module_name), attribute)
                payload, error = handler(json.loads(json.dumps(event)), context), None
                payload = json.loads(json.dumps(payload))  # what Lambda serialises
            except Exception as e:
                payload = None
                error = {
                    "errorMessage": str(e),
                    "errorType": type(e).__name__,
                    "requestId": context.aws_request_id,
                    "stackTrace": traceback.format_tb(e.__traceback__)[-3:],
                }
        invocation = Invocation(name, payload, error, calls)
        self.invocations.append(invocation)
        if self.strict and invocation.denied:
            raise AccessDenied(
                f"{name}: the role would deny "
                + "; ".join(f"{c.operation}: {c.request.describe()} ({c.decision.reason})" for c in invocation.denied)
            )
        return invocation

    def check_invoke_permission(self, role_id: str, function: Function, caller: str) -> None:
        """A service (the state machine, the scheduler) invoking a function: may its role do that?"""
        request = Request("lambda:InvokeFunction", self.template.get_att(function.logical_id, "Arn"))
        decision = evaluate(self.template.role_statements(role_id), request)
        WATCH.seen.append(Seen(caller, "lambda", "Invoke", request, decision))
        if not decision.allowed:
            raise AccessDenied(f"{caller} may not invoke {function.name}: {decision.reason}")

    # -- the schedule -----------------------------------------------------------------------------
    def fire_schedule(self, function_name: str) -> Invocation:
        """One tick of the schedule that targets `function_name`: its input, through its role."""
        (target,) = [
            s["Target"]
            for s in self.template.schedules()
            if self.template.function_by_arn(s["Target"]["Arn"]).name == function_name
        ]
        function = self.template.function_by_arn(target["Arn"])
        role_id = self._role_id(target["RoleArn"])
        self.check_invoke_permission(role_id, function, "schedule")
        return self.invoke_async(function.name, json.loads(target.get("Input", "{}")))

    def invoke_async(self, name: str, event: Any) -> Invocation:
        """Lambda's asynchronous invoke (the Scheduler's): the function's EventInvokeConfig retries, then
        its on-failure destination (an SQS queue, sent with the function's own role). The last attempt."""
        function = self.functions[name]
        configs = [
            c["Properties"]
            for c in self.template.of_type("AWS::Lambda::EventInvokeConfig").values()
            if c["Properties"]["FunctionName"] == {"Ref": function.logical_id}
        ]
        config = configs[0] if configs else {}
        attempts = 1 + int(config.get("MaximumRetryAttempts", 2))
        for _ in range(attempts):
            invocation = self.invoke(name, event)
            if invocation.error is None:
                return invocation
        destination = self.template.resolve(config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"))
        if destination:
            record = {
                "version": "1.0",
                "requestContext": {
                    "functionArn": self.template.get_att(function.logical_id, "Arn") + ":$LATEST",
                    "condition": "RetriesExhausted",
                    "approximateInvokeCount": attempts,
                },
                "requestPayload": event,
                "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
                "responsePayload": invocation.error,
            }
            request = Request("sqs:SendMessage", destination)
            decision = evaluate(self.template.role_statements(function.role_id), request)
            WATCH.seen.append(Seen(name, "lambda-destination", "SendMessage", request, decision))
            if not decision.allowed:
                raise AccessDenied(f"{name}'s role may not send to its failure destination: {decision.reason}")
            sqs = aws_client("sqs")
            url = sqs.get_queue_url(QueueName=destination.rsplit(":", 1)[1])["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
        return invocation

    def _role_id(self, arn: str) -> str:
        for lid in self.template.of_type("AWS::IAM::Role"):
            if self.template.get_att(lid, "Arn") == arn:
                return lid
        raise KeyError(arn)

    # -- Step Functions ---------------------------------------------------------------------------
    def state_machine_arn(self) -> str:
        machine_id, _ = self.template.state_machine()
        return str(self.template.ref(machine_id))

    def invoke_from_state_machine(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """moto's Lambda task call, answered in-process (the shape `lambda.invoke` returns)."""
        function = self.template.function_by_arn(parameters["FunctionName"])
        _, machine = self.template.state_machine()
        self.check_invoke_permission(self._role_id(machine["RoleArn"]), function, "state-machine")
        payload = parameters.get("Payload")
        event = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
        if self.task_script is not None:
            try:
                return {"StatusCode": 200, "Payload": self.task_script(event)}
            except TaskFailure as e:
                return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": e.payload}
        invocation = self.invoke(function.name, event)
        if invocation.error is not None:
            return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": invocation.error}
        return {"StatusCode": 200, "ExecutedVersion": "$LATEST", "Payload": invocation.payload}

    def wait_for_execution(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        client = aws_client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = client.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                return dict(described)
            if time.monotonic() > deadline:
                raise AssertionError(f"execution {execution_arn} still running after {timeout} s")
            time.sleep(0.05)

    def executions(self) -> list[dict[str, Any]]:
        client = aws_client("stepfunctions")
        try:
            return list(client.list_executions(stateMachineArn=self.state_machine_arn())["executions"])
        except client.exceptions.StateMachineDoesNotExist:  # a test removed it
            return []


def account_and_region() -> tuple[str, str]:
    return ACCOUNT, REGION
