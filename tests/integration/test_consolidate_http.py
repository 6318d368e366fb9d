"""consolidate through the local server: 202 + run id, the run record, facts in recall with sources."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from functions import consolidate as consolidate_function
from mneme import bootstrap, cli
from mneme.local.events import LocalContext
from tests.integration.helpers import Api

CLIENTS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]


@pytest.fixture
def writer(server: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("MNEME_CONSOLIDATION__SETTLE_SECONDS", "0")
    bootstrap.reset()
    key_file, _ = cli.ensure_first_run()
    admin = Api(server, key_file.read_text().strip())
    return admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "agent", "roles": ["writer"]})["api_key"])


def remember_related(writer: Api, value: str, day: int) -> None:
    items = [
        {
            "scope": f"root.{region}",
            "create_scope": True,
            "metadata": {"n": n, "region": region},
            "occurred_at": f"2026-03-{day:02d}T{n % 24:02d}:00:00Z",
            "content": f"{CLIENTS[n % 5]}'s payment terms are {value}.",
        }
        for region in ("north", "south")
        for n in range(150)
    ]
    for start in range(0, len(items), 100):
        writer.ok("POST", "/v1/remember", {"items": items[start : start + 100]}, 201)


def run_to_end(writer: Api, body: dict[str, Any] | None = None) -> dict[str, Any]:
    started = writer.ok("POST", "/v1/consolidate", body or {}, 202)
    assert started["run_id"].startswith("run_") and started["status"] == "running"
    for _ in range(600):
        run = writer.ok("GET", f"/v1/consolidations/{started['run_id']}")
        if run["status"] != "running":
            return run
        time.sleep(0.1)
    raise AssertionError("the run did not finish")


def test_consolidate_supersede_and_recall_facts_with_sources(writer: Api) -> None:
    # Given a few hundred related episodes across two scopes
    remember_related(writer, "30 days", day=2)
    # When consolidation runs
    run = run_to_end(writer)
    # Then the run record is truthful and complete
    assert run["status"] == "succeeded" and sorted(run["scopes"]) == ["root.north", "root.south"]
    assert run["stages"]["collect"]["counters"]["episodes_read"] == 300
    assert run["stages"]["checkpoint"]["counters"]["advanced"] == 300
    # And recall returns the facts first, with their source episodes and metadata
    found = writer.ok("POST", "/v1/recall", {"query": "Acme payment terms", "scope": "root.north", "kinds": ["fact"]})
    fact = next(r for r in found["results"] if r["tier"] == "raw")
    assert fact["fact"]["entity"] == "Acme" and fact["fact"]["value"] == "30 days"
    assert fact["sources"] and all(s["metadata"]["region"] == "north" for s in fact["sources"])
    # When the value changes later
    remember_related(writer, "60 days", day=20)
    run_to_end(writer, {"scopes": ["root.north"]})
    # Then the new value supersedes the old one, and as_of still finds the old one
    now = writer.ok("POST", "/v1/recall", {"query": "Acme payment terms", "scope": "root.north", "kinds": ["fact"]})
    assert {r["fact"]["value"] for r in now["results"] if r["tier"] == "raw" and r["fact"]["entity"] == "Acme"} == {
        "60 days"
    }
    then = writer.ok(
        "POST",
        "/v1/recall",
        {"query": "Acme payment terms", "scope": "root.north", "kinds": ["fact"], "as_of": "2026-03-10T00:00:00Z"},
    )
    assert {r["fact"]["value"] for r in then["results"] if r["tier"] == "raw" and r["fact"]["entity"] == "Acme"} == {
        "30 days"
    }
    # And the south scope, not asked for, still waits for its run
    south = writer.ok("POST", "/v1/recall", {"query": "Acme payment terms", "scope": "root.south", "kinds": ["fact"]})
    assert {r["fact"]["value"] for r in south["results"] if r["tier"] == "raw" and r["fact"]["entity"] == "Acme"} == {
        "30 days"
    }


def test_unknown_runs_and_other_tenants_runs_are_404(writer: Api) -> None:
    remember_related(writer, "14 days", day=5)
    run = run_to_end(writer)
    secret, _ = bootstrap.current().keys.create("globex", "spy", ["reader"])
    assert writer.as_key(secret).get(f"/v1/consolidations/{run['run_id']}").status_code == 404
    assert writer.get("/v1/consolidations/run_nope").status_code == 404


def test_the_schedule_starts_one_run_per_tenant_with_work(writer: Api) -> None:
    remember_related(writer, "7 days", day=9)
    out = consolidate_function.schedule_handler({}, LocalContext("consolidate-schedule"))
    assert [r["tenant"] for r in out["runs"]] == ["default"] and out["runs"][0]["scopes"] == 2
