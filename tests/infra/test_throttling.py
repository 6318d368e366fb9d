"""Per-tenant throttling: a usage plan throttles each of a fixed set of API keys, the authorizer names a
tenant's key (`usageIdentifierKey`), and every authorized method requires one; the stage still bounds the API."""

from __future__ import annotations

import json

from infra.mneme_infra.config import InfraConfig
from mneme.auth import UsageKeys
from mneme.routes import PAGES, ROUTES
from tests.infra.synth import Synth
from tests.infra.test_synth import api_methods

STACK_RESOURCE_LIMIT = 500  # CloudFormation's resources per stack


def test_the_api_takes_usage_keys_from_the_authorizer_and_every_keyed_route_requires_one(default: Synth) -> None:
    ((_, api),) = default.of_type("AWS::ApiGateway::RestApi").items()
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    methods = api_methods(default)
    for route in ROUTES + PAGES:
        method = methods[(route.method, route.path)]
        # a public route has no authorizer to name a key: requiring one would answer 403 to everybody
        assert method.get("ApiKeyRequired", False) is (route.role is not None), (route.method, route.path)


def test_a_usage_plan_throttles_each_bucket_key_on_the_stage(default: Synth) -> None:
    config = InfraConfig()
    ((plan_id, plan),) = default.of_type("AWS::ApiGateway::UsagePlan").items()
    props = plan["Properties"]
    assert props["Throttle"] == {"RateLimit": config.tenant_rate_limit, "BurstLimit": config.tenant_burst_limit}
    ((stage_id, _),) = default.of_type("AWS::ApiGateway::Stage").items()
    assert [s["Stage"] for s in props["ApiStages"]] == [{"Ref": stage_id}]
    keys = default.of_type("AWS::ApiGateway::ApiKey")
    assert len(keys) == config.tenant_throttle_buckets == 16
    plan_keys = [k["Properties"] for k in default.of_type("AWS::ApiGateway::UsagePlanKey").values()]
    assert sorted(k["KeyId"]["Ref"] for k in plan_keys) == sorted(keys)
    assert all(k["UsagePlanId"] == {"Ref": plan_id} and k["KeyType"] == "API_KEY" for k in plan_keys)


def test_the_authorizer_derives_the_same_key_values_the_stack_creates(default: Synth) -> None:
    environment = default.function("authorizer")["Environment"]["Variables"]
    usage = UsageKeys(environment["MNEME_THROTTLE__SEED"], int(environment["MNEME_THROTTLE__BUCKETS"]))
    values = {k["Properties"]["Value"] for k in default.of_type("AWS::ApiGateway::ApiKey").values()}
    assert values == {usage.value(bucket) for bucket in range(usage.buckets)}
    assert all(20 <= len(v) <= 128 and v.isalnum() for v in values)  # API Gateway's rule for a key value
    # only the authorizer knows the buckets: no other function's environment carries them
    others = [f for f in default.function_ids() if f != "authorizer"]
    assert not any("MNEME_THROTTLE" in json.dumps(default.function(f)["Environment"]) for f in others)


def test_buckets_are_configurable_and_the_stack_stays_well_under_cloudformations_limit(
    default: Synth, variant: Synth
) -> None:
    assert len(variant.of_type("AWS::ApiGateway::ApiKey")) == 64  # the most mneme:tenant_throttle_buckets allows
    ((_, plan),) = variant.of_type("AWS::ApiGateway::UsagePlan").items()
    assert plan["Properties"]["Throttle"] == {"RateLimit": 5, "BurstLimit": 10}
    assert len(default.resources) < 0.6 * STACK_RESOURCE_LIMIT  # 236
    assert len(variant.resources) < 0.8 * STACK_RESOURCE_LIMIT  # 338, with every optional resource


def test_a_tenant_limit_above_the_stage_limit_is_refused() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="within the stage"):
        InfraConfig(tenant_rate_limit=100, throttle_rate_limit=50)
    with pytest.raises(ValidationError):
        InfraConfig(tenant_throttle_buckets=65)
