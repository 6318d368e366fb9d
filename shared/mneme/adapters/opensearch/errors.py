"""opensearch-py errors as domain errors, at the adapter's boundary.

`translate_error`: connection failures (also timeouts and TLS failures) and 5xx are `StoreUnavailable`,
429 is `Throttled`, a rejected request (4xx) is `StoreUnavailable` with the server's reason. Bulk item
failures are translated the same way, the worst one winning (`bulk_failure`). `index_missing` and
`index_not_built` tell the callers that read a missing index as empty, or wait for a new one.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import ConnectionError as OpenSearchConnectionError
from opensearchpy import TransportError

from mneme.errors import MnemeError, StoreUnavailable, Throttled


def _reason(info: Any, fallback: str) -> str:
    error = info.get("error") if isinstance(info, dict) else None
    if isinstance(error, dict):
        cause = error.get("caused_by")
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": ")
        if isinstance(cause, dict) and cause.get("reason"):
            reason += f" ({cause['reason']})"
        return reason
    if isinstance(error, str):
        return error
    return fallback


def _by_status(status: int | None, message: str) -> MnemeError:
    details = {"status": status} if status is not None else None
    if status == 429:
        return Throttled(message, details=details)
    return StoreUnavailable(message, details=details)


def translate_error(exc: Exception, action: str) -> MnemeError:
    """The domain error for an opensearch-py exception raised while doing `action`."""
    if isinstance(exc, MnemeError):
        return exc
    if isinstance(exc, OpenSearchConnectionError):  # also timeouts and TLS failures
        return StoreUnavailable(f"search index unreachable while {action}: {exc.error}")
    if isinstance(exc, TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else None
        reason = _reason(exc.info, str(exc.error))
        if status is not None and 400 <= status < 500 and status != 429:
            return StoreUnavailable(f"search index rejected {action} ({status}): {reason}", details={"status": status})
        return _by_status(status, f"search index failed while {action} ({status}): {reason}")
    return StoreUnavailable(f"search index failed while {action}: {exc}")


def index_missing(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.status_code == 404 and exc.error == "index_not_found_exception"


def bulk_failure(response: dict[str, Any], action: str, ignore: frozenset[int] = frozenset()) -> MnemeError | None:
    """The error for a `_bulk` response with failed items (the worst status wins), or None."""
    failed: list[tuple[int, str]] = []
    for item in response.get("items", []):
        result: dict[str, Any] = next(iter(item.values()), {})
        status = int(result.get("status", 500))
        if "error" in result and status not in ignore:
            failed.append((status, _reason({"error": result["error"]}, "unknown error")))
    if not failed:
        return None
    status, reason = max(failed, key=lambda f: (f[0] == 429, f[0] >= 500, f[0]))
    message = f"{len(failed)} of {len(response.get('items', []))} documents failed while {action} ({status}): {reason}"
    return _by_status(status, message)


def index_not_built(exc: MnemeError, items: list[dict[str, Any]]) -> bool:
    """Whether a failed `_bulk` found no index: the request refused, or every item, with index_not_found."""
    if exc.__cause__ is not None and index_missing(exc.__cause__):
        return True
    results: list[dict[str, Any]] = [next(iter(item.values()), {}) for item in items]
    return bool(results) and all(
        (result.get("error") or {}).get("type") == "index_not_found_exception" for result in results
    )
