"""remember → recall through the local server, with the real embedding model and the embedded index."""

from __future__ import annotations

from pathlib import Path

import pytest

from mneme import bootstrap, cli
from mneme.services.context_pack import estimate_tokens
from tests.integration.helpers import Api

CITIES = ["Leeds", "York", "Hull", "Bradford", "Sheffield", "Wakefield", "Harrogate", "Halifax"]
ITEMS = ["oak doors", "sash windows", "staircases", "kitchen units", "skirting boards"]


def episode(i: int) -> dict[str, object]:
    city, item = CITIES[i % len(CITIES)], ITEMS[(i // len(CITIES)) % len(ITEMS)]
    return {
        "scope": f"root.orders.{city.lower()}",
        "content": f"Order {1000 + i}: {item} for a customer in {city}, delivery week {i % 52 + 1}.",
        "metadata": {"order": 1000 + i, "city": city},
        "session_id": f"import-{i // 100}",
        "occurred_at": f"2026-{i % 12 + 1:02d}-{i % 28 + 1:02d}T10:00:00Z",
        "create_scope": True,
        "idempotency_key": f"order-{1000 + i}",
    }


@pytest.fixture
def writer(server: str, home: Path) -> Api:
    key_file, _ = cli.ensure_first_run()
    admin = Api(server, key_file.read_text().strip())
    return admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "importer", "roles": ["writer"]})["api_key"])


@pytest.fixture
def thousand(writer: Api) -> list[str]:
    ids: list[str] = []
    for start in range(0, 1000, 100):
        body = writer.ok("POST", "/v1/remember", {"items": [episode(i) for i in range(start, start + 100)]}, 201)
        assert all(item["created"] and item["indexed"] for item in body["items"])
        ids += body["episode_ids"]
    return ids


def test_a_thousand_episodes_in_batches_are_recalled_with_explain_and_a_budgeted_pack(
    writer: Api, thousand: list[str]
) -> None:
    assert len(set(thousand)) == 1000
    # When an agent asks about one order by number
    body = writer.ok("POST", "/v1/recall", {"query": "order 1417 delivery", "explain": True, "limit": 5})
    # Then it comes first, with its metadata unchanged, per-channel scores and an explain trace
    top = body["results"][0]
    assert top["content"] == episode(417)["content"] and top["metadata"] == episode(417)["metadata"]
    assert top["scope"] == "root.orders.york" and set(top["scores"]) >= {"vector", "lexical"}
    assert body["retrieval_path"] == "hybrid"
    stages = {stage["stage"]: stage for stage in body["explain"]["stages"]}
    channels = stages["search"]["channels"]
    assert channels["vector"] > 0 and channels["lexical"] > 0 and stages["select"]["out"] == 5
    # And a budget shrinks the pack without cutting a body
    budgeted = writer.ok(
        "POST",
        "/v1/recall",
        {"query": "oak doors for York", "limit": 20, "disclosure": {"expand_top": 5, "budget_tokens": 150}},
    )
    assert estimate_tokens(budgeted["context"]) <= 150
    for result in budgeted["results"]:
        if f"### {result['id']}" in budgeted["context"]:
            assert result["content"] in budgeted["context"]


def test_a_retried_batch_writes_nothing_twice(writer: Api, thousand: list[str]) -> None:
    again = writer.ok("POST", "/v1/remember", {"items": [episode(i) for i in range(100)]}, 201)
    assert again["episode_ids"] == thousand[:100] and not any(item["created"] for item in again["items"])
    hits = writer.ok(
        "POST", "/v1/recall", {"query": "Order 1000", "limit": 200, "scoring": {"strictness": "precision"}}
    )["results"]
    assert [r["id"] for r in hits].count(thousand[0]) == 1


def test_subtree_time_and_session_filters_over_http(writer: Api, thousand: list[str]) -> None:
    york = writer.ok("POST", "/v1/recall", {"query": "staircases", "scope": "root.orders.york", "limit": 50})
    assert york["results"] and all(r["scope"] == "root.orders.york" for r in york["results"])
    march = writer.ok(
        "POST",
        "/v1/recall",
        {
            "query": "sash windows",
            "limit": 50,
            "since": "2026-03-01T00:00:00Z",
            "until": "2026-04-01T00:00:00Z",
        },
    )
    assert march["results"] and all(r["occurred_at"].startswith("2026-03") for r in march["results"])
    session = writer.ok("POST", "/v1/recall", {"query": "kitchen units", "session_id": "import-3", "limit": 50})
    assert session["results"] and all(r["session_id"] == "import-3" for r in session["results"])


def test_another_tenant_sees_none_of_it(writer: Api, thousand: list[str]) -> None:
    secret, _ = bootstrap.current().keys.create("globex", "spy", ["admin"])
    spy = writer.as_key(secret)
    spy.ok("POST", "/v1/scopes", {"path": "root.orders.york", "parents": True}, 201)
    for scope in ("root", "root.orders.york"):
        found = spy.ok(
            "POST",
            "/v1/recall",
            {
                "query": "oak doors York order",
                "scope": scope,
                "scoring": {"strictness": "recall"},
                "limit": 200,
            },
        )
        assert found["results"] == []
    assert spy.ok("POST", "/v1/recall", {"ids": thousand[:5]})["results"] == []
    # a path only the other tenant has: for this one nobody has written there, so empty and said so
    unknown = spy.ok("POST", "/v1/recall", {"query": "oak doors", "scope": "root.orders.leeds"})
    assert unknown["results"] == [] and unknown["warnings"] == ["scope_not_found"]
    assert spy.post("/v1/retrieve", {"path": "root.orders.leeds"}).status_code == 404


def test_remember_refuses_bad_batches_atomically(writer: Api) -> None:
    bad = [episode(1), {**episode(2), "tier": "hourly"}]
    response = writer.post("/v1/remember", {"items": bad})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_input"
    missing = writer.post(
        "/v1/remember", {"items": [episode(3), {**episode(4), "scope": "root.x", "create_scope": False}]}
    )
    assert missing.status_code == 404 and missing.json()["error"]["details"]["item"] == 1
    assert (
        writer.ok("POST", "/v1/recall", {"query": "Order 1003", "scoring": {"strictness": "precision"}})["results"]
        == []
    )
