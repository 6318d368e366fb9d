"""The authorizer names the caller's throttle bucket: API Gateway throttles per usage-plan key, and with the
API's key source set to AUTHORIZER the key is the Allow's `usageIdentifierKey` (infra/mneme_infra/api.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mneme import bootstrap
from mneme.adapters.sqlite_store import SqliteRecordStore
from mneme.auth import UsageKeys, pinned_digest
from mneme.models import Role
from mneme.services.keys import KeyService
from tests.conftest import FixedClock

ARN = "arn:aws:execute-api:eu-west-1:123456789012:api123/dev/POST/v1/recall"
SEED = "51af3dc0da7711e4872e1234567db123"  # the stack's UUID without hyphens (infra/mneme_infra/throttling.py)


class Context:
    function_name, memory_limit_in_mb, aws_request_id = "authorizer", 512, "r-1"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:authorizer"


@pytest.fixture
def authorizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The authorizer function with its stack environment (16 buckets, one pinned tenant) on a fresh store."""
    monkeypatch.setenv("MNEME_HOME", str(tmp_path))
    monkeypatch.setenv("MNEME_THROTTLE__SEED", SEED)
    monkeypatch.setenv("MNEME_THROTTLE__BUCKETS", "16")
    monkeypatch.setenv("MNEME_THROTTLE__PINNED", pinned_digest("bigco"))
    bootstrap.reset()
    import functions.authorizer

    yield functions.authorizer.handler
    bootstrap.reset()


def key(tmp_path: Path, tenant: str, principal: str = "agent") -> str:
    keys = KeyService(SqliteRecordStore(tmp_path / "mneme.db"), FixedClock())
    secret, _ = keys.create(tenant, principal, [Role.admin])
    return secret


def ask(handler: Any, secret: str) -> dict[str, Any]:
    answer: dict[str, Any] = handler(
        {"type": "TOKEN", "authorizationToken": f"Bearer {secret}", "methodArn": ARN}, Context()
    )
    return answer


def test_an_allow_carries_its_tenants_bucket_key_the_same_for_every_key_of_the_tenant(
    authorizer: Any, tmp_path: Path
) -> None:
    usage = UsageKeys(SEED, 16)
    tenants = [f"tenant-{n}" for n in range(40)]
    answers = {tenant: ask(authorizer, key(tmp_path, tenant)) for tenant in tenants}
    for tenant, answer in answers.items():
        assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        assert answer["usageIdentifierKey"] == usage.of(tenant)
    # stable: another principal's key of the same tenant, asked again, lands in the same bucket
    assert (
        ask(authorizer, key(tmp_path, "tenant-3", "other"))["usageIdentifierKey"]
        == answers["tenant-3"]["usageIdentifierKey"]
    )
    # and the tenants spread over the buckets instead of sharing one
    assert len({a["usageIdentifierKey"] for a in answers.values()}) >= 12
    assert {a["usageIdentifierKey"] for a in answers.values()} <= {usage.value(b) for b in range(16)}


def test_a_deny_names_no_bucket(authorizer: Any) -> None:
    answer = ask(authorizer, "mnk_unknown")
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert answer["context"] == {"reason": "unauthorized"}
    assert "usageIdentifierKey" not in answer


def test_without_the_stacks_buckets_an_allow_names_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mneme serve` and the embedded engine run the same authorizer without usage plans."""
    monkeypatch.setenv("MNEME_HOME", str(tmp_path))
    monkeypatch.delenv("MNEME_THROTTLE__SEED", raising=False)
    bootstrap.reset()
    import functions.authorizer

    try:
        answer = ask(functions.authorizer.handler, key(tmp_path, "acme"))
    finally:
        bootstrap.reset()
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert "usageIdentifierKey" not in answer


def test_a_pinned_tenant_gets_its_own_key_and_nobody_else_does(authorizer: Any, tmp_path: Path) -> None:
    usage = UsageKeys(SEED, 16, frozenset({pinned_digest("bigco")}))
    pinned = ask(authorizer, key(tmp_path, "bigco"))["usageIdentifierKey"]
    assert pinned == usage.pinned_value("bigco") == f"mneme{SEED}p{pinned_digest('bigco')}"
    shared = UsageKeys(SEED, 16).value(UsageKeys(SEED, 16).bucket("bigco"))
    neighbours = [t for t in (f"tenant-{n}" for n in range(200)) if UsageKeys(SEED, 16).of(t) == shared]
    assert neighbours and {ask(authorizer, key(tmp_path, t))["usageIdentifierKey"] for t in neighbours} == {shared}


def test_bucket_of_a_tenant_does_not_depend_on_the_process_but_on_the_deployment() -> None:
    """A hash of the deployment's seed and the name, not Python's salted hash(): every authorizer instance of
    a deployment agrees, and another deployment spreads the same tenants differently."""
    assert UsageKeys(SEED, 16).bucket("acme") == 9
    assert UsageKeys(SEED, 16).value(9) == UsageKeys(SEED, 16).of("acme") == f"mneme{SEED}b09"
    other = "0c9e2f6a4b1d4e8f9a3c5d7e8f901234"
    tenants = [f"tenant-{n}" for n in range(100)]
    assert [UsageKeys(SEED, 16).bucket(t) for t in tenants] != [UsageKeys(other, 16).bucket(t) for t in tenants]


def test_a_seed_that_cannot_make_a_key_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from mneme.settings import ThrottleSettings

    with pytest.raises(ValidationError):
        ThrottleSettings(seed="Mneme-dev", buckets=16)  # API Gateway key values are alphanumeric
    assert ThrottleSettings(seed=SEED, buckets=16, pinned=" a1, b2 ,").pinned_digests == {"a1", "b2"}
