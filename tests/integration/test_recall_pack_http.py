"""Recall and its context pack through the local server: the scope rule, the pack's header and fetch
line under a budget, a truthful fallback trace, facts with their sources' metadata, bounded links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from mneme import bootstrap
from mneme.records import Fact
from mneme.services.recall.hop import LINK_PER_SOURCE
from tests.integration.helpers import Api


def remember(api: Api, content: str, **fields: Any) -> str:
    body = {"scope": "root.acme", "create_scope": True, "content": content, **fields}
    return str(api.ok("POST", "/v1/remember", body, 201)["episode_id"])


def test_local_guidance_outranks_global_and_the_same_guidance_is_shown_once(admin: Api) -> None:
    admin.ok("PUT", "/v1/layers", {"layers": {"1": "teams"}})
    admin.ok("POST", "/v1/scopes", {"path": "root.eng"}, 201)
    same = "Deploys freeze on Fridays after noon."
    local = admin.ok("POST", "/v1/memories", {"scope": "root.eng", "key": "freeze", "body": same}, 201)
    layer = admin.ok("POST", "/v1/memories", {"tag": "teams=*", "key": "freeze", "body": same}, 201)
    glob = admin.ok("POST", "/v1/memories", {"scope": "root", "key": "freeze", "body": f"  {same.upper()} "}, 201)
    other = admin.ok("POST", "/v1/memories", {"scope": "root", "key": "hotfix", "body": "Deploys of hotfixes."}, 201)
    found = admin.ok("POST", "/v1/recall", {"query": "deploys freeze", "explain": True})
    results = {r["id"]: r for r in found["results"]}
    assert set(results) == {local["memory_id"], other["memory_id"]}
    assert (
        results[local["memory_id"]]["scores"]["scope"] == 1.1 and "scope" not in results[other["memory_id"]]["scores"]
    )
    omitted = {o["id"]: o["reason"] for o in found["explain"]["omitted"]}
    assert omitted[layer["memory_id"]] == omitted[glob["memory_id"]] == f"duplicate_of:{local['memory_id']}"


def test_after_a_budget_cut_the_header_counts_what_is_shown_and_fetch_names_the_rest(admin: Api) -> None:
    ids = [remember(admin, f"The Leeds warehouse roof leaked again after rain, report {i}. " * 6) for i in range(3)]
    full = admin.ok("POST", "/v1/recall", {"query": "Leeds warehouse roof leak", "scope": "root.acme"})
    assert "loaded 3 / 3 total related" in full["context"]
    cut = admin.ok(
        "POST",
        "/v1/recall",
        {"query": "Leeds warehouse roof leak", "scope": "root.acme", "disclosure": {"budget_tokens": 80}},
    )
    assert "loaded 0 / 3 total related" in cut["context"] and "### " not in cut["context"]
    fetch = next(line for line in cut["context"].splitlines() if line.startswith("fetch: ids="))
    assert sorted(fetch.removeprefix("fetch: ids=").split(",")) == sorted(ids)
    assert len(cut["results"]) == 3  # the results are all there; the pack says what it shows


def test_the_fallback_trace_says_it_ran_when_the_policy_is_always(admin: Api) -> None:
    episode = remember(admin, "Parking permit renewed for van KX19.")
    query = {"query": "KX19 blue truck depot", "scope": "root.acme", "explain": True}
    scoring = {"strictness": "precision", "fallback": "always"}
    found = admin.ok("POST", "/v1/recall", {**query, "scoring": scoring})
    assert found["results"] == []
    stage = next(s for s in found["explain"]["stages"] if s["stage"] == "fallback")
    assert stage["reconsidered"] == [episode]
    assert found["explain"]["fallback"] == {"policy": "always", "triggered": True, "reason": "always"}
    never = admin.ok("POST", "/v1/recall", {**query, "scoring": {**scoring, "fallback": "never"}})
    assert never["explain"]["fallback"] == {"policy": "never", "triggered": False, "reason": None}


def test_a_fact_carries_the_metadata_its_sources_agree_on(admin: Api) -> None:
    first = remember(admin, "The kiln fires at cone 6.", metadata={"source": "call", "speaker": "Ana"})
    second = remember(admin, "Yes, cone 6 for stoneware.", metadata={"source": "call", "speaker": "Ben"})
    services = bootstrap.current()
    scope_id = services.scopes.resolve("default", "root.acme").scope.scope_id
    now = datetime(2026, 3, 1, tzinfo=UTC)
    summary = "The studio kiln fires stoneware at cone 6."
    fact = Fact(
        tenant="default", fact_id="fa_kiln", scope_id=scope_id, entity="kiln", property="cone", value="6",
        summary=summary, source_episode_ids=[first, second], confidence=0.9, valid_from=now - timedelta(days=1),
        created_at=now, updated_at=now, reinforced_at=now, model_id=services.embedder.model_id,
        vector=services.embedder.embed([summary])[0].tolist(),
    )  # fmt: skip
    services.store.put_facts([fact])
    services.indexer.index_facts([fact])
    [result] = admin.ok("POST", "/v1/recall", {"query": "kiln cone stoneware", "kinds": ["fact"]})["results"]
    assert result["id"] == "fa_kiln" and result["metadata"] == {"source": "call"}  # the speakers differ
    assert sorted(s["metadata"]["speaker"] for s in result["sources"]) == ["Ana", "Ben"]


def test_a_weak_hit_brings_in_only_the_closest_of_its_look_alikes(admin: Api) -> None:
    products = ["kettle", "toaster", "blender", "microwave", "fridge", "oven", "dishwasher", "iron", "fan", "heater"]
    tickets = [
        f"Ticket {200 + i}: the {p} arrived with a dent in the side panel and a torn box."
        for i, p in enumerate(products)
    ]
    items = [{"scope": "root.support", "create_scope": True, "content": text} for text in tickets]
    ids = admin.ok("POST", "/v1/remember", {"items": items}, 201)["episode_ids"]
    found = admin.ok("POST", "/v1/recall", {"query": "kettle refund request", "scope": "root.support", "explain": True})
    admit = next(s for s in found["explain"]["stages"] if s["stage"] == "admit")
    assert set(admit["linked"].values()) == {ids[0]} and len(admit["linked"]) == LINK_PER_SOURCE
    linked = [r for r in found["results"] if "linked" in r["scores"]]
    others = {o["id"] for o in found["explain"]["omitted"]}
    assert len(linked) == LINK_PER_SOURCE and len(others) == len(products) - 1 - LINK_PER_SOURCE
    assert min(r["scores"]["linked"] for r in linked) >= max(  # the closest to the hit came in
        r["scores"].get("linked", 0) for r in found["results"] if r["id"] not in admit["linked"]
    )
    assert found["results"][0]["id"] == ids[0]


def test_a_turn_with_no_content_of_its_own_never_outranks_one_that_has_it(admin: Api) -> None:
    others = [f"Note {i}: the {w} meeting moved to the afternoon." for i, w in enumerate(["budget", "garden", "roof"])]
    turns = [
        ("Customer", "Was my kettle refund approved?"),
        ("Agent", "Sure, let me check."),  # indexed with the question before it: its words, none of its own
        ("Agent", "Yes: our finance team approved the refund for the kettle on Monday morning, and the thirty "
         "euros should be back on the card you paid with within five working days, together with the voucher."),
    ]  # fmt: skip
    items = [{"scope": "root.other", "create_scope": True, "content": text} for text in others] + [
        {
            "scope": "root.support",
            "create_scope": True,
            "session_id": "t-4411",
            "occurred_at": f"2026-03-01T10:0{i}:00Z",
            "content": text,
            "metadata": {"speaker": who},
        }
        for i, (who, text) in enumerate(turns)
    ]
    admin.ok("POST", "/v1/remember", {"items": items}, 201)
    lexical = {"alpha": 0.0, "beta": 1.0}  # the context's words alone decide: the case the rule is for
    query = {"query": "was the kettle refund approved", "scope": "root.support", "scoring": lexical}
    found = [r["content"] for r in admin.ok("POST", "/v1/recall", query)["results"]]
    assert found == [turns[2][1], turns[0][1], turns[1][1]]  # found through its context, ranked after both
    # (the answer above the question: a turn that ends with a question says less, `scores.substance`)
