"""`mneme serve` with a per-tenant limit (MNEME_SERVE__TENANT_RATE_LIMIT): a tenant past its burst is
answered 429 `throttled` with Retry-After, in the error shape, while another tenant is still served."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from mneme import bootstrap
from mneme.local import server as local
from mneme.models import Role

from .helpers import new_key


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.fixture
def url(home: Path, monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> Iterator[str]:
    """The local server as `MNEME_SERVE__TENANT_RATE_LIMIT=2` and `__TENANT_BURST_LIMIT=3` configure it,
    its buckets on a clock the test moves."""
    monkeypatch.setenv("MNEME_SERVE__TENANT_RATE_LIMIT", "2")
    monkeypatch.setenv("MNEME_SERVE__TENANT_BURST_LIMIT", "3")
    bootstrap.reset()
    configured = local.configured_throttle()
    assert configured is not None and (configured.rate, configured.burst) == (2, 3)
    configured.clock = lambda: clock[0]
    httpd = local.make_server("127.0.0.1", 0, throttle=configured)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def me(url: str, key: str) -> requests.Response:
    return requests.get(f"{url}/v1/me", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_a_tenant_past_its_burst_gets_429_with_retry_after_while_another_is_served(
    url: str, clock: list[float]
) -> None:
    noisy, quiet = new_key("acme", "bot", Role.reader), new_key("globex", "bot", Role.reader)
    assert [me(url, noisy).status_code for _ in range(3)] == [200, 200, 200]
    refused = me(url, noisy)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    error = refused.json()["error"]
    assert error["code"] == "throttled" and error["details"]["retry_after_seconds"] == 1
    assert "acme" in error["message"]
    assert refused.headers["X-Request-Id"]
    served = me(url, quiet)
    assert served.status_code == 200 and served.json()["tenant"] == "globex"
    # another key of the same tenant shares its bucket
    assert me(url, new_key("acme", "other", Role.reader)).status_code == 429
    clock[0] += 0.5  # one token back at 2 a second
    assert [me(url, noisy).status_code for _ in range(2)] == [200, 429]


def test_health_and_refused_keys_are_not_counted(url: str) -> None:
    """Only authorized requests spend a tenant's tokens: a bad key is 401, health has no tenant."""
    for _ in range(5):
        assert requests.get(f"{url}/v1/health", timeout=30).status_code == 200
        assert me(url, "mnk_unknown").status_code == 401
    assert me(url, new_key("acme", "bot", Role.reader)).status_code == 200


def test_no_limit_unless_configured(home: Path) -> None:
    bootstrap.reset()
    assert local.configured_throttle() is None
