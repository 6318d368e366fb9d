"""The operator's `mneme reindex` (docs/deploy.md) on the deployed shape: the CLI in embedded mode with the
functions' settings (table, collection, embedding model), its calls judged against the permissions
docs/deploy.md tells operators to hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mneme import bootstrap, cli
from mneme.adapters.dynamo.codec import run_key
from mneme.adapters.dynamo.store import DynamoRecordStore
from tests.cloud import calls
from tests.cloud.conftest import Cloud
from tests.cloud.deployment import aws_client
from tests.cloud.iam import bedrock_model_arns
from tests.cloud.template import ACCOUNT, REGION
from tests.cloud.test_consolidation import execution_arn
from tests.support.legacy import forget_sessions

OPERATOR = f"arn:aws:iam::{ACCOUNT}:role/mneme-operator"


def operator(cloud: Cloud) -> calls.Principal:
    """docs/deploy.md 'Operators who rebuild the index': table reads and UpdateItem, aoss:APIAccessAll on the
    collection and a place in its data access policy (`mneme:search_operator_arns`)."""
    template = cloud.deployment.template
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{cloud.deployment.table_name}"
    (collection_id, collection), *_ = template.of_type("AWS::OpenSearchServerless::Collection").items()
    collection_arn, name = template.get_att(collection_id, "Arn"), collection["Properties"]["Name"]
    model = cloud.deployment.functions["curate"].environment["MNEME_EMBEDDER__MODEL_ID"]
    table_actions = ["dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"]
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": table_actions, "Resource": [table_arn, f"{table_arn}/index/*"]},
        {"Effect": "Allow", "Action": "aoss:APIAccessAll", "Resource": collection_arn},
        {"Effect": "Allow", "Action": "bedrock:InvokeModel", "Resource": bedrock_model_arns(model)},
    ]
    listed = {
        "Principal": [OPERATOR],
        "Rules": [{"ResourceType": "index", "Resource": [f"index/{name}/*"], "Permission": ["aoss:*"]}],
    }
    return calls.Principal("operator", OPERATOR, statements, collection_arn, name, [listed])


def reindex_as_operator(
    cloud: Cloud, tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[calls.Seen]]:
    """`mneme reindex --tenant` in embedded mode with the functions' settings, as the operator; (exit code,
    the AWS calls it made, each with the operator's verdict)."""
    settings = cloud.deployment.functions["curate"].environment
    for name, value in settings.items():
        if name.startswith("MNEME_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("MNEME_HOME", str(tmp_path / "operator"))
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setenv("MNEME_CONFIG", str(tmp_path / "empty.toml"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    bootstrap.reset()
    try:
        with calls.WATCH.running(operator(cloud)) as seen:
            code = cli.main(["reindex", "--tenant", tenant, "--quiet"])
    finally:
        bootstrap.reset()
    return code, seen


def test_the_operators_reindex_gives_older_turns_and_runs_their_keys_within_the_documented_permissions(
    cloud: Cloud, admin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cloud.api("POST", "/v1/scopes", {"path": "root.chat", "parents": True}, key=admin).status == 201
    turn = {"scope": "root.chat", "session_id": "call-3", "metadata": {"speaker": "Tobias"}}
    asked = {**turn, "content": "Which colour did you paint the hallway?", "occurred_at": "2025-05-01T10:00:00Z"}
    reply = {**turn, "content": "Sage green, and the trim white.", "occurred_at": "2025-05-01T10:01:00Z"}
    said = cloud.api("POST", "/v1/remember", asked, key=admin).json()["episode_id"]
    table_id, _ = cloud.deployment.template.one("AWS::DynamoDB::Table")
    table = DynamoRecordStore(cloud.deployment.template.ref(table_id), client=aws_client("dynamodb"))
    forget_sessions(table, "acme", [said])  # both as stored before GSI4 and GSI2 listed them
    assert cloud.api("POST", "/v1/remember", reply, key=admin).status == 201
    run_id = cloud.api("POST", "/v1/consolidate", {}, key=admin).json()["run_id"]
    # the run's last write (finish) lists it again: unlist it only once its execution has ended
    cloud.deployment.wait_for_execution(execution_arn(cloud, run_id))
    table.client.update_item(
        TableName=table.table_name, Key=run_key("acme", run_id), UpdateExpression="REMOVE GSI2PK, GSI2SK"
    )
    code, seen = reindex_as_operator(cloud, "acme", tmp_path, monkeypatch)
    out, err = capsys.readouterr()

    assert code == 0, err
    assert "added 1 episodes written before the session index to their sessions" in out
    assert "listed 1 older consolidation runs by start time" in out
    denied = [f"{c.operation}: {c.request.describe()}" for c in seen if not c.decision.allowed]
    assert seen and not denied, denied
    found = cloud.api("POST", "/v1/recall", {"query": "hallway paint", "scope": "root.chat"}, key=admin).json()
    assert {r["content"]: r["scores"]["bm25"] for r in found["results"]}.get(reply["content"], 0) > 0
