"""Bedrock clients that retry with botocore's own retry modes, and the one place a Bedrock call's failure
becomes a domain error (shared by `BedrockEmbedder` and `BedrockReasoner`).

Retries happen inside the client: `standard` mode (exponential backoff with jitter, capped at 20 s, and a
retry quota that stops retry storms) or `adaptive` (the same plus client-side rate limiting that slows
the client down while Bedrock throttles), `total_max_attempts` calls per request. botocore retries
throttling (`ThrottlingException`, any 429), 5xx (`InternalServerException`,
`ServiceUnavailableException`), what the service model marks retryable (`ModelNotReadyException`) and
connection failures and timeouts; not `ModelTimeoutException` nor `ServiceQuotaExceededException`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from mneme.errors import MnemeError, StoreUnavailable

T = TypeVar("T")
RetryMode = Literal["standard", "adaptive"]


CONNECT_TIMEOUT = 1.0  # seconds; botocore's default (60 s) alone would outlast every HTTP function


def bedrock_client(region_name: str | None, *, max_attempts: int, retry_mode: RetryMode, read_timeout: float) -> Any:
    """A `bedrock-runtime` client making up to `max_attempts` calls per request in `retry_mode`, each at most
    `CONNECT_TIMEOUT` + `read_timeout` seconds."""
    import boto3
    from botocore.config import Config

    retries: Any = {"mode": retry_mode, "total_max_attempts": max_attempts}
    config = Config(retries=retries, read_timeout=read_timeout, connect_timeout=CONNECT_TIMEOUT)
    return boto3.client("bedrock-runtime", region_name=region_name, config=config)


class LazyBedrockClient:
    """The client handed in, or one `bedrock_client` makes on first use (once, whichever thread asks first)."""

    def __init__(
        self, client: Any, region_name: str | None, *, max_attempts: int, retry_mode: RetryMode, read_timeout: float
    ) -> None:
        self._client = client
        self._settings: dict[str, Any] = {
            "max_attempts": max_attempts,
            "retry_mode": retry_mode,
            "read_timeout": read_timeout,
        }
        self._region_name = region_name
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = bedrock_client(self._region_name, **self._settings)
            return self._client


def attempts_of(error: ClientError) -> int:
    """How many calls the client made before giving up with `error` (its retries plus the first)."""
    return int(error.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) + 1


def call_bedrock(call: Callable[[], T], *, translate: Callable[[str, str, int], MnemeError]) -> T:
    """Make one (client-retried) call; a service error goes through `translate(code, message, attempts)`,
    a network failure or a client fault (credentials, configuration) is `StoreUnavailable`."""
    try:
        return call()
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        raise translate(code, str(e), attempts_of(e)) from e
    except (BotoConnectionError, HTTPClientError) as e:  # includes read and connect timeouts, after retries
        raise StoreUnavailable(f"Bedrock unreachable: {e}") from e
    except BotoCoreError as e:  # credentials, configuration: retrying would not help
        raise StoreUnavailable(f"Bedrock client failed: {e}") from e
