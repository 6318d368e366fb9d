"""Opaque, signed page cursors: base64url(JSON) + "." + a truncated HMAC-SHA256 over the tenant, the list it
pages (none for the change feed) and the payload. A cursor cannot be altered, used by another tenant, or used
to page another list."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mneme.errors import InvalidInput


@dataclass
class Cursors:
    secret_source: Callable[[], bytes]  # read on first use: functions that never page never fetch it

    def _sign(self, tenant: str, purpose: str, payload: bytes) -> str:
        scope = tenant.encode() + b"\x00" + (purpose.encode() + b"\x00" if purpose else b"")
        digest = hmac.new(self.secret_source(), scope + payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:18]).decode().rstrip("=")

    def encode(self, tenant: str, values: list[Any], purpose: str = "") -> str:
        payload = base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")
        return f"{payload}.{self._sign(tenant, purpose, payload.encode())}"

    def decode(self, tenant: str, cursor: str, purpose: str = "") -> list[Any]:
        payload, _, signature = cursor.partition(".")
        if (
            not cursor.isascii()
            or not signature
            or not hmac.compare_digest(signature, self._sign(tenant, purpose, payload.encode()))
        ):
            raise InvalidInput("invalid cursor: it was altered or belongs to another tenant", code="invalid_cursor")
        try:
            values = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, TypeError) as e:
            raise InvalidInput("invalid cursor", code="invalid_cursor") from e
        if not isinstance(values, list):
            raise InvalidInput("invalid cursor", code="invalid_cursor")
        return values
