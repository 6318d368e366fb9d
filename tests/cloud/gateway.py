"""API Gateway (REST, Lambda proxy) as the template configures it: methods, TOKEN authorizer, gateway responses.

A request is matched against the template's resources and methods (unknown path or method: the
MISSING_AUTHENTICATION_TOKEN response). A method with an authorizer takes its identity source header,
checks the authorizer's validation expression (a miss, or no header: UNAUTHORIZED without invoking the
authorizer), then invokes the authorizer function with a TOKEN event, or reuses its cached answer for the
same token within `AuthorizerResultTtlInSeconds`. `Exception("Unauthorized")` from the authorizer is a 401,
any other failure AUTHORIZER_FAILURE (500); the returned policy is evaluated for `execute-api:Invoke` on the
method ARN (Deny or no match: ACCESS_DENIED, 403). On Allow, the proxy event's
`requestContext.authorizer` carries `principalId` and the context values as strings. A method that
requires an API key takes it from the authorizer's `usageIdentifierKey` (key source AUTHORIZER) or the
`X-API-Key` header; a key in no usage plan of the stage is INVALID_API_KEY (403), and each key's requests
pass a token bucket of its plan's rate and burst (THROTTLED, 429) on the gateway's `clock` (seconds;
real time unless a test sets it). The stage's method settings throttle each method with a token bucket of
its own (API Gateway applies a stage's default method throttle per method), before the authorizer runs.
A web ACL on the stage (AWS WAF) is applied first: its CONSTANT rate-based rules count every request in
their window, blocked ones included, and block past their limit with the rule's custom response. A
function error or malformed answer is a 502. Gateway responses render the template's own
`ResponseTemplates`, substituting the `$context` variables API Gateway substitutes.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.cloud.deployment import Deployment
from tests.cloud.iam import Request, evaluate
from tests.cloud.template import ACCOUNT, REGION, Method

API_ID = "tierapi123"
# API Gateway's status and message for each response type the tier can produce.
DEFAULTS = {
    "UNAUTHORIZED": (401, "Unauthorized"),
    "ACCESS_DENIED": (403, "User is not authorized to access this resource with an explicit deny"),
    "MISSING_AUTHENTICATION_TOKEN": (403, "Missing Authentication Token"),
    "REQUEST_TOO_LARGE": (413, "Request Too Long"),
    "INVALID_API_KEY": (403, "Forbidden"),
    "THROTTLED": (429, "Too Many Requests"),
    "AUTHORIZER_FAILURE": (500, "Internal server error"),
    "BAD_GATEWAY": (502, "Internal server error"),
    "INTEGRATION_FAILURE": (500, "Internal server error"),
}
MAX_PAYLOAD = 10 * 1024 * 1024  # API Gateway's request payload (apigateway/latest/developerguide/limits.html)
# Lambda's synchronous invoke payload (lambda/latest/dg/API_Invoke.html: 6 MB): the proxy event, the body
# escaped once more inside it. A larger event is refused before the function runs, and API Gateway answers
# the caller with an error of its own, not the function's (docs/deploy.md 'Request sizes').
MAX_EVENT = 6 * 1024 * 1024


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str
    function: str | None = None  # the integrated function, None when the gateway answered itself
    failure: dict[str, Any] | None = None  # the function error behind a 5xx the gateway answered

    def __str__(self) -> str:
        return f"{self.status} {self.body[:2000]}" + (f"\n  function error: {self.failure}" if self.failure else "")

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error_code(self) -> str | None:
        try:
            return str(self.json()["error"]["code"])
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class Gateway:
    deployment: Deployment
    cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    now: float = 0.0  # seconds; advance it to expire cached authorizer results
    clock: Callable[[], float] = time.monotonic  # seconds, for the usage plans' token buckets
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # bucket -> (tokens, at)
    counted: list[float] = field(default_factory=list)  # when each request reached the web ACL

    def __post_init__(self) -> None:
        template = self.deployment.template
        self.methods = template.methods()
        self.responses = template.gateway_responses()
        stage = template.stage()
        self.stage = stage["StageName"]
        self.method_settings = {
            (m["ResourcePath"], m["HttpMethod"]): (float(m["ThrottlingRateLimit"]), int(m["ThrottlingBurstLimit"]))
            for m in stage.get("MethodSettings", [])
            if "ThrottlingRateLimit" in m
        }
        self.key_source = template.api_key_source()
        self.plans = [plan for plan in template.usage_plans() if self.stage in plan.stages]
        self.rate_rules = template.rate_rules()

    # -- routing ---------------------------------------------------------------------------------
    def _match(self, method: str, path: str) -> tuple[Method, dict[str, str]] | None:
        for candidate in self.methods:
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(candidate.path)) + "$"
            found = re.match(pattern, path)
            if found and candidate.http_method == method:
                return candidate, found.groupdict()
        return None

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        body: str | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Response:
        request_id = str(uuid.uuid4())
        headers = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body)
            headers.setdefault("Content-Type", "application/json")
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        matched = self._route(method, path, body, request_id)
        if isinstance(matched, Response):
            return matched
        route, path_params = matched
        method_arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/{self.stage}/{method}{path}"
        authorizer_context, usage_key = None, None
        if route.authorizer_id is not None:
            outcome = self._authorize(route.authorizer_id, headers, method_arn, request_id)
            if isinstance(outcome, Response):
                return outcome
            authorizer_context, usage_key = outcome
        if route.api_key_required:
            if self.key_source == "HEADER":
                usage_key = next((v for k, v in headers.items() if k.lower() == "x-api-key"), None)
            refused = self._admit_key(usage_key, request_id, authorizer_context)
            if refused is not None:
                return refused
        event = self._proxy_event(
            route, method, path, path_params, headers, query, body, request_id, authorizer_context
        )
        assert route.function is not None, f"{method} {route.path} has no Lambda integration"
        if len(json.dumps(event).encode()) > MAX_EVENT:
            return self._gateway("INTEGRATION_FAILURE", request_id, failure={"lambda": "RequestEntityTooLarge"})
        invocation = self.deployment.invoke(route.function, event)
        answer = invocation.payload
        if invocation.error is not None or not isinstance(answer, dict) or "statusCode" not in answer:
            return self._gateway("BAD_GATEWAY", request_id, failure=invocation.error or {"payload": answer})
        out_headers = {k: str(v) for k, v in (answer.get("headers") or {}).items()}
        for name, values in (answer.get("multiValueHeaders") or {}).items():
            out_headers[name] = ",".join(str(v) for v in values)
        text = answer.get("body") or ""
        if answer.get("isBase64Encoded"):
            text = base64.b64decode(text).decode()
        return Response(int(answer["statusCode"]), out_headers, text, route.function)

    def _route(
        self, method: str, path: str, body: str | None, request_id: str
    ) -> tuple[Method, dict[str, str]] | Response:
        """What happens before the authorizer: the web ACL, the payload limit, the route, its method limit."""
        blocked = self._web_acl()
        if blocked is not None:
            return blocked
        if body is not None and len(body.encode()) > MAX_PAYLOAD:
            return self._gateway("REQUEST_TOO_LARGE", request_id)
        matched = self._match(method, path)
        if matched is None:
            return self._gateway("MISSING_AUTHENTICATION_TOKEN", request_id)
        if not self._method_admits(matched[0]):
            return self._gateway("THROTTLED", request_id)
        return matched

    # -- the authorizer --------------------------------------------------------------------------
    def _authorize(
        self, authorizer_id: str, headers: Mapping[str, str], method_arn: str, request_id: str
    ) -> tuple[dict[str, Any], str | None] | Response:
        """(the context the function sees, the answer's usageIdentifierKey), or the gateway's refusal."""
        config = self.deployment.template.authorizer(authorizer_id)
        assert config["Type"] == "TOKEN", config["Type"]
        header = config["IdentitySource"].removeprefix("method.request.header.")
        token = next((v for k, v in headers.items() if k.lower() == header.lower()), None)
        if not token or not re.match(config.get("IdentityValidationExpression", ".*"), token):
            return self._gateway("UNAUTHORIZED", request_id)
        ttl = int(config.get("AuthorizerResultTtlInSeconds", 300))
        cached = self.cache.get(token)
        if cached is not None and ttl > 0 and self.now - cached[0] < ttl:
            answer = cached[1]
        else:
            event = {"type": "TOKEN", "authorizationToken": token, "methodArn": method_arn}
            invocation = self.deployment.invoke(config["function"], event)
            if invocation.error is not None:
                kind = "UNAUTHORIZED" if invocation.error["errorMessage"] == "Unauthorized" else "AUTHORIZER_FAILURE"
                return self._gateway(kind, request_id, failure=invocation.error)
            answer = invocation.payload
            if ttl > 0:
                self.cache[token] = (self.now, answer)
        context = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (answer.get("context") or {}).items()
        }
        statements = answer["policyDocument"]["Statement"]
        decision = evaluate(statements, Request("execute-api:Invoke", method_arn))
        if not decision.allowed:
            return self._gateway("ACCESS_DENIED", request_id, context)
        return {**context, "principalId": answer["principalId"]}, answer.get("usageIdentifierKey")

    # -- throttling ------------------------------------------------------------------------------
    def _web_acl(self) -> Response | None:
        """The stage's web ACL: None when its rate rules let the request through, else the rule's response."""
        if not self.rate_rules:
            return None
        now = self.clock()
        self.counted.append(now)
        for rule in self.rate_rules:
            if sum(1 for at in self.counted if now - at < rule.window_seconds) > rule.limit:
                return Response(rule.status, {"Content-Type": "application/json"}, rule.body)
        return None

    def _method_admits(self, route: Method) -> bool:
        """The stage's method settings: the method's own entry, else the stage default `/*` `*`, each a bucket
        per method (a resource path in method settings is escaped: `/` as `~1`)."""
        escaped = "/" + route.path.lstrip("/").replace("/", "~1")
        limits = self.method_settings.get((escaped, route.http_method)) or self.method_settings.get(("/*", "*"))
        if limits is None:
            return True
        return self._take_token(f"method {route.http_method} {route.path}", *limits)

    def _admit_key(self, key: str | None, request_id: str, authorizer: Mapping[str, str] | None) -> Response | None:
        """None when the key's plan lets the request through now; else the gateway's refusal."""
        plan = next((p for p in self.plans if key is not None and key in p.keys), None)
        if key is None or plan is None:
            return self._gateway("INVALID_API_KEY", request_id, authorizer)
        admitted = self._take_token(f"key {key}", plan.rate_limit, plan.burst_limit)
        return None if admitted else self._gateway("THROTTLED", request_id, authorizer)

    def _take_token(self, bucket: str, rate_limit: float, burst_limit: int) -> bool:
        """A token bucket: `burst_limit` tokens at most, refilled at `rate_limit` a second."""
        now = self.clock()
        tokens, at = self.buckets.get(bucket, (float(burst_limit), now))
        tokens = min(float(burst_limit), tokens + (now - at) * rate_limit)
        if tokens < 1:
            self.buckets[bucket] = (tokens, now)
            return False
        self.buckets[bucket] = (tokens - 1, now)
        return True

    def flush_authorizer_cache(self) -> None:
        self.cache.clear()

    # -- events and answers ----------------------------------------------------------------------
    def _proxy_event(
        self,
        route: Method,
        method: str,
        path: str,
        path_params: dict[str, str],
        headers: dict[str, str],
        query: Mapping[str, str] | None,
        body: str | None,
        request_id: str,
        authorizer: dict[str, Any] | None,
    ) -> dict[str, Any]:
        return {
            "resource": route.path,
            "path": path,
            "httpMethod": method,
            "headers": headers or None,
            "multiValueHeaders": {k: [v] for k, v in headers.items()} or None,
            "queryStringParameters": dict(query) if query else None,
            "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
            "pathParameters": path_params or None,
            "stageVariables": None,
            "requestContext": {
                "resourceId": "res123",
                "resourcePath": route.path,
                "httpMethod": method,
                "extendedRequestId": request_id,
                "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime()),
                "path": f"/{self.stage}{path}",
                "accountId": ACCOUNT,
                "protocol": "HTTP/1.1",
                "stage": self.stage,
                "domainPrefix": API_ID,
                "requestTimeEpoch": int(time.time() * 1000),
                "requestId": request_id,
                "identity": {"sourceIp": "198.51.100.7", "userAgent": "mneme-tier"},
                "domainName": f"{API_ID}.execute-api.{REGION}.amazonaws.com",
                "apiId": API_ID,
                "authorizer": authorizer,
            },
            "body": body,
            "isBase64Encoded": False,
        }

    def _gateway(
        self,
        kind: str,
        request_id: str,
        authorizer: Mapping[str, str] | None = None,
        failure: dict[str, Any] | None = None,
    ) -> Response:
        status, message = DEFAULTS[kind]
        configured = self.responses.get(kind) or self.responses.get("DEFAULT_5XX" if status >= 500 else "DEFAULT_4XX")
        if configured is None:
            return Response(status, {"Content-Type": "application/json"}, json.dumps({"message": message}))
        status = int(configured.get("StatusCode") or status)
        template = configured.get("ResponseTemplates", {}).get("application/json", json.dumps({"message": message}))
        variables = {
            "$context.requestId": request_id,
            "$context.error.messageString": json.dumps(message),
            "$context.error.message": message,
            **{f"$context.authorizer.{k}": v for k, v in (authorizer or {}).items()},
        }
        for name in sorted(variables, key=len, reverse=True):
            template = template.replace(name, variables[name])
        template = re.sub(r"\$context\.authorizer\.\w+", "", template)  # unset variables render empty
        return Response(status, {"Content-Type": "application/json"}, template, failure=failure)
