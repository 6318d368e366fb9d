"""What bounds the API's traffic, in the terms AWS applies it (docs/deploy.md 'Throttling').

- The stage's default method throttle (api.py, `MethodSettings "/*" "*"`): API Gateway applies it to each
  method on its own ("per-API, per-stage throttling limits are applied at the API method level"; API Gateway
  developer guide, api-gateway-request-throttling.html), so it bounds one method's traffic, never the API's.
- `throttle_tenants`: usage plans whose throttle API Gateway applies to each of their API keys on its own
  (keys of one plan do not share it). With the API's key source set to AUTHORIZER, the authorizer's Allow
  names the caller's key (`usageIdentifierKey`; mneme.auth.UsageKeys): a pinned tenant's own key, else one
  of `tenant_throttle_buckets` shared keys, chosen by a hash of the deployment's seed and the tenant. Every
  method with an authorizer requires a key, so the keys' limits summed bound all authenticated traffic.
- `ApiRateLimit` (`mneme:api_requests_per_minute`, off by default): an AWS WAF web ACL on the stage whose
  rate-based rule aggregates every request (`AggregateKeyType: CONSTANT`) over a 60-second window: the only
  bound on the whole API, public routes included. REST API Gateway has no API-wide throttle of its own.

Rather than one API key per tenant: no API Gateway call when a tenant is created (CreateApiKey is limited
to 5 a second per account, API keys to 10,000 per account and region), no key left behind when a tenant
goes, no control-plane permission on a data-plane role. A tenant that needs a bucket of its own is pinned
in the stack's context (`mneme:pinned_tenants`), reviewed and deployed like any other setting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from aws_cdk import Aws, Fn
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.mneme_infra.config import InfraConfig, PinnedTenant
from mneme.auth import pinned_digest
from mneme.http.routes import Route

# The stack's own UUID (the last part of its stack id), without hyphens: unique to a deployment, made by
# CloudFormation when the stack is created, so the bucket a tenant lands in differs between deployments.
DEPLOYMENT_SEED = Fn.join("", Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))))
WAF_WINDOW_SECONDS = 60  # of 60, 120, 300 or 600 (AWS::WAFv2::WebACL RateBasedStatement EvaluationWindowSec)
THROTTLED_BODY = json.dumps(
    {"error": {"code": "throttled", "message": "the API's request rate is over its limit: retry later"}}
)


def bucket_value(bucket: int) -> str:
    """mneme.auth.UsageKeys.value, as CloudFormation joins it from the deployment's seed."""
    return Fn.join("", ["mneme", DEPLOYMENT_SEED, f"b{bucket:02d}"])


def pinned_value(tenant: str) -> str:
    """mneme.auth.UsageKeys.pinned_value, likewise."""
    return Fn.join("", ["mneme", DEPLOYMENT_SEED, f"p{pinned_digest(tenant)}"])


@dataclass(frozen=True)
class Ceilings:
    """Requests a second each limit lets through at its steady rate (bursts aside)."""

    per_method: float  # any one method, every caller together
    keyed_methods: int  # methods behind the authorizer
    public_methods: int
    authenticated: float  # every authenticated method together: the keys' limits summed
    api: float | None  # the WAF rule's, averaged over its window; None without one

    @property
    def methods_summed(self) -> float:
        return self.per_method * (self.keyed_methods + self.public_methods)


def ceilings(config: InfraConfig, routes: Sequence[Route]) -> Ceilings:
    pinned = sum(p.rate_limit or config.tenant_rate_limit for p in config.pinned_tenants)
    keyed = sum(1 for route in routes if route.role is not None)
    authenticated = min(config.tenant_throttle_buckets * config.tenant_rate_limit + pinned,
                        keyed * config.method_rate_limit)  # fmt: skip
    per_minute = config.api_requests_per_minute
    return Ceilings(
        per_method=config.method_rate_limit,
        keyed_methods=keyed,
        public_methods=len(routes) - keyed,
        authenticated=authenticated,
        api=per_minute / WAF_WINDOW_SECONDS if per_minute is not None else None,
    )


