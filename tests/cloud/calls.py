"""Watching every AWS call: botocore API calls and the search index's HTTP requests, per function.

`install()` wraps `botocore.client.BaseClient._make_api_call` (every client, whenever and however it was
created) and opensearch-py's `RequestsHttpConnection.perform_request` once per session. While a function
runs (`Watch.running`), each call is turned into IAM requests (`tests.cloud.iam`) and judged against the
function's role, on whichever thread the function makes it: a thread it starts and the work it submits to
a thread pool carry its principal (`install` wraps `threading.Thread.start` and `ThreadPoolExecutor.submit`;
threads the simulated services start inside a call, such as moto's state machine executions, do not). A
denied call is answered as AWS answers it (AccessDenied / 403) and recorded, and the
tier fails the test naming it. Bedrock runtime calls are answered by the `BedrockDouble`, after botocore
validated their parameters against the service model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import botocore.client
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

from tests.cloud.iam import (
    Decision,
    Request,
    aoss_permission,
    as_list,
    data_access_allows,
    evaluate,
    requests_for,
)


@dataclass(frozen=True)
class Seen:
    """One authorisation request a function made, and the verdict."""

    function: str
    service: str
    operation: str
    request: Request
    decision: Decision


@dataclass
class Principal:
    """What a running function is, for IAM: its role ARN and statements, and the collection it may use."""

    function: str
    role_arn: str
    statements: Sequence[Mapping[str, Any]]
    collection_arn: str | None = None
    collection_name: str | None = None
    data_rules: Sequence[Mapping[str, Any]] = ()
    domain_arn: str | None = None  # a managed domain (mneme:search=domain) instead of the collection
    domain_policy: Sequence[Mapping[str, Any]] = ()


@dataclass
class Watch:
    """Session-wide: the log of every call seen and the function running in each thread."""

    seen: list[Seen] = field(default_factory=list)
    bedrock: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def principal(self) -> Principal | None:
        return getattr(self._local, "principal", None)

    @contextmanager
    def running(self, principal: Principal) -> Iterator[list[Seen]]:
        """Attribute this thread's calls to `principal`; yields the list of this invocation's calls."""
        previous = self.principal
        mine: list[Seen] = []
        self._local.principal, self._local.mine = principal, mine
        try:
            yield mine
        finally:
            self._local.principal, self._local.mine = previous, None

    def carry(self, work: Callable[..., Any]) -> Callable[..., Any]:
        """`work`, to run on another thread as this thread's function (or as no function, if none runs)."""
        principal, mine = self.principal, getattr(self._local, "mine", None)

        def attributed(*args: Any, **kwargs: Any) -> Any:
            previous = self.principal, getattr(self._local, "mine", None)
            self._local.principal, self._local.mine = principal, mine
            try:
                return work(*args, **kwargs)
            finally:
                self._local.principal, self._local.mine = previous

        return attributed

    @contextmanager
    def serving(self) -> Iterator[None]:
        """A simulated service answering a call: threads it starts are not the calling function's."""
        previous = getattr(self._local, "serving", False)
        self._local.serving = True
        try:
            yield
        finally:
            self._local.serving = previous

    def judge(self, service: str, operation: str, requests: list[Request], deny: Callable[[Seen], Exception]) -> None:
        principal = self.principal
        if principal is None:
            return  # the test's own setup or inspection, not a function
        for request in requests:
            seen = Seen(principal.function, service, operation, request, evaluate(principal.statements, request))
            self._record(seen)
            if not seen.decision.allowed:
                raise deny(seen)

    def judge_search(self, method: str, path: str) -> None:
        principal = self.principal
        if principal is None:
            return
        if principal.domain_arn is not None:
            self._judge_domain(principal, method, path)
            return
        index = [p for p in path.split("/") if p][:1]
        permission = aoss_permission(method, path)
        api = Request("aoss:APIAccessAll", principal.collection_arn or "<no collection>")
        seen = Seen(
            principal.function, "aoss", f"{method} {path.split('?')[0]}", api, evaluate(principal.statements, api)
        )
        self._record(seen)
        if not seen.decision.allowed:
            raise _search_denied(seen)
        if not index or index[0].startswith("_"):
            return
        resource = f"index/{principal.collection_name}/{index[0]}"
        allowed = data_access_allows(principal.data_rules, principal.role_arn, resource, permission)
        data = Seen(
            principal.function,
            "aoss",
            f"{method} {path.split('?')[0]}",
            Request(permission, resource),
            Decision(allowed, None, "data access policy" if allowed else "no data access rule allows it"),
        )
        self._record(data)
        if not allowed:
            raise _search_denied(data)

    def _judge_domain(self, principal: Principal, method: str, path: str) -> None:
        """A managed domain: `es:ESHttp<Method>` on `<domain ARN>/<path>`, allowed by the role's policy and
        by a domain access policy statement naming the role."""
        request = Request(f"es:ESHttp{method.capitalize()}", f"{principal.domain_arn}{path.split('?')[0]}")
        named = [
            {key: value for key, value in statement.items() if key != "Principal"}
            for statement in principal.domain_policy
            if principal.role_arn in as_list(statement["Principal"]["AWS"])
        ]
        for decision, origin in ((evaluate(principal.statements, request), ""), (evaluate(named, request), "domain ")):
            seen = Seen(principal.function, "es", f"{method} {path.split('?')[0]}", request,
                        Decision(decision.allowed, decision.statement, origin + decision.reason))  # fmt: skip
            self._record(seen)
            if not seen.decision.allowed:
                raise _search_denied(seen)

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)
        mine = getattr(self._local, "mine", None)
        if mine is not None:
            mine.append(seen)


