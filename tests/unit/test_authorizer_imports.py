"""The authorizer's cold start loads the key lookup only: no numpy, consolidation, OpenSearch, X-Ray SDK or record
models (the caller's identity has its own module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "numpy",
    "mneme.consolidation",
    "mneme.services.recall",
    "mneme.adapters.dynamo.store",
    "opensearchpy",
    "aws_xray_sdk",
    "mneme.models",
)  # fmt: skip  (mneme.models: every record model; mneme.identity suffices)

FIRST_REQUEST = """
import json, sys
import boto3
from moto import mock_aws


class Context:
    function_name, memory_limit_in_mb, aws_request_id = "authorizer", 512, "r-1"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:1:function:authorizer"


with mock_aws():
    boto3.client("dynamodb", region_name="eu-west-1").create_table(
        TableName="mneme", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("PK", "SK")],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
    )
    before = set(sys.modules)
    import functions.authorizer
    after_import = set(sys.modules)
    try:
        answer = functions.authorizer.handler({"type": "TOKEN", "authorizationToken": "Bearer mnk_unknown",
                                      "methodArn": "arn:aws:execute-api:eu-west-1:1:api/v1/POST/v1/recall"}, Context())
        outcome = [answer["policyDocument"]["Statement"][0]["Effect"], answer["context"]["reason"]]
    except Exception as e:
        outcome = str(e)
print(json.dumps({"import": sorted(after_import - before), "request": sorted(set(sys.modules) - before),
                  "outcome": outcome}))
"""


def test_authorizer_cold_start_imports_neither_numpy_nor_consolidation_nor_opensearch() -> None:
    # Given the authorizer's environment in AWS (a DynamoDB store), in a fresh interpreter
    env = {key: value for key, value in os.environ.items() if not key.startswith("MNEME_")}
    env |= {"PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}", "MNEME_STORE__KIND": "dynamodb",
            "MNEME_STORE__TABLE_NAME": "mneme", "MNEME_STORE__REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}  # fmt: skip
    # When it is imported and answers its first request (an unknown key, looked up in the table)
    done = subprocess.run([sys.executable, "-c", FIRST_REQUEST], env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    # Then the key was looked up and refused with a Deny (API Gateway's 401, see infra api.py), not an
    # exception: Lambda would count that as an error and the authorizer-errors alarm would page for a bad key
    assert loaded["outcome"] == ["Deny", "unauthorized"]
    assert "mneme.services.keys" in loaded["import"]
    assert not [m for m in loaded["request"] if m.startswith(HEAVY)]
