"""A function's cold start loads what its requests use: numpy, the OpenSearch client and the consolidation
code cost 0.3-0.5 s of CPU to import, so only the functions (and requests) that embed, search or
consolidate load them (bootstrap.Services builds each service on first use)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mneme import bootstrap
from mneme.settings import Settings
from tests.support.embedding import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "opensearchpy", "mneme.consolidation")
# What each HTTP function may load when Lambda imports it: recall's request schema is its ranking's module
# (numpy vectors), and every recall embeds; none of them loads the rest before a request needs it.
AT_IMPORT = {"retrieve": (), "remember": (), "recall": ("numpy",), "consolidate": (), "curate": (), "records": ()}

# The environment infra/mneme_infra/functions.py gives every function in AWS.
LAMBDA_ENVIRONMENT = {
    "MNEME_STORE__KIND": "dynamodb", "MNEME_STORE__TABLE_NAME": "mneme", "MNEME_STORE__REGION": "eu-west-1",
    "MNEME_EMBEDDER__KIND": "bedrock", "MNEME_EMBEDDER__MODEL_ID": "amazon.titan-embed-text-v2:0",
    "MNEME_EMBEDDER__DIMENSIONS": "1024", "MNEME_INDEX__KIND": "opensearch", "MNEME_INDEX__SERVICE": "aoss",
    "MNEME_INDEX__ENDPOINT": "https://search.invalid", "MNEME_INDEX__INDEX_NAME": "mneme",
    "MNEME_CURSOR_SECRET": "x" * 64, "MNEME_HOME": "/tmp/mneme", "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1",
}  # fmt: skip

IMPORT = """
import importlib, json, sys
importlib.import_module("functions." + sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""

# A first request through API Gateway's event, against moto's DynamoDB; the tenant has its root scope.
FIRST_REQUEST = """
import json, sys
import boto3
from moto import mock_aws

from mneme.adapters.dynamo.table import create_table


class Context:
    function_name, memory_limit_in_mb, aws_request_id = "bench", 1024, "r-1"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:1:function:bench"


module, method, path, body = sys.argv[1:]
with mock_aws():
    create_table(boto3.client("dynamodb", region_name="eu-west-1"), "mneme")
    import importlib
    from mneme import bootstrap

    bootstrap.current().scopes.root("acme")
    handler = importlib.import_module("functions." + module).handler
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    context = {"resourcePath": path, "httpMethod": method, "path": path, "stage": "v1", "requestId": "r-1",
               "accountId": "1", "apiId": "api", "identity": {"sourceIp": "127.0.0.1"},
               "authorizer": {"tenant": "acme", "principal": "agent", "roles": "admin", "principalId": "acme/agent"}}
    answer = handler({"resource": path, "path": path, "httpMethod": method, "headers": headers,
                      "multiValueHeaders": {k: [v] for k, v in headers.items()}, "requestContext": context,
                      "body": body or None, "isBase64Encoded": False}, Context())
print(json.dumps({"status": answer["statusCode"], "body": json.loads(answer["body"]), "modules": sorted(sys.modules)}))
"""


def run(script: str, *args: str) -> dict[str, object] | list[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MNEME_", "AWS_"))}
    env |= LAMBDA_ENVIRONMENT | {"PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, object] | list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def heavy(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return sorted({name.split(".")[0] if name.startswith(HEAVY[:2]) else name for name in modules
                   if name.startswith(HEAVY)})  # fmt: skip


@pytest.mark.parametrize("function", sorted(AT_IMPORT))
def test_importing_an_http_function_loads_neither_numpy_nor_opensearch_nor_consolidation(function: str) -> None:
    # Lambda imports the handler's module at init: nothing there embeds, searches or consolidates
    assert heavy(run(IMPORT, function)) == list(AT_IMPORT[function])


@pytest.mark.parametrize(
    ("function", "method", "path", "body"),
    [("retrieve", "POST", "/v1/retrieve", '{"path": "root"}'), ("curate", "GET", "/v1/scopes", "")],
)
def test_a_request_that_reads_records_answers_without_numpy_opensearch_or_consolidation(
    function: str, method: str, path: str, body: str
) -> None:
    answer = run(FIRST_REQUEST, function, method, path, body)
    assert isinstance(answer, dict)
    assert answer["status"] == 200, answer["body"]
    assert heavy(answer["modules"]) == []


class SlowEmbedder:
    """Building the index reads the embedder's dimension: slow enough here for two threads to overlap."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()

    @property
    def dimension(self) -> int:
        time.sleep(0.2)
        return self.inner.dimension

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_services_built_on_first_use_are_one_instance_when_two_threads_ask_at_once(tmp_path: Path) -> None:
    # the local server answers on threads: both first requests must share one index (and its vector cache).
    # CPython 3.11's cached_property locks on its own; 3.12 (Lambda's, and a user's) does not: bootstrap.built does
    services = bootstrap.build(Settings(home=tmp_path), embedder=SlowEmbedder(), background=False)
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: services.index, range(2))
    assert first is second
    assert services.indexer.index is first


def test_build_all_builds_every_service_before_a_server_takes_requests(tmp_path: Path) -> None:
    services = bootstrap.build(Settings(home=tmp_path), embedder=HashEmbedder(), background=False)
    services.build_all()
    built = vars(services)
    assert {"store", "index", "indexer", "retrieval", "remember", "recall", "consolidation", "records"} <= set(built)
