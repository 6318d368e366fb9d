"""Calls as flows: what to send, when to retry and how to read the answer, without doing any I/O.

An operation is a generator (a *flow*) that yields steps and receives their outcomes:

- `Call` — one API call; `drive` answers it with the 2xx `httpx.Response`, having run `exchange`
  (retries included) for it, or raises the call's `MnemeError` inside the flow;
- `Send` — one HTTP exchange (only `exchange` yields it); answered with the `httpx.Response`, or with
  the `httpx.TransportError` when no answer came;
- `Sleep` — wait before the next step;
- `Emit` — a value for a caller that iterates (the change feed).

The sync and the async client carry out `drive(flow)`'s steps and differ only in how they send and
sleep (`client.py`), so every route's request building, retry rule and response parsing exists once,
here and in `_operations.py`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from mneme_sdk.errors import ConnectionFailed, MnemeError, error_from_body

log = logging.getLogger("mneme_sdk")
T = TypeVar("T")

#: Statuses retried for every call: the server refused the request before doing any work.
RETRY_ALWAYS = frozenset({429, 503})
#: Statuses retried only for calls that are safe to repeat.
RETRY_IDEMPOTENT = frozenset({500, 502, 504})


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # e.g. /v1/recall, path parameters already quoted
    body: Any = None  # JSON-able, or None for no body
    query: Mapping[str, str | Sequence[str]] = field(default_factory=dict)  # a sequence: the name repeated
    accept: str = "application/json"
    idempotent: bool = True  # safe to resend after it may have reached the server


@dataclass(frozen=True)
class Send:
    method: str
    path: str
    query: Mapping[str, str | Sequence[str]]
    content: bytes | None
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Emit:
    value: Any


Step = Call | Send | Sleep | Emit
Flow = Generator[Step, Any, T]


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff doubles from `backoff` seconds up to `max_backoff`, with jitter. A `Retry-After` longer
    than `max_retry_after` seconds is not waited for: the error is raised."""

    max_retries: int = 3
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    def delay(self, attempt: int) -> float:
        ceiling: float = min(self.max_backoff, self.backoff * 2**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def exchange(call: Call, policy: RetryPolicy) -> Generator[Send | Sleep, Any, httpx.Response]:
    """Send `call` until it gets a 2xx answer, retrying what the policy and the call allow.

    429 and 503 are retried for every call (honouring `Retry-After`); other 5xx answers and failures
    after the request may have reached the server only when `call.idempotent`; a connection that was
    never made is retried for every call.
    """
    headers = {"Accept": call.accept}
    content = None
    if call.body is not None:
        content = json.dumps(call.body, separators=(",", ":")).encode()
        headers["Content-Type"] = "application/json"
    send = Send(call.method, call.path, dict(call.query), content, headers)
    attempt = 0
    while True:
        outcome = yield send
        if isinstance(outcome, httpx.TransportError):
            never_sent = isinstance(outcome, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
            if attempt < policy.max_retries and (call.idempotent or never_sent):
                delay = policy.delay(attempt)
                log.info("retrying %s %s in %.2fs: %r", call.method, call.path, delay, outcome)
                yield Sleep(delay)
                attempt += 1
                continue
            message = f"{call.method} {call.path} failed: {type(outcome).__name__}: {outcome}"
            raise ConnectionFailed(message, details={"attempts": attempt + 1}) from outcome
        response: httpx.Response = outcome
        if response.status_code < 400:
            return response
        error = error_of(response)
        status = response.status_code
        if not (status in RETRY_ALWAYS or (call.idempotent and status in RETRY_IDEMPOTENT)):
            raise error
        if attempt >= policy.max_retries:
            raise error
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is not None and retry_after > policy.max_retry_after:
            raise error
        delay = retry_after if retry_after is not None else policy.delay(attempt)
        log.info("retrying %s %s in %.2fs after %s %s", call.method, call.path, delay, status, error.code)
        yield Sleep(delay)
        attempt += 1


def drive(flow: Flow[T], policy: RetryPolicy) -> Generator[Send | Sleep | Emit, Any, T]:
    """The steps a client carries out for `flow`: each `Call` expanded into its `exchange` (retries
    included), whose error is raised inside the flow (which may handle it, e.g. a store's `get` of a
    scope that does not exist); `Send`, `Sleep` and `Emit` passed through. Returns the flow's value."""
    resume: Callable[[Any], Step] = flow.send
    outcome: Any = None
    while True:
        try:
            step = resume(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if not isinstance(step, Call):
            outcome, resume = (yield step), flow.send
            continue
        try:
            outcome, resume = (yield from exchange(step, policy)), flow.send
        except MnemeError as error:
            outcome, resume = error, flow.throw


def error_of(response: httpx.Response) -> MnemeError:
    """The `MnemeError` for an error answer (its class from the API's code, else the status)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    return error_from_body(response.status_code, body, response.text)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
