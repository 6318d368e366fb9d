"""docs/deploy.md 'Bring a stage back', on the deployed shape: a stage destroyed with the default `retain`
policy keeps its table and cursor secret; deployed again with `-c` context naming them, it imports both
(creates neither), so every key still works, a connector's change-feed cursor still reads, and after the
operator's `mneme reindex` recall finds what was remembered before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cloud.conftest import Cloud
from tests.cloud.deployment import aws_client
from tests.cloud.template import Template
from tests.cloud.test_operator import reindex_as_operator

BEFORE = "The boiler at the Harrow office was serviced by Hargreaves Heating on 3 March."
AFTER = "Hargreaves Heating will come back in September for the annual gas safety check."


def test_a_destroyed_stage_comes_back_on_its_retained_table_and_secret(
    cloud: Cloud, admin: str, osmem: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.infra.synth import synthesize

    # Given a stage in use: something remembered, a connector's position in the change feed
    assert cloud.api("POST", "/v1/remember", {"scope": "root", "content": BEFORE}, key=admin).status == 201
    cloud.later(seconds=10)  # past the feed's horizon
    feed = cloud.api("GET", "/v1/changes", key=admin, query={"limit": "100"}).json()
    assert BEFORE in [(c["record"] or {}).get("content") for c in feed["changes"]]
    table = cloud.deployment.table_name
    secret = cloud.deployment.functions["recall"].environment["MNEME_CURSOR_SECRET_ARN"]

    # When it is destroyed and deployed again with the retained table and secret named in its context
    template = Template(
        synthesize(tmp_path / "back", {"mneme:table_name": table, "mneme:cursor_secret_arn": secret}).raw,
        stack_uuid="0c9e2f6a-4b1d-4e8f-9a3c-5d7e8f901234",  # a new stack, a new stack id
    )
    assert not template.of_type("AWS::DynamoDB::Table") and not template.of_type("AWS::SecretsManager::Secret")
    collection = osmem.clone()  # the old collection went with the stack: the new one starts empty
    try:
        cloud.redeploy(template, collection.url)
        assert aws_client("dynamodb").describe_table(TableName=table)  # still there
        cloud.later(minutes=30)  # past the fresh tail: recall finds only what the index holds

        # Then the old key still works, and the connector's cursor still reads (the same signing key)
        assert cloud.api("POST", "/v1/remember", {"scope": "root", "content": AFTER}, key=admin).status == 201
        cloud.later(seconds=10)
        resumed = cloud.api("GET", "/v1/changes", key=admin, query={"cursor": feed["next_cursor"]})
        assert resumed.status == 200, resumed
        assert [(c["record"] or {}).get("content") for c in resumed.json()["changes"]] == [AFTER]
        # and the records are there, but the index is new: recall finds the old episode once it is rebuilt
        query = {"query": "who serviced the boiler at Harrow", "kinds": ["episode"]}
        before = cloud.api("POST", "/v1/recall", query, key=admin).json()
        assert BEFORE not in [r["content"] for r in before["results"]]
        code, seen = reindex_as_operator(cloud, "acme", tmp_path, monkeypatch)
        assert code == 0 and not [c for c in seen if not c.decision.allowed]
        after = cloud.api("POST", "/v1/recall", query, key=admin).json()
        assert BEFORE in [r["content"] for r in after["results"]]
    finally:
        collection.close()
