"""One Bedrock call with retries: the loop the embedder and the reasoner share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from mneme.errors import MnemeError, StoreUnavailable

T = TypeVar("T")


def call_with_retries(
    call: Callable[[], T],
    *,
    attempts: int,
    retryable: set[str] | frozenset[str],
    wait: Callable[[int], None],
    translate: Callable[[str, str, int], MnemeError],
) -> T:
    """Retry `retryable` error codes and network failures up to `attempts` times (waiting `wait(attempt)`
    between tries); other client errors go through `translate`, configuration errors are not retried."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in retryable and attempt < attempts:
                wait(attempt)
                continue
            raise translate(code, str(e), attempt) from e
        except (BotoConnectionError, HTTPClientError) as e:  # includes read and connect timeouts
            if attempt < attempts:
                wait(attempt)
                continue
            raise StoreUnavailable(f"Bedrock unreachable after {attempt} attempts: {e}") from e
        except BotoCoreError as e:  # credentials, configuration: retrying will not help
            raise StoreUnavailable(f"Bedrock client failed: {e}") from e
    raise AssertionError("unreachable")
