"""`mneme serve`'s per-tenant request limit: a token bucket per tenant, as API Gateway's usage plan applies
per throttle bucket in AWS (infra/mneme_infra/api.py). Off unless `MNEME_SERVE__TENANT_RATE_LIMIT` is set.

Each process of `serve --workers N` keeps its own buckets, so a tenant may get up to N times the rate.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from mneme.errors import Throttled


class TenantThrottle:
    """`rate` requests a second per tenant, `burst` at once; `admit` raises `Throttled` past them."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when counted)
        self._lock = threading.Lock()

    def admit(self, tenant: str) -> None:
        with self._lock:
            now = self.clock()
            tokens, then = self._buckets.get(tenant, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets[tenant] = (tokens - 1, now)
                return
            self._buckets[tenant] = (tokens, now)
        retry_after = max(1, math.ceil((1 - tokens) / self.rate))
        raise Throttled(
            f"tenant {tenant!r} is over its {self.rate:g} requests a second (burst {self.burst}): "
            f"retry in {retry_after} s",
            details={"retry_after_seconds": retry_after},
        )
