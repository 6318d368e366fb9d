"""Typed domain errors: a stable code and an HTTP status per class.

Step Functions `Retry`/`Catch` match on class names, so keep them stable.
"""

from __future__ import annotations

from typing import Any


class MnemeError(Exception):
    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details

    def to_body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


class InvalidInput(MnemeError):
    code = "invalid_input"
    status = 400


class Unauthorized(MnemeError):
    code = "unauthorized"
    status = 401


class Forbidden(MnemeError):
    code = "forbidden"
    status = 403


class NotFound(MnemeError):
    code = "not_found"
    status = 404


class ScopeNotFound(NotFound):
    code = "scope_not_found"


class MemoryNotFound(NotFound):
    code = "memory_not_found"


class MethodNotAllowed(MnemeError):
    code = "method_not_allowed"
    status = 405


class Conflict(MnemeError):
    code = "conflict"
    status = 409


class PayloadTooLarge(MnemeError):
    code = "payload_too_large"
    status = 413


class UnsupportedMediaType(MnemeError):
    code = "unsupported_media_type"
    status = 415


class Throttled(MnemeError):
    code = "throttled"
    status = 429


class StoreUnavailable(MnemeError):
    """A backing service failed in a way the caller may retry."""

    code = "store_unavailable"
    status = 503


class StorageFull(MnemeError):
    """The disk under the store is full: nothing was written; free space and retry."""

    code = "storage_full"
    status = 507


class StoreReadOnly(MnemeError):
    """The store cannot be written (a read-only disk or file): nothing was written."""

    code = "store_read_only"
    status = 503


class StoreDamaged(MnemeError):
    """A file of the store is damaged (pages SQLite cannot read): restore it from a backup."""

    code = "store_damaged"
    status = 503


class ReasonerError(MnemeError):
    """The reasoner (an LLM behind an adapter) answered in a way consolidation cannot use."""

    code = "reasoner_error"
    status = 502


class ReasonerOutputInvalid(ReasonerError):
    """The model answered, but not with a proposal (no structured output, bad JSON, wrong fields).
    Worth one retry with the reason appended."""

    code = "reasoner_output_invalid"


class ReasonerRefused(ReasonerError):
    """The reasoner refused the request (denied access, unknown model, invalid request): a deployment
    fault that no retry fixes. `code` says which (`reasoner_access_denied`, ...)."""

    code = "reasoner_request_invalid"
