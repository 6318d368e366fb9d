"""moto's DynamoDB, made as isolated as DynamoDB where concurrency tests need it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.client import BaseClient


def one_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies a TransactWriteItems atomically (a concurrent read or conditional put sees all of it
    or none); moto applies its items one by one, so a racing caller can slip a put between them. Serialising
    the calls restores that isolation; the callers' read-then-conditional-write races stay real."""
    lock = threading.RLock()
    real = BaseClient._make_api_call

    def atomic(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        with lock:
            return real(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", atomic)
