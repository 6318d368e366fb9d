"""Throttling as AWS applies it (infra/mneme_infra/throttling.py): the stage's limit is per method and named so;
usage plans throttle each API key on its own, the authorizer names a tenant's key (`usageIdentifierKey`) from
a seed unique to the deployment, or a pinned tenant's own key; an optional WAF rule bounds the whole API."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from infra.mneme_infra.config import InfraConfig
from mneme.auth import UsageKeys
from mneme.http.routes import PAGES, ROUTES
from tests.cloud.template import Template
from tests.infra.synth import Synth
from tests.infra.test_synth import api_methods

STACK_RESOURCE_LIMIT = 500  # CloudFormation's resources per stack


def usage_keys(synth: Synth, stack_uuid: str) -> tuple[UsageKeys, set[str]]:
    """The authorizer's UsageKeys and the key values the stack creates, as one deployment resolves them."""
    template = Template(synth.raw, stack_uuid=stack_uuid)
    environment = template.functions()["authorizer"].environment
    pinned = frozenset(filter(None, environment.get("MNEME_THROTTLE__PINNED", "").split(",")))
    seed, buckets = environment["MNEME_THROTTLE__SEED"], int(environment["MNEME_THROTTLE__BUCKETS"])
    usage = UsageKeys(seed, buckets, pinned) if pinned else UsageKeys(seed, buckets)
    values = {template.resolve(k["Properties"]["Value"]) for k in synth.of_type("AWS::ApiGateway::ApiKey").values()}
    return usage, values


def test_the_api_takes_usage_keys_from_the_authorizer_and_every_keyed_route_requires_one(default: Synth) -> None:
    ((_, api),) = default.of_type("AWS::ApiGateway::RestApi").items()
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    methods = api_methods(default)
    for route in ROUTES + PAGES:
        method = methods[(route.method, route.path)]
        # a public route has no authorizer to name a key: requiring one would answer 403 to everybody
        assert method.get("ApiKeyRequired", False) is (route.role is not None), (route.method, route.path)


def test_the_stage_limit_is_named_for_what_api_gateway_applies_it_to_each_method(default: Synth) -> None:
    """MethodSettings "/*" "*" is the default of every method, each with a token bucket of its own."""
    config = InfraConfig()
    ((_, stage),) = default.of_type("AWS::ApiGateway::Stage").items()
    (default_method,) = [m for m in stage["Properties"]["MethodSettings"] if m["ResourcePath"] == "/*"]
    assert default_method["HttpMethod"] == "*"
    assert (default_method["ThrottlingRateLimit"], default_method["ThrottlingBurstLimit"]) == (
        config.method_rate_limit, config.method_burst_limit)  # fmt: skip
    # the old names said "the stage"; a context still using them is refused with the new name
    with pytest.raises(ValidationError, match=r"mneme:method_rate_limit.*each method"):
        InfraConfig.model_validate({"throttle_rate_limit": 50})


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


def test_the_authorizer_derives_the_key_values_the_stack_creates_from_a_seed_of_the_deployment(
    default: Synth,
) -> None:
    # Given the same template deployed twice (two stacks, two stack ids)
    first, first_values = usage_keys(default, "51af3dc0-da77-11e4-872e-1234567db123")
    second, second_values = usage_keys(default, "0c9e2f6a-4b1d-4e8f-9a3c-5d7e8f901234")
    # Then in each the authorizer names exactly the keys the stack made
    assert first_values == {first.value(b) for b in range(first.buckets)}
    assert second_values == {second.value(b) for b in range(second.buckets)}
    assert all(20 <= len(v) <= 128 and v.isalnum() for v in first_values)  # API Gateway's rule for a key value
    # and tenants are spread differently: two that share a bucket in one deployment are apart in the other
    tenants = [f"tenant-{n}" for n in range(200)]
    assert [first.bucket(t) for t in tenants] != [second.bucket(t) for t in tenants]
    pair = next((a, b) for a in tenants for b in tenants if a < b and first.bucket(a) == first.bucket(b)
                and second.bucket(a) != second.bucket(b))  # fmt: skip
    assert pair
    # only the authorizer knows the buckets: no other function's environment carries them
    others = [f for f in default.function_ids() if f != "authorizer"]
    assert not any("MNEME_THROTTLE" in json.dumps(default.function(f)["Environment"]) for f in others)


