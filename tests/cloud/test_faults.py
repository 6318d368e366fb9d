"""The four deployment faults the tier found (issue 11), each shown through the deployed shape."""

from __future__ import annotations

from mneme.settings import Settings
from tests.cloud.conftest import Cloud
from tests.cloud.template import Template


def test_every_function_reads_its_settings_from_its_template_environment(cloud: Cloud) -> None:
    """Fault 1: MNEME_EMBEDDER__DIMENSIONS is the text "1024" in the template; it must validate."""
    deployment = cloud.deployment
    for function in deployment.functions.values():
        with deployment._as(function):
            settings = Settings()
        assert settings.embedder.kind == "bedrock", function.name
        assert settings.embedder.dimensions == int(function.environment["MNEME_EMBEDDER__DIMENSIONS"])


def test_an_authenticated_route_answers_instead_of_500(cloud: Cloud, admin: str) -> None:
    """Fault 1, as a caller saw it: the authorizer raised on its settings, so every route but health was 500."""
    response = cloud.api("GET", "/v1/scopes", key=admin)
    assert response.status == 200, str(response)
    assert response.json()["scopes"][0]["path"] == "root"


def test_the_stage_needs_no_account_wide_logging_role(template: Template) -> None:
    """Fault 2: access logs need the account's API Gateway CloudWatch role, which a fresh account lacks.
    Either the stage has no access log setting, or the stack brings the role (AWS::ApiGateway::Account)."""
    stage = template.stage()
    accounts = template.of_type("AWS::ApiGateway::Account")
    if "AccessLogSetting" in stage:
        (account,) = accounts.values()
        role = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
        assert template.resources[role]["Type"] == "AWS::IAM::Role"
    else:
        assert not accounts  # nothing account-wide in a stack that does not need it


def test_no_function_reserves_concurrency(template: Template) -> None:
    """Fault 3: reserved concurrency fails the deploy on accounts whose concurrency quota is 10."""
    reserved = {
        name: f.properties["ReservedConcurrentExecutions"]
        for name, f in template.functions().items()
        if "ReservedConcurrentExecutions" in f.properties
    }
    assert reserved == {}


def test_a_new_tenants_first_call_may_be_a_read(cloud: Cloud) -> None:
    """Fault 4: a tenant whose first call is retrieve or recall got 503 forever (the read roles may not create
    the root). The tenant's root now exists with its first key; the read roles stay read-only."""
    reader = cloud.operator_key("globex", "agent", "reader")
    retrieved = cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=reader)
    assert retrieved.status == 200, str(retrieved)
    assert "<!-- scoped:" not in retrieved.body  # an empty bundle
    recalled = cloud.api("POST", "/v1/recall", {"query": "anything about invoices?"}, key=reader)
    assert recalled.status == 200, str(recalled)
    assert recalled.json()["results"] == []
    writes = [
        c
        for invocation in cloud.deployment.invocations
        if invocation.function in ("retrieve", "recall")
        for c in invocation.calls
        if c.request.action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
        and not c.request.context.get("dynamodb:LeadingKeys", ("",))[0].count("#DELIVERED#")
    ]
    assert writes == []
