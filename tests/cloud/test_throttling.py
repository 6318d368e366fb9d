"""Throttling through the deployed API (infra/mneme_infra/throttling.py): the authorizer names each tenant's
throttle bucket, the stage's usage plans throttle each bucket, so a tenant that floods the API is refused
(429 `throttled`, in Mneme's error shape) while a tenant of another bucket is still served; a pinned tenant
keeps its own bucket beside a noisy neighbour; the stage's limit holds each method apart; the WAF rule, when
configured, is the one bound on the whole API."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from mneme.auth import UsageKeys
from tests.cloud.conftest import Cloud, deployed
from tests.cloud.template import Template

PINNED = "bigco"
API_REQUESTS_PER_MINUTE = 120


def usage_keys(cloud: Cloud) -> UsageKeys:
    environment = cloud.deployment.functions["authorizer"].environment
    pinned = frozenset(filter(None, environment.get("MNEME_THROTTLE__PINNED", "").split(",")))
    seed, buckets = environment["MNEME_THROTTLE__SEED"], int(environment["MNEME_THROTTLE__BUCKETS"])
    return UsageKeys(seed, buckets, pinned) if pinned else UsageKeys(seed, buckets)


def tenants_in(usage: UsageKeys, buckets: int, *, besides: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """One tenant in each of `buckets` distinct shared buckets, none of them in `besides`."""
    found: dict[int, str] = {}
    for n in count():
        bucket = usage.bucket(f"tenant-{n}")
        if bucket not in found and bucket not in besides:
            found[bucket] = f"tenant-{n}"
        if len(found) == buckets:
            return list(found.values())
    raise AssertionError("unreachable")


def frozen_clock(cloud: Cloud) -> list[float]:
    """Every request in the same instant until the test moves it: nothing refills meanwhile."""
    at = [0.0]
    cloud.gateway.clock = lambda: at[0]
    return at


@pytest.fixture(scope="module")
def throttled_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """The stack with a pinned tenant and the whole-API WAF rule."""
    from tests.infra.synth import synthesize

    context = {"mneme:pinned_tenants": PINNED, "mneme:api_requests_per_minute": str(API_REQUESTS_PER_MINUTE)}
    return Template(synthesize(Path(tmp_path_factory.mktemp("throttled")), context).raw)


@pytest.fixture
def throttled(throttled_template: Template, osmem: Any, local_model: Any) -> Iterator[Cloud]:
    with deployed(throttled_template, osmem, local_model) as cloud:
        yield cloud


def test_a_flooding_tenant_is_throttled_while_a_tenant_of_another_bucket_is_served(cloud: Cloud) -> None:
    # Given two tenants in different throttle buckets, and one that shares the first one's bucket
    usage = usage_keys(cloud)
    noisy_bucket = usage.bucket("acme")
    other = next(f"tenant-{n}" for n in count() if usage.bucket(f"tenant-{n}") != noisy_bucket)
    neighbour = next(f"tenant-{n}" for n in count() if usage.bucket(f"tenant-{n}") == noisy_bucket)
    noisy, quiet, shared = (cloud.operator_key(t, "agent", "reader") for t in ("acme", other, neighbour))
    (plan,) = cloud.gateway.plans
    at = frozen_clock(cloud)

    # When the noisy tenant sends its bucket's burst and one request more
    burst = [cloud.api("GET", "/v1/me", key=noisy) for _ in range(plan.burst_limit)]
    refused = cloud.api("GET", "/v1/me", key=noisy)

    # Then the burst was served and the next request refused by the gateway, in the error shape
    assert [r.status for r in burst] == [200] * plan.burst_limit
    assert refused.status == 429 and refused.function is None
    body = refused.json()
    assert body["error"]["code"] == "throttled" and body["error"]["details"]["request_id"]
    # the tenant of another bucket is still served; the tenant sharing the bucket shares the refusal
    served = cloud.api("GET", "/v1/me", key=quiet)
    assert served.status == 200, served
    assert served.json()["tenant"] == other
    assert cloud.api("GET", "/v1/me", key=shared).status == 429

    # And a second later the bucket has refilled at the plan's rate
    at[0] += 1.0
    again = [cloud.api("GET", "/v1/me", key=noisy).status for _ in range(int(plan.rate_limit) + 1)]
    assert again == [200] * int(plan.rate_limit) + [429]


def test_every_tenant_key_names_a_bucket_of_the_stages_usage_plan(cloud: Cloud) -> None:
    usage = usage_keys(cloud)
    (plan,) = cloud.gateway.plans
    assert plan.keys == {usage.value(b) for b in range(usage.buckets)}
    key = cloud.operator_key("acme", "alice", "admin")
    assert cloud.api("GET", "/v1/me", key=key).status == 200


def test_the_stage_limit_holds_each_method_apart_not_the_api(cloud: Cloud) -> None:
    """MethodSettings "/*" "*" (100 at once): three tenants within their buckets fill one method's burst;
    that method refuses the next request, another method still serves it."""
    usage = usage_keys(cloud)
    keys = [cloud.operator_key(t, "agent", "reader") for t in tenants_in(usage, 3)]
    frozen_clock(cloud)
    sent = [cloud.api("GET", "/v1/me", key=keys[n % 3]).status for n in range(100)]  # 34 + 33 + 33: each < 40
    assert sent == [200] * 100
    refused = cloud.api("GET", "/v1/me", key=keys[0])
    assert refused.status == 429 and refused.error_code == "throttled" and refused.function is None
    assert cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=keys[0]).status == 200


def test_a_pinned_tenant_is_throttled_apart_from_a_noisy_neighbour(throttled: Cloud) -> None:
    # Given the pinned tenant and a noisy one that the deployment's hash puts in the bucket it would share
    usage = usage_keys(throttled)
    assert usage.of(PINNED) == usage.pinned_value(PINNED)
    home = usage.bucket(PINNED)
    noisy_tenant, bystander = [t for t in (f"tenant-{n}" for n in range(400)) if usage.bucket(t) == home][:2]
    noisy, pinned, shared = (throttled.operator_key(t, "agent", "reader") for t in (noisy_tenant, PINNED, bystander))
    plan = next(p for p in throttled.gateway.plans if usage.pinned_value(PINNED) in p.keys)
    frozen_clock(throttled)

    # When the noisy tenant exhausts the shared bucket
    flood = [throttled.api("GET", "/v1/me", key=noisy).status for _ in range(plan.burst_limit + 1)]

    # Then it is refused, its unpinned neighbour with it, and the pinned tenant is served from its own bucket
    assert flood == [200] * plan.burst_limit + [429]
    assert throttled.api("GET", "/v1/me", key=shared).status == 429
    served = throttled.api("GET", "/v1/me", key=pinned)
    assert served.status == 200 and served.json()["tenant"] == PINNED
    # its own bucket holds its own burst, whatever the noisy tenant does
    own = [throttled.api("POST", "/v1/retrieve", {"path": "root"}, key=pinned).status for _ in range(plan.burst_limit)]
    assert own == [200] * (plan.burst_limit - 1) + [429]


def test_the_waf_rule_bounds_the_whole_api_across_tenants_and_methods(throttled: Cloud) -> None:
    usage = usage_keys(throttled)
    keys = [throttled.operator_key(t, "agent", "reader") for t in tenants_in(usage, 4, besides={usage.bucket(PINNED)})]
    at = frozen_clock(throttled)
    # Given the minute's allowance spent across four tenants and two methods, none at its own limit
    for n in range(API_REQUESTS_PER_MINUTE):
        response = (throttled.api("GET", "/v1/me", key=keys[n % 4]) if n % 2
                    else throttled.api("POST", "/v1/retrieve", {"path": "root"}, key=keys[n % 4]))  # fmt: skip
        assert response.status == 200, (n, response)
    # When anyone calls anything, even a public route
    for method, path in (("GET", "/v1/health"), ("POST", "/v1/recall")):
        refused = throttled.api(method, path, {"query": "x"} if method == "POST" else None, key=keys[0])
        # Then the web ACL answers 429 in Mneme's error shape, before API Gateway and any function
        assert refused.status == 429 and refused.error_code == "throttled" and refused.function is None
    # And once the window has passed, requests are served again
    at[0] += 61
    assert throttled.api("GET", "/v1/health").status == 200