def test_a_pinned_tenant_has_a_key_of_its_own_with_the_tenant_limit_or_its_own(brought_back: Synth) -> None:
    from mneme.auth import pinned_digest

    usage, values = usage_keys(brought_back, "51af3dc0-da77-11e4-872e-1234567db123")
    assert usage.pinned == {pinned_digest("acme"), pinned_digest("bigco")}
    assert usage.of("acme") == usage.pinned_value("acme") != usage.value(usage.bucket("acme"))
    assert usage.of("someone-else") == usage.value(usage.bucket("someone-else"))
    assert values == {usage.value(b) for b in range(16)} | {usage.pinned_value("acme"), usage.pinned_value("bigco")}
    template = Template(brought_back.raw)
    plans = {(p.rate_limit, p.burst_limit): p.keys for p in template.usage_plans()}
    assert plans.keys() == {(20.0, 40), (100.0, 200)}
    assert usage.pinned_value("acme") in plans[(20.0, 40)] and plans[(100.0, 200)] == {usage.pinned_value("bigco")}
    # the tenants are named by digests: neither the template nor the authorizer's environment names them
    assert "bigco" not in json.dumps(brought_back.raw) and "acme" not in json.dumps(brought_back.raw)


def test_pinned_tenants_are_validated() -> None:
    assert InfraConfig.model_validate({"pinned_tenants": "acme, bigco=100/200"}).pinned_tenants[1].burst_limit == 200
    for bad in ("acme,acme", "acme=100", "no spaces allowed", "acme=fast/200"):
        with pytest.raises(ValidationError):
            InfraConfig.model_validate({"pinned_tenants": bad})
    with pytest.raises(ValidationError):
        InfraConfig.model_validate({"pinned_tenants": ",".join(f"t{n}" for n in range(33))})


def test_the_whole_api_is_bounded_only_with_the_waf_rule_on_the_stage(default: Synth, brought_back: Synth) -> None:
    assert not default.of_type("AWS::WAFv2::WebACL")
    assert "AwsSolutions-APIG3" in default.acknowledgments
    ((acl_id, acl),) = brought_back.of_type("AWS::WAFv2::WebACL").items()
    (rule,) = acl["Properties"]["Rules"]
    rate = rule["Statement"]["RateBasedStatement"]
    assert (rate["AggregateKeyType"], rate["Limit"], rate["EvaluationWindowSec"]) == ("CONSTANT", 6000, 60)
    assert rate["ScopeDownStatement"]["ByteMatchStatement"]["SearchString"] == "/"  # every path
    response = rule["Action"]["Block"]["CustomResponse"]
    body = acl["Properties"]["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert response["ResponseCode"] == 429 and json.loads(body["Content"])["error"]["code"] == "throttled"
    ((_, association),) = brought_back.of_type("AWS::WAFv2::WebACLAssociation").items()
    ((stage_id, _),) = brought_back.of_type("AWS::ApiGateway::Stage").items()
    assert association["Properties"]["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}
    assert {"Ref": stage_id} in association["Properties"]["ResourceArn"]["Fn::Join"][1]
    assert Template(brought_back.raw).rate_rules()[0].limit == 6000
    assert brought_back.violations == []


def test_the_ceilings_the_docs_size_from() -> None:
    from infra.mneme_infra.throttling import ceilings

    routes = ROUTES + PAGES
    public = sum(1 for route in routes if route.role is None)
    default = ceilings(InfraConfig(), routes)
    assert (default.per_method, default.keyed_methods, default.public_methods) == (50, len(routes) - public, public)
    assert default.authenticated == 16 * 20 and default.api is None and default.methods_summed == len(routes) * 50
    pinned = ceilings(InfraConfig.model_validate({"pinned_tenants": "acme,bigco=100/200",
                                                  "api_requests_per_minute": 6000}), routes)  # fmt: skip
    assert pinned.authenticated == 16 * 20 + 20 + 100 and pinned.api == 100


def test_buckets_are_configurable_and_the_stack_stays_well_under_cloudformations_limit(
    default: Synth, variant: Synth
) -> None:
    assert len(variant.of_type("AWS::ApiGateway::ApiKey")) == 64  # the most mneme:tenant_throttle_buckets allows
    ((_, plan),) = variant.of_type("AWS::ApiGateway::UsagePlan").items()
    assert plan["Properties"]["Throttle"] == {"RateLimit": 5, "BurstLimit": 10}
    assert len(default.resources) < 0.6 * STACK_RESOURCE_LIMIT  # 236
    assert len(variant.resources) < 0.8 * STACK_RESOURCE_LIMIT  # 338, with every optional resource
    with pytest.raises(ValidationError):
        InfraConfig(tenant_throttle_buckets=65)
