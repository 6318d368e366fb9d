"""End to end over HTTP, with the default settle window and no sleeps by the caller: a value that changes
is superseded, omitted by default, found again with as_of, and leaves the roll-up."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mneme import bootstrap, cli
from tests.integration.helpers import Api


@pytest.fixture
def writer(server: str, home: Path) -> Api:
    bootstrap.reset()
    key_file, _ = cli.ensure_first_run()
    admin = Api(server, key_file.read_text().strip())
    return admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "agent", "roles": ["writer"]})["api_key"])


def consolidate(writer: Api) -> dict[str, Any]:
    started = writer.ok("POST", "/v1/consolidate", {}, 202)
    for _ in range(600):  # polling the run record, not waiting for time to pass
        run = writer.ok("GET", f"/v1/consolidations/{started['run_id']}")
        if run["status"] != "running":
            return run
        time.sleep(0.05)
    raise AssertionError("the run did not finish")


def remember(writer: Api, texts: list[str]) -> None:
    items = [{"scope": "root.acme", "create_scope": True, "content": text} for text in texts]
    writer.ok("POST", "/v1/remember", {"items": items}, 201)


def facts(writer: Api, **extra: Any) -> list[dict[str, Any]]:
    body = {"query": "Acme billing plan", "scope": "root.acme", "kinds": ["fact"], "limit": 50, **extra}
    return writer.ok("POST", "/v1/recall", body)["results"]


def test_a_changed_value_supersedes_and_leaves_the_rollup(writer: Api) -> None:
    # Given six episodes saying Basic, consolidated at once
    remember(writer, [f"Acme's billing plan is Basic, ticket {n}." for n in range(6)])
    first = consolidate(writer)
    assert first["status"] == "succeeded" and first["stages"]["collect"]["counters"]["episodes_read"] == 6
    before_change = datetime.now(UTC).isoformat()
    # When six episodes say Premium and consolidation runs immediately
    remember(writer, [f"Acme's billing plan is Premium since the upgrade, ticket {n}." for n in range(6)])
    second = consolidate(writer)
    assert second["status"] == "succeeded" and second["stages"]["collect"]["counters"]["episodes_read"] == 6
    # Then the current fact says Premium and Basic is omitted by default
    current = [r["fact"] for r in facts(writer) if r["tier"] == "raw"]
    assert [(f["entity"], f["property"], f["value"]) for f in current] == [("Acme", "billing plan", "Premium")]
    # And as_of before the change returns Basic
    then = [r["fact"]["value"] for r in facts(writer, as_of=before_change) if r["tier"] == "raw"]
    assert then == ["Basic"]
    # And the day's roll-up no longer states Basic (the week's would repeat the day's: it is not written)
    [daily] = [r for r in facts(writer, tiers=["daily", "weekly"])]
    assert daily["tier"] == "daily" and "Premium" in daily["content"] and "Basic" not in daily["content"]
