"""Calls a function makes on threads of its own are judged against its role too: remember embeds on a
background thread while it prepares the write, recall searches the text on a pool thread while the query
is embedded. A role missing the permission such a call needs fails the request, as it would on AWS."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.cloud.conftest import Cloud
from tests.cloud.deployment import AccessDenied, Deployment
from tests.cloud.template import Function, as_list


def without(deployment: Deployment, function: str, action: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`function`'s role, for this test only, lacks every Allow statement granting `action`."""
    principal = deployment.principal

    def trimmed(candidate: Function) -> Any:
        granted = principal(candidate)
        if candidate.name == function:
            kept: Sequence[Mapping[str, Any]] = [
                s for s in granted.statements if s["Effect"] != "Allow" or action not in as_list(s["Action"])
            ]
            assert len(kept) < len(granted.statements), f"{function}'s role grants no {action}"
            granted.statements = kept
        return granted

    monkeypatch.setattr(deployment, "principal", trimmed)


def test_remember_embeds_on_its_own_thread_under_its_role(
    cloud: Cloud, admin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = {"items": [{"scope": "root", "content": "Pennine Joinery moved to the flat rate VAT scheme."}]}
    allowed = cloud.api("POST", "/v1/remember", item, key=admin)
    assert allowed.status == 201, str(allowed)
    (invocation,) = [i for i in cloud.deployment.invocations if i.function == "remember"]
    assert "bedrock:InvokeModel" in {c.request.action for c in invocation.calls}

    without(cloud.deployment, "remember", "bedrock:InvokeModel", monkeypatch)
    with pytest.raises(AccessDenied, match="bedrock:InvokeModel"):
        cloud.api("POST", "/v1/remember", item, key=admin)


def test_recall_searches_the_text_on_a_pool_thread_under_its_role(cloud: Cloud, admin: str) -> None:
    item = {"items": [{"scope": "root", "content": "Pennine Joinery moved to the flat rate VAT scheme."}]}
    assert cloud.api("POST", "/v1/remember", item, key=admin).status == 201
    recalled = cloud.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme"}, key=admin)
    assert recalled.status == 200, str(recalled)
    (invocation,) = [i for i in cloud.deployment.invocations if i.function == "recall"]
    searches = [c for c in invocation.calls if c.request.action == "aoss:ReadDocument"]
    assert len(searches) >= 2, [c.operation for c in invocation.calls]  # the vector search and the text search
