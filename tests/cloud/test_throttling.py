"""Per-tenant throttling through the deployed API: the authorizer names each tenant's throttle bucket, the
stage's usage plan throttles each bucket, so a tenant that floods the API is refused (429 `throttled`, in
Mneme's error shape) while a tenant of another bucket is still served."""

from __future__ import annotations

from itertools import count

from mneme.auth import UsageKeys
from tests.cloud.conftest import Cloud


def usage_keys(cloud: Cloud) -> UsageKeys:
    environment = cloud.deployment.functions["authorizer"].environment
    return UsageKeys(environment["MNEME_THROTTLE__SEED"], int(environment["MNEME_THROTTLE__BUCKETS"]))


def test_a_flooding_tenant_is_throttled_while_a_tenant_of_another_bucket_is_served(cloud: Cloud) -> None:
    # Given two tenants in different throttle buckets, and one that shares the first one's bucket
    usage = usage_keys(cloud)
    noisy_bucket = usage.bucket("acme")
    other = next(f"tenant-{n}" for n in count() if usage.bucket(f"tenant-{n}") != noisy_bucket)
    neighbour = next(f"tenant-{n}" for n in count() if usage.bucket(f"tenant-{n}") == noisy_bucket)
    noisy, quiet, shared = (cloud.operator_key(t, "agent", "reader") for t in ("acme", other, neighbour))
    (plan,) = cloud.gateway.plans
    at = [0.0]
    cloud.gateway.clock = lambda: at[0]  # every request in the same instant: nothing refills meanwhile

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
