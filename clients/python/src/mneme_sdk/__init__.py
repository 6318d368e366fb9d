"""Python client for the Mneme memory API: `Client` (sync) and `AsyncClient`, typed, httpx and pydantic only.

    from mneme_sdk import Client
    mneme = Client("http://127.0.0.1:8080", api_key)
    mneme.remember("root.acme", "Acme's year end is 31 March.", create_scope=True)

Names load on first use, so `import mneme_sdk` stays cheap; `mneme_sdk.errors` is plain Python.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mneme_sdk._operations import MAX_BATCH, invalid_input
    from mneme_sdk.client import AsyncClient, Client
    from mneme_sdk.errors import (
        Conflict,
        ConnectionFailed,
        Forbidden,
        InvalidInput,
        MemoryNotFound,
        MethodNotAllowed,
        MnemeError,
        NotFound,
        PayloadTooLarge,
        ScopeNotFound,
        ServiceUnavailable,
        Throttled,
        Unauthorized,
        UnsupportedMediaType,
    )

__all__ = [
    "MAX_BATCH",
    "AsyncClient",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "InvalidInput",
    "MemoryNotFound",
    "MethodNotAllowed",
    "MnemeError",
    "NotFound",
    "PayloadTooLarge",
    "ScopeNotFound",
    "ServiceUnavailable",
    "Throttled",
    "Unauthorized",
    "UnsupportedMediaType",
    "invalid_input",
]
_WHERE = {
    "Client": "mneme_sdk.client",
    "AsyncClient": "mneme_sdk.client",
    "MAX_BATCH": "mneme_sdk._operations",
    "invalid_input": "mneme_sdk._operations",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name, "mneme_sdk.errors" if name in __all__ else None)
    if where is None:
        raise AttributeError(f"module 'mneme_sdk' has no attribute {name!r}")
    return getattr(import_module(where), name)
