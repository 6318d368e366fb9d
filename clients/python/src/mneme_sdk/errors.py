"""Typed errors carrying the API's error body `{"error": {"code", "message", "details"?}}`.

Every failure raises a `MnemeError`: `e.code` (the API's stable code, e.g. `scope_not_found`),
`e.message`, `e.details` and `e.status` (the HTTP status; 0 when no answer came). The class is chosen
by the code when it names one below, else by the status. Plain Python: importing it costs nothing.
"""

from __future__ import annotations

from typing import Any


class MnemeError(Exception):
    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, details: Any = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details

    def to_body(self) -> dict[str, Any]:
        """The API's error body for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"


class InvalidInput(MnemeError):
    code, status = "invalid_input", 400


class Unauthorized(MnemeError):
    code, status = "unauthorized", 401


class Forbidden(MnemeError):
    code, status = "forbidden", 403


class NotFound(MnemeError):
    code, status = "not_found", 404


class ScopeNotFound(NotFound):
    code = "scope_not_found"


class MemoryNotFound(NotFound):
    code = "memory_not_found"


class MethodNotAllowed(MnemeError):
    code, status = "method_not_allowed", 405


class Conflict(MnemeError):
    code, status = "conflict", 409


class PayloadTooLarge(MnemeError):
    code, status = "payload_too_large", 413


class UnsupportedMediaType(MnemeError):
    code, status = "unsupported_media_type", 415


class Throttled(MnemeError):
    code, status = "throttled", 429


class ServiceUnavailable(MnemeError):
    """The API (or a store behind it) is unavailable for now; the call may be retried."""

    code, status = "store_unavailable", 503


class ConnectionFailed(ServiceUnavailable):
    """The API could not be reached (refused, reset, timed out) after the retries; `status` is 0."""

    code, status = "connection_failed", 0


_CLASSES: tuple[type[MnemeError], ...] = (
    InvalidInput,
    Unauthorized,
    Forbidden,
    NotFound,
    ScopeNotFound,
    MemoryNotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    Throttled,
    ServiceUnavailable,
)
_BY_CODE = {cls.code: cls for cls in _CLASSES}
_BY_STATUS = {cls.status: cls for cls in _CLASSES if cls.__base__ is MnemeError}


def error_from_body(status: int, body: Any, text: str = "") -> MnemeError:
    """The error for an answer with `status` whose JSON body is `body` (None when it was not JSON).

    An answer without the error shape (a proxy's HTML page) keeps its status and gets the code `http_<status>`.
    """
    code, message, details = f"http_{status}", "", None
    try:
        error = body["error"]
        code, message, details = str(error["code"]), str(error["message"]), error.get("details")
    except (KeyError, TypeError):
        message = f"HTTP {status}" + (f": {text.strip()[:300]}" if text.strip() else "")
    by_code = _BY_CODE.get(code)
    cls = by_code if by_code is not None and by_code.status == status else _BY_STATUS.get(status, MnemeError)
    return cls(message, code=code, details=details, status=status)
