"""The REST API: one method per entry of the route table, integrated with the Lambda of its `function`.

A TOKEN authorizer (cached per key; its policy covers the whole API) guards every route with a role;
each function then checks the role against the same route table. Errors API Gateway answers itself
carry Mneme's error shape.

Throttling (throttling.py, docs/deploy.md 'Throttling'): the stage's default method throttle bounds each
method on its own, a usage plan bounds each tenant's bucket (its API key, named by the authorizer's
`usageIdentifierKey` with the API's key source set to AUTHORIZER: api-gateway-api-key-source.html,
api-gateway-lambda-authorizer-output.html), and an optional AWS WAF rule bounds the whole API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.throttling import ApiRateLimit, throttle_tenants
from mneme.http.routes import PAGES, ROUTES, Route

F = apigw.AccessLogField
ACCESS_LOG_FIELDS = {
    "requestId": F.context_request_id(),
    "requestTime": F.context_request_time(),
    "ip": F.context_identity_source_ip(),
    "httpMethod": F.context_http_method(),
    "resourcePath": F.context_resource_path(),
    "status": F.context_status(),
    "responseLength": F.context_response_length(),
    "latency": F.context_response_latency(),
    "integrationLatency": F.context_integration_latency(),
    "principal": F.context_authorizer_principal_id(),
    "authorizerError": F.context_authorizer_error(),
    "errorType": F.context_error_response_type(),
    "xrayTraceId": F.context_xray_trace_id(),
}
TOKEN_PATTERN = r"^[Bb]earer [A-Za-z0-9._~+/=-]+$"


@dataclass(frozen=True)
class GatewayError:
    """An error API Gateway answers without calling a function. status None keeps API Gateway's status;
    message None keeps its message. Templates substitute `$context` variables but run no VTL logic."""

    type: apigw.ResponseType
    status: str | None
    code: str
    message: str | None = None

    def template(self) -> str:
        message = json.dumps(self.message) if self.message else "$context.error.messageString"
        return ('{"error": {"code": "' + self.code + '", "message": ' + message
                + ', "details": {"request_id": "$context.requestId"}}}')  # fmt: skip


R = apigw.ResponseType
GATEWAY_ERRORS = (
    GatewayError(
        R.UNAUTHORIZED,
        "401",
        "unauthorized",
        "missing or unknown API key: send 'Authorization: Bearer <key>'",
    ),
    # A Deny from the authorizer always carries its reason (mneme.auth): unauthorized (an unknown key) or
    # key_revoked. 401, not API Gateway's default 403: the authorizer denies bad keys instead of raising
    # (a raise is a Lambda error, and the authorizer-errors alarm would page for every bad key).
    GatewayError(R.ACCESS_DENIED, "401", "$context.authorizer.reason", "unknown or revoked API key"),
    # API Gateway's answer to a path or method it does not know.
    GatewayError(R.MISSING_AUTHENTICATION_TOKEN, "404", "route_not_found", "no such route"),
    GatewayError(R.REQUEST_TOO_LARGE, "413", "payload_too_large"),
    GatewayError(R.THROTTLED, "429", "throttled"),
    GatewayError(R.DEFAULT_4_XX, None, "request_rejected"),
    GatewayError(R.DEFAULT_5_XX, None, "internal_error"),
)

API_ACKNOWLEDGMENTS = (
    Acknowledgment(
        id="AwsSolutions-COG4",
        reason="Callers are agents holding Mneme API keys (docs/architecture.md), checked by the TOKEN "
        "authorizer; there are no Cognito users.",
    ),
    Acknowledgment(
        id="AwsSolutions-APIG2",
        reason="Each function validates bodies and parameters against its pydantic models and answers in "
        "Mneme's error shape; a gateway model would duplicate that schema.",
    ),
    Acknowledgment(
        id="AwsSolutions-APIG6",
        reason="Execution logging needs the account-wide API Gateway CloudWatch role, which one stack "
        "must not own; access logs (with authorizer and integration errors) and X-Ray cover each request.",
    ),
)
WITHOUT_WAF = Acknowledgment(
    id="AwsSolutions-APIG3",
    reason="No WAFv2 web ACL unless mneme:api_requests_per_minute asks for one (billed monthly and per request); "
    "per-method and per-tenant throttling and the authorizer's token pattern bound abuse meanwhile.",
)


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        handlers: Mapping[str, lambda_.IFunction],
        authorizer: lambda_.Function,
        routes: Sequence[Route] = ROUTES + PAGES,
    ) -> None:
        super().__init__(scope, construct_id)
        access_log_options: dict[str, Any] = {}
        if config.api_access_logs:
            access_logs = logs.LogGroup(
                self, "AccessLogs", retention=config.log_retention, removal_policy=config.removal
            )
            access_log_options = {
                "access_log_destination": apigw.LogGroupLogDestination(access_logs),
                "access_log_format": apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
            }
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"mneme-{config.stage}",
            description="Mneme: long-term memory for AI agents",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,  # the tenant's bucket, never a client header
            # Access logging needs the account's API Gateway CloudWatch role: created only with access logs,
            # and retained on teardown because the account setting outlives this stack (docs/deploy.md).
            cloud_watch_role=config.api_access_logs,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN if config.api_access_logs else None,
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                # MethodSettings "/*" "*": API Gateway applies these to each method on its own (throttling.py)
                throttling_rate_limit=config.method_rate_limit,
                throttling_burst_limit=config.method_burst_limit,
                tracing_enabled=True,
                **access_log_options,
            ),
        )
        self.rest_api.node.try_remove_child("Endpoint")  # CDK's own URL output: the stack outputs ApiUrl
        token_authorizer = apigw.TokenAuthorizer(
            self,
            "Authorizer",
            handler=authorizer,
            results_cache_ttl=Duration.seconds(config.authorizer_cache_seconds),
            validation_regex=TOKEN_PATTERN,
        )
        integrations = {
            name: apigw.LambdaIntegration(handlers[name], allow_test_invoke=False)
            for name in dict.fromkeys(route.function for route in routes)
        }  # only the functions routes name: the others are invoked by Step Functions and the scheduler
        for route in routes:
            resource = self.rest_api.root.resource_for_path(route.path)
            if route.role is None:
                public = resource.add_method(
                    route.method, integrations[route.function], authorization_type=apigw.AuthorizationType.NONE
                )
                Validations.of(public).acknowledge(
                    Acknowledgment(
                        id="AwsSolutions-APIG4",
                        reason="Public by design (docs/architecture.md, docs/console.md): health and the console's "
                        "static files, which hold no data; every API call the console makes needs a key.",
                    )
                )
            else:
                resource.add_method(
                    route.method, integrations[route.function], authorizer=token_authorizer, api_key_required=True
                )
        throttle_tenants(self, config, self.rest_api, authorizer)
        if config.api_requests_per_minute is not None:
            ApiRateLimit(self, "RateLimit", stage=self.rest_api.deployment_stage,
                         requests_per_minute=config.api_requests_per_minute, name=f"mneme-{config.stage}")  # fmt: skip
        else:
            Validations.of(self.rest_api).acknowledge(WITHOUT_WAF)
        for error in GATEWAY_ERRORS:
            self.rest_api.add_gateway_response(
                f"Gateway{error.type.response_type}",
                type=error.type,
                status_code=error.status,
                templates={"application/json": error.template()},
            )
        Validations.of(self.rest_api).acknowledge(*API_ACKNOWLEDGMENTS)
        if not config.api_access_logs:
            Validations.of(self.rest_api).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-APIG1",
                    reason="Access logs are off by default (mneme:api_access_logs): they need the account-wide "
                    "API Gateway CloudWatch role; X-Ray traces and each function's JSON logs cover requests.",
                )
            )
        else:
            Validations.of(self.rest_api).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AmazonAPIGatewayPushToCloudWatchLogs]",
                    reason="The API Gateway account role is exactly the AWS-managed push-to-CloudWatch-Logs role.",
                )
            )
