"""A scenario through the deployed functions with only what Lambda gives them to import: the code asset,
the locked layer's packages and the runtime's boto3 (tests/cloud/lambda_paths.py). Each invocation is a
fresh `python -I -S` process (no site-packages, no PYTHONPATH) with its function's template environment,
on AWS served from loopback (tests/support/loopback_aws.py). A dependency the lock misses fails here,
where the tier's other tests, which run in the development environment, would pass."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.cloud import lambda_paths
from tests.cloud.template import Template
from tests.support import loopback_aws

TENANT, PRINCIPAL = "acme", "agent"

CHILD = """
import importlib, json, sys, sysconfig, traceback
roots = json.loads(sys.argv[1])
sys.path[:0] = roots
module, attribute = sys.argv[2].rsplit(".", 1)


class Context:
    function_name, memory_limit_in_mb, aws_request_id = module, 1024, "layer-only"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:layer-only"

    def get_remaining_time_in_millis(self):
        return 30_000


try:
    result, error = getattr(importlib.import_module(module), attribute)(json.loads(sys.stdin.read()), Context()), None
except BaseException:
    result, error = None, traceback.format_exc()
allowed = tuple(roots) + (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
outside = sorted(f for f in files if f and not f.startswith(allowed))
print("\\nLAYER_ONLY " + json.dumps({"result": result, "error": error, "outside": outside}))
"""


def invoke(paths: lambda_paths.LambdaPaths, handler: str, environment: dict[str, str], event: Any) -> Any:
    """One cold invocation in its own isolated interpreter; returns the handler's answer."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CHILD, json.dumps(paths.import_path), handler],
        input=json.dumps(event), env=environment, capture_output=True, text=True, timeout=180, cwd=paths.code,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("LAYER_ONLY ")]
    assert lines, f"{handler} crashed:\n{done.stderr[-3000:]}"
    outcome = json.loads(lines[-1].removeprefix("LAYER_ONLY "))
    assert outcome["error"] is None, f"{handler} failed with only the layer importable:\n{outcome['error']}"
    assert not outcome["outside"], f"{handler} loaded modules from outside its import path: {outcome['outside']}"
    return outcome["result"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> lambda_paths.LambdaPaths:
    mismatches = lambda_paths.version_mismatches()
    if mismatches:
        pytest.fail("the development environment is not the locked layer: " + "; ".join(mismatches))
    return lambda_paths.build(tmp_path_factory.mktemp("lambda"))


def test_remember_recall_retrieve_with_only_the_layers_packages(
    paths: lambda_paths.LambdaPaths, template: Template, osmem: Any
) -> None:
    functions = loopback_aws.functions_of(template.raw)
    clone = osmem.clone()
    try:
        with loopback_aws.loopback_aws(template.raw, search_url=clone.url) as aws:
            env = {name: aws.environment(spec["environment"]) for name, spec in functions.items()}
            secret = loopback_aws.seed(env["authorizer"], aws, TENANT, PRINCIPAL)

            def call(name: str, event: Any) -> Any:
                return invoke(paths, functions[name]["handler"], env[name], event)

            # Given the authorizer's Allow for the tenant's key
            arn = "arn:aws:execute-api:eu-west-1:123456789012:api/dev/POST/v1/remember"
            allowed = call("authorizer", {"type": "TOKEN", "authorizationToken": f"Bearer {secret}", "methodArn": arn})
            assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
            context = {**allowed["context"], "principalId": allowed["principalId"]}

            def api(name: str, path: str, body: dict[str, Any]) -> Any:
                answer = call(name, loopback_aws.rest_event("POST", path, body, context))
                return answer["statusCode"], json.loads(answer["body"]) if answer["body"].startswith("{") else answer

            # When an episode is remembered and recalled, and a memory written and its scope retrieved
            content = "The quarterly VAT return for Acme is filed by Dana on the 5th."
            status, remembered = api("remember", "/v1/remember", {"items": [{"scope": "root", "content": content}]})
            assert status == 201, remembered
            (episode_id,) = remembered["episode_ids"]
            status, recalled = api("recall", "/v1/recall", {"query": "who files the VAT return"})
            assert status == 200, recalled
            memory = {"scope": "root", "key": "vat", "body": "Dana files the VAT return."}
            status, written = api("curate", "/v1/memories", memory)
            assert status == 201, written
            status, retrieved = api("retrieve", "/v1/retrieve", {"path": "root"})
    finally:
        clone.close()

    # Then each answered as in the development environment: the episode is recalled, the memory retrieved
    assert episode_id in [r["id"] for r in recalled["results"]], recalled
    assert status == 200, retrieved
    assert recalled["retrieval_path"] == "hybrid"  # the vector search ran (numpy, opensearch-py), no fallback
    assert "Dana files the VAT return." in retrieved["markdown"]
