"""The stack with `-c mneme:search=domain`, deployed on the tier's doubles: the functions reach the managed
domain as `service=es`, every search request is judged by the caller's role and the domain's access policy,
and a memory remembered is recalled at once (writes wait for the refresh: no fresh window to bridge)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cloud.conftest import Cloud, deployed
from tests.cloud.deployment import AccessDenied
from tests.cloud.template import Function, Template
from tests.cloud.test_threads import without


@pytest.fixture(scope="module")
def domain_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    from tests.infra.synth import synthesize

    return Template(synthesize(tmp_path_factory.mktemp("cloud-domain"), {"mneme:search": "domain"}).raw)


@pytest.fixture
def on_domain(domain_template: Template, osmem: Any, local_model: Any) -> Iterator[Cloud]:
    with deployed(domain_template, osmem, local_model) as cloud:
        yield cloud


def test_remember_then_recall_through_the_domain_under_its_access_policy(
    on_domain: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = on_domain.operator_key("acme", "alice", "admin")
    item = {"items": [{"scope": "root", "content": "Pennine Joinery moved to the flat rate VAT scheme."}]}
    assert on_domain.api("POST", "/v1/remember", item, key=key).status == 201
    recalled = on_domain.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme"}, key=key)
    assert recalled.status == 200, str(recalled)
    assert "flat rate VAT" in str(recalled)
    calls = {i.function: i.calls for i in on_domain.deployment.invocations}
    assert not any(c.request.action.startswith("aoss:") for cs in calls.values() for c in cs)
    writes = {c.request.action for c in calls["remember"] if c.request.action.startswith("es:")}
    assert "es:ESHttpPost" in writes  # the _bulk write
    searches = [c for c in calls["recall"] if c.request.action == "es:ESHttpPost"]
    assert searches and all(c.request.resource.endswith("/mneme/_search") for c in searches), searches

    # the domain's access policy alone is not enough: without its role's grant, recall's search is refused
    without(on_domain.deployment, "recall", "es:ESHttpPost", monkeypatch)
    with pytest.raises(AccessDenied, match=r"es:ESHttpPost on arn:aws:es:.*:domain/mneme-dev/mneme/_search"):
        on_domain.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme"}, key=key)


def test_a_role_the_domain_policy_does_not_name_is_refused(on_domain: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    """The role's own grant is not enough either: the domain's access policy must name it."""
    deployment = on_domain.deployment
    principal = deployment.principal

    def unnamed(function: Function) -> Any:
        granted = principal(function)
        if function.name == "recall":
            granted.domain_policy = [s for s in granted.domain_policy if granted.role_arn not in s["Principal"]["AWS"]]
        return granted

    monkeypatch.setattr(deployment, "principal", unnamed)
    key = on_domain.operator_key("acme", "alice", "admin")
    item = {"items": [{"scope": "root", "content": "Pennine Joinery moved to the flat rate VAT scheme."}]}
    assert on_domain.api("POST", "/v1/remember", item, key=key).status == 201  # remember is still named
    with pytest.raises(AccessDenied, match="domain no statement allows it"):
        on_domain.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme"}, key=key)


def test_the_index_repair_schedule_runs_within_its_role_on_the_domain(on_domain: Cloud) -> None:
    key = on_domain.operator_key("acme", "alice", "admin")
    items = [{"scope": "root", "content": "Narwhal shipments need a signature."}]
    assert on_domain.api("POST", "/v1/remember", {"items": items}, key=key).status == 201
    tick = on_domain.fire_schedule("index-repair")
    assert tick.error is None, tick.error
    assert tick.calls and all(c.decision.allowed for c in tick.calls)
    assert not any(c.request.action.startswith("aoss:") for c in tick.calls)
