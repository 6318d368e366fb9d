"""A real `bedrock-runtime` client whose HTTP layer answers from a script, so botocore's own retry modes
run as they would against Bedrock (no network, no sleeping: each backoff delay is recorded instead)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from botocore.retries import standard

from mneme.adapters.models.bedrock_calls import RetryMode, bedrock_client

ENDPOINT = "https://bedrock-runtime.us-east-1.amazonaws.com"
Reply = tuple[int, dict[str, str], bytes] | Exception


class _Raw:
    """The raw body botocore reads: whole (`stream`) for JSON, or as a file (`read`) for a streaming blob."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data.read()

    def read(self, *args: Any) -> bytes:
        return self._data.read(*args)


class ScriptedBedrock:
    """Replies are consumed in order, one per HTTP attempt; `sent` counts attempts, `delays` the backoffs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, max_attempts: int, mode: RetryMode = "standard") -> None:
        self.client = bedrock_client("us-east-1", max_attempts=max_attempts, retry_mode=mode, read_timeout=5)
        self.replies: list[Reply] = []
        self.sent = 0
        self.delays: list[float] = []
        self.client.meta.events.register("before-send.bedrock-runtime", self._send)
        real_delay = standard.ExponentialBackoff.delay_amount

        def delay_amount(backoff: standard.ExponentialBackoff, context: Any) -> float:
            self.delays.append(real_delay(backoff, context))
            return 0.0

        monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", delay_amount)

    def ok(self, payload: Any) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"content-type": "application/json", "content-length": str(len(body))}
        self.replies.append((200, headers, body))

    def error(self, code: str, status: int) -> None:
        body = json.dumps({"message": f"{code} from script"}).encode()
        self.replies.append((status, {"x-amzn-ErrorType": code, "content-type": "application/json"}, body))

    def raises(self, error: Exception) -> None:
        self.replies.append(error)

    def unreachable(self) -> None:
        self.raises(EndpointConnectionError(endpoint_url=ENDPOINT))

    def _send(self, request: Any, **_: Any) -> AWSResponse:
        self.sent += 1
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        status, headers, body = reply
        return AWSResponse(request.url, status, headers, _Raw(body))