WATCH = Watch()
_installed = False


def _access_denied(operation: str) -> Callable[[Seen], Exception]:
    def deny(seen: Seen) -> Exception:
        principal = WATCH.principal
        message = (
            f"User: {principal.role_arn if principal else '?'} is not authorized to perform: "
            f"{seen.request.action} on resource: {seen.request.resource} because {seen.decision.reason}"
        )
        return ClientError({"Error": {"Code": "AccessDeniedException", "Message": message}}, operation)

    return deny


def _search_denied(seen: Seen) -> Exception:
    from opensearchpy.exceptions import AuthorizationException

    return AuthorizationException(403, "security_exception", {"message": f"denied: {seen.request.describe()}"})


def install() -> None:
    """Wrap botocore and opensearch-py once per process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    original_call = botocore.client.BaseClient._make_api_call

    def make_api_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        service = self.meta.service_model.service_name
        if WATCH.principal is not None:  # outside a function (any other tier's test), the watch is inert
            requests = requests_for(service, operation_name, api_params)
            WATCH.judge(service, operation_name, requests, _access_denied(operation_name))
        if service == "bedrock-runtime" and WATCH.bedrock is not None:
            validate_parameters(api_params, self.meta.service_model.operation_model(operation_name).input_shape)
            return WATCH.bedrock(operation_name, api_params)
        with WATCH.serving():
            return original_call(self, operation_name, api_params)

    botocore.client.BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]

    from opensearchpy import RequestsHttpConnection

    original_request = RequestsHttpConnection.perform_request

    def perform_request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        WATCH.judge_search(method, urlparse(url).path)
        return original_request(self, method, url, *args, **kwargs)

    RequestsHttpConnection.perform_request = perform_request  # type: ignore[method-assign]

    original_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if WATCH.principal is not None and not getattr(WATCH._local, "serving", False):
            self.run = WATCH.carry(self.run)  # type: ignore[method-assign]
        original_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]
    original_submit = ThreadPoolExecutor.submit

    def submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return original_submit(self, WATCH.carry(fn), *args, **kwargs)

    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