def throttle_tenants(scope: Construct, config: InfraConfig, rest_api: apigw.RestApi,
                     authorizer: lambda_.Function) -> None:  # fmt: skip
    """The usage plans and their keys (in `scope`); the authorizer gets what it needs to name the same keys."""

    def plan(construct_id: str, rate: float, burst: int, description: str) -> apigw.UsagePlan:
        return rest_api.add_usage_plan(
            construct_id,
            description=description,
            throttle=apigw.ThrottleSettings(rate_limit=rate, burst_limit=burst),
            api_stages=[apigw.UsagePlanPerApiStage(api=rest_api, stage=rest_api.deployment_stage)],
        )

    def limits(pinned: PinnedTenant) -> tuple[float, int]:
        return (pinned.rate_limit or config.tenant_rate_limit, pinned.burst_limit or config.tenant_burst_limit)

    shared = plan("TenantThrottle", config.tenant_rate_limit, config.tenant_burst_limit,
                  "Per-tenant throttle: each API key a bucket of tenants (mneme.auth.UsageKeys)")  # fmt: skip
    for bucket in range(config.tenant_throttle_buckets):
        key = apigw.ApiKey(scope, f"ThrottleBucket{bucket}", value=bucket_value(bucket),
                           description="Mneme tenant throttle bucket")  # fmt: skip
        shared.add_api_key(key, override_logical_id=f"ThrottleBucket{bucket}UsagePlanKey")
    default = (config.tenant_rate_limit, config.tenant_burst_limit)
    for own, group in groupby(sorted(config.pinned_tenants, key=limits), key=limits):
        name = f"PinnedThrottle{own[0]:g}r{own[1]}b".replace(".", "p")  # named by its limits: stable ids
        target = shared if own == default else plan(name, *own, "Pinned tenants: one API key each")
        for pinned in group:
            digest = pinned_digest(pinned.tenant)
            key = apigw.ApiKey(scope, f"PinnedTenant{digest}", value=pinned_value(pinned.tenant),
                               description="Mneme pinned tenant's throttle bucket")  # fmt: skip
            target.add_api_key(key, override_logical_id=f"PinnedTenant{digest}UsagePlanKey")
    authorizer.add_environment("MNEME_THROTTLE__SEED", DEPLOYMENT_SEED)
    authorizer.add_environment("MNEME_THROTTLE__BUCKETS", str(config.tenant_throttle_buckets))
    if config.pinned_tenants:
        digests = sorted(pinned_digest(p.tenant) for p in config.pinned_tenants)
        authorizer.add_environment("MNEME_THROTTLE__PINNED", ",".join(digests))


class ApiRateLimit(Construct):
    """An AWS WAF web ACL on the stage: a rate-based rule over every request, answering 429 past its limit.

    `CONSTANT` aggregation counts all the requests its scope-down statement matches as one (the statement
    matches every path); the rule blocks matching requests while more than `limit` arrived in the last
    `WAF_WINDOW_SECONDS`. AWS WAF applies a block a little after the count passes the limit, so it is a
    bound on the average over the window, not on a burst: bursts stay with the method and tenant limits.
    """

    def __init__(self, scope: Construct, construct_id: str, *, stage: apigw.Stage, requests_per_minute: int,
                 name: str) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        every_path = wafv2.CfnWebACL.StatementProperty(
            byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
                field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(uri_path={}),
                positional_constraint="STARTS_WITH",
                search_string="/",
                text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")],
            )
        )
        rule = wafv2.CfnWebACL.RuleProperty(
            name="ApiRequestsPerMinute",
            priority=0,
            statement=wafv2.CfnWebACL.StatementProperty(
                rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                    aggregate_key_type="CONSTANT",
                    limit=requests_per_minute,
                    evaluation_window_sec=WAF_WINDOW_SECONDS,
                    scope_down_statement=every_path,
                )
            ),
            action=wafv2.CfnWebACL.RuleActionProperty(
                block=wafv2.CfnWebACL.BlockActionProperty(
                    custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                        response_code=429, custom_response_body_key="throttled"
                    )
                )
            ),
            visibility_config=_visibility(f"{name}-api-rate"),
        )
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            description="Mneme: the whole API request rate limit",  # no _ ( ) or quotes in a web ACL description
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            rules=[rule],
            custom_response_bodies={
                "throttled": wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON", content=THROTTLED_BODY
                )
            },
            visibility_config=_visibility(f"{name}-web-acl"),
        )
        wafv2.CfnWebACLAssociation(self, "Stage", resource_arn=stage.stage_arn, web_acl_arn=self.web_acl.attr_arn)


def _visibility(metric: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric, sampled_requests_enabled=True
    )
