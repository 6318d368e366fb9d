"""Episodes and facts as addressable records, over HTTP on both record stores: get, list (session, time, metadata,
cursor), forget (writer for episodes, approver for facts) with the index, the feed and what derives settled,
correct a fact at its version; recall's metadata filter; roles and tenancy on every new route."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mneme.models import Role
from tests.integration.helpers import Api
from tests.integration.stacks import STORES, Served, served

T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def remember(api: Api, content: str, minutes: int = 0, **fields: Any) -> str:
    item = {"scope": "root.chat", "create_scope": True, "content": content,
            "occurred_at": (T + timedelta(minutes=minutes)).isoformat(), **fields}  # fmt: skip
    return str(api.ok("POST", "/v1/remember", item, 201)["episode_id"])


def recall(api: Api, query: str, **fields: Any) -> list[str]:
    body = {"query": query, "limit": 50, **fields}
    return [r["id"] for r in api.ok("POST", "/v1/recall", body)["results"]]


def consolidate(stack: Served) -> None:
    stack.clock.advance(minutes=5)  # past the settle window
    run = stack.admin.ok("POST", "/v1/consolidate", {}, 202)
    assert stack.admin.ok("GET", f"/v1/consolidations/{run['run_id']}")["status"] == "succeeded"


def test_get_and_list_episodes_with_filters_and_a_signed_cursor(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    ids = []
    for n in range(5):
        stack.clock.advance(seconds=1)
        ids.append(remember(writer, f"note {n} about the garden", n, session_id="s1" if n < 3 else "s2",
                            metadata={"user": "alice" if n % 2 else "bob", "n": n}))  # fmt: skip
    reader = stack.key("viewer", Role.reader)

    one = reader.ok("GET", f"/v1/episodes/{ids[1]}")
    assert (one["content"], one["scope"], one["metadata"], one["facts"]) == ("note 1 about the garden", "root.chat",
                                                                             {"user": "alice", "n": 1}, [])  # fmt: skip
    everything = reader.ok("GET", "/v1/episodes?scope=root")
    assert [e["id"] for e in everything["episodes"]] == ids[::-1]  # newest remembered first
    assert everything["has_more"] is False and everything["next_cursor"] is None

    first = reader.ok("GET", "/v1/episodes?scope=root.chat&limit=2")
    second = reader.ok("GET", f"/v1/episodes?scope=root.chat&limit=2&cursor={first['next_cursor']}")
    third = reader.ok("GET", f"/v1/episodes?scope=root.chat&limit=2&cursor={second['next_cursor']}")
    paged = [e["id"] for page in (first, second, third) for e in page["episodes"]]
    assert paged == ids[::-1] and third["has_more"] is False

    def listed(query: str) -> list[str]:
        return [e["id"] for e in reader.ok("GET", f"/v1/episodes?{query}")["episodes"]]

    assert listed("session_id=s2") == [ids[4], ids[3]]
    assert listed("metadata.user=alice") == [ids[3], ids[1]]
    assert listed("metadata.user=alice&metadata.user=bob&metadata.n=4") == [ids[4]]  # a key repeated: any of
    since, until = (T + timedelta(minutes=1)).isoformat(), (T + timedelta(minutes=3)).isoformat()
    assert listed(f"since={since.replace('+', '%2B')}&until={until.replace('+', '%2B')}") == [ids[2], ids[1]]

    tampered = first["next_cursor"][:-2] + ("AA" if not first["next_cursor"].endswith("AA") else "BB")
    bad = reader.get(f"/v1/episodes?cursor={tampered}")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_cursor"
    assert reader.get("/v1/episodes?limit=0").status_code == 400
    assert reader.get("/v1/episodes?since=2026-03-01T09:00:00").json()["error"]["code"] == "invalid_time"
    assert reader.get("/v1/episodes?colour=red").json()["error"]["code"] == "unknown_parameter"
    assert reader.get("/v1/episodes?scope=root.nowhere").status_code == 404
    assert reader.get("/v1/episodes/ep_nope").json()["error"]["code"] == "episode_not_found"


def test_a_list_refuses_an_empty_period_as_recall_does(stack: Served) -> None:
    reader = stack.key("viewer", Role.reader)
    since, until = "2026-03-02T00:00:00%2B00:00", "2026-03-01T00:00:00%2B00:00"
    for path in ("/v1/episodes", "/v1/facts"):
        refused = reader.get(f"{path}?since={since}&until={until}")
        assert refused.status_code == 400 and "empty" in refused.json()["error"]["message"], refused.text
    recalled = reader.call("POST", "/v1/recall", {"query": "x", "since": "2026-03-02T00:00:00Z",
                                                  "until": "2026-03-01T00:00:00Z"})  # fmt: skip
    assert recalled.status_code == 400


def test_a_conversation_lists_in_the_order_its_turns_were_given(stack: Served) -> None:
    # Given three turns sent in one call, at one time (a pasted chat log)
    writer = stack.key("agent", Role.writer)
    turns = [{"name": "Sam", "content": f"garden turn {n}"} for n in range(3)]
    body = {"scope": "root.chat", "create_scope": True, "session_id": "s1", "occurred_at": T.isoformat(),
            "messages": turns}  # fmt: skip
    ids = writer.ok("POST", "/v1/remember", body, 201)["episode_ids"]
    # Then a list shows each turn's place and keeps their order (newest first: the last turn first), page by page
    listed = writer.ok("GET", "/v1/episodes?scope=root.chat&session_id=s1")["episodes"]
    assert [(e["id"], e["sequence"]) for e in listed] == [(ids[2], 2), (ids[1], 1), (ids[0], 0)]
    paged, cursor = [], ""
    for _ in range(3):
        page = writer.ok("GET", f"/v1/episodes?scope=root.chat&limit=1{cursor}")
        paged += [e["id"] for e in page["episodes"]]
        cursor = f"&cursor={page['next_cursor']}" if page["has_more"] else ""
    assert paged == ids[::-1] and not cursor
    # And recall's results carry it too
    found = writer.ok("POST", "/v1/recall", {"query": "garden turn", "scope": "root.chat"})
    assert {r["id"]: r["sequence"] for r in found["results"] if r["kind"] == "episode"} == {
        i: n for n, i in enumerate(ids)
    }


def test_recall_filters_on_metadata_inside_the_search(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    alice = remember(writer, "I am vegetarian and love lentils", metadata={"user": "alice"})
    bob = remember(writer, "I am vegetarian since last year", 1, metadata={"user": "bob", "tags": ["x"]})
    carol = remember(writer, "I am vegetarian, mostly", 2, metadata={"user": "carol", "vip": True})
    menu = "vegetarian vegetarian vegetarian menu"  # better matches than alice's, more than the candidates of limit 1
    noise = [{"scope": "root.chat", "content": f"{menu} {n}", "metadata": {"user": "zed"}} for n in range(80)]
    writer.ok("POST", "/v1/remember", {"items": noise}, 201)

    assert recall(writer, "vegetarian", metadata={"user": "alice"}, limit=1) == [alice]  # filtered inside the search
    assert recall(writer, "vegetarian", metadata={"user": "alice"}) == [alice]
    assert set(recall(writer, "vegetarian", metadata={"user": ["alice", "bob"]})) == {alice, bob}
    assert recall(writer, "vegetarian", metadata={"vip": True}) == [carol]
    assert recall(writer, "vegetarian", metadata={"user": "alice", "vip": True}) == []
    assert recall(writer, "vegetarian", metadata={"user": "nobody"}) == []
    for bad in ({"user": {"nested": 1}}, {}, {"user": []}, {f"k{i}": 1 for i in range(17)}, "alice"):
        answer = writer.post("/v1/recall", {"query": "vegetarian", "metadata": bad})
        assert answer.status_code == 400, bad
        assert "metadata" in answer.text


def test_forget_an_episode_removes_it_everywhere_and_settles_its_facts(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    said = [remember(writer, f"Maya's favourite colour is teal, ticket {n}.", n, session_id="chat") for n in range(3)]
    after = remember(writer, "And the trim white.", 3, session_id="chat")
    consolidate(stack)
    [fact] = [f for f in writer.ok("GET", "/v1/facts?scope=root.chat")["facts"] if f["tier"] == "raw"]
    assert set(fact["source_episode_ids"]) == set(said)
    rollups = [f for f in writer.ok("GET", "/v1/facts?scope=root.chat")["facts"] if f["tier"] != "raw"]
    assert rollups and all(said[0] in r["source_episode_ids"] for r in rollups)
    cursor = writer.ok("GET", "/v1/changes")["next_cursor"]

    forgot = writer.ok("DELETE", f"/v1/episodes/{said[0]}?reason=the%20user%20asked")

    settled = {s["id"]: s["action"] for s in forgot["settled"]}
    assert settled[fact["id"]] == "regrounded" and all(settled[r["id"]] == "rebuilt" for r in rollups)
    assert said[0] not in recall(writer, "Maya favourite colour teal")
    gone = writer.get(f"/v1/episodes/{said[0]}").json()["error"]
    assert gone["code"] == "episode_forgotten" and gone["details"]["reason"] == "the user asked"
    assert gone["details"]["forgotten_by"] == "agent"
    assert said[0] not in [e["id"] for e in writer.ok("GET", "/v1/episodes")["episodes"]]
    feed = writer.ok("GET", f"/v1/changes?cursor={cursor}")["changes"]
    assert {"kind": "episode", "id": said[0], "deleted": True, "record": None}.items() <= next(
        c for c in feed if c["id"] == said[0]
    ).items()
    regrounded = writer.ok("GET", f"/v1/facts/{fact['id']}")
    assert set(regrounded["source_episode_ids"]) == set(said[1:]) and regrounded["stale"] is False
    assert regrounded["history"][-1]["reason"].startswith("regrounded")
    assert said[0] not in stack.services.index.doc_ids("acme")
    assert after in stack.services.index.doc_ids("acme")  # the next turn, indexed again without it

    for n in (1, 2):  # the last sources go: the claim is retracted and the roll-ups with it
        last = writer.ok("DELETE", f"/v1/episodes/{said[n]}")
    assert {s["id"]: s["action"] for s in last["settled"]}[fact["id"]] == "retracted"
    assert writer.get(f"/v1/facts/{fact['id']}").json()["error"]["code"] == "fact_forgotten"
    assert writer.get(f"/v1/episodes/{said[0]}").status_code == 404
    again = writer.call("DELETE", f"/v1/episodes/{said[0]}")
    assert again.status_code == 404 and again.json()["error"]["code"] == "episode_forgotten"


def test_a_forgotten_turn_leaves_no_word_in_the_roll_ups_rebuilt_without_it(stack: Served) -> None:
    """'Forget that I am vegetarian': the day's and the week's digests are rebuilt from the turns left, so no
    word only the forgotten turn said stays in a summary, a search or the roll-up's own text."""
    writer = stack.key("agent", Role.writer)
    chat = {"session_id": "dinner", "metadata": {"speaker": "Ines"}}
    said = remember(writer, "I am vegetarian and I cook lentils every Sunday.", 0, **chat)
    for n, text in enumerate(["The dinner party is on Saturday at the harbour.", "Bring the harbour map."], 1):
        remember(writer, text, n, **chat)
    consolidate(stack)
    rollups = [f for f in writer.ok("GET", "/v1/facts?scope=root.chat")["facts"] if f["tier"] != "raw"]
    assert rollups and all("Ines is vegetarian." in r["summary"] for r in rollups)  # the day's and the week's claim

    claims = {f["id"] for f in writer.ok("GET", "/v1/facts?scope=root.chat")["facts"] if f["tier"] == "raw"}

    forgot = writer.ok("DELETE", f"/v1/episodes/{said}")

    settled = {s["id"]: s["action"] for s in forgot["settled"]}  # the roll-ups, and "Ines is vegetarian."
    assert settled == {r["id"]: "rebuilt" for r in rollups} | dict.fromkeys(claims, "retracted")
    for rollup in writer.ok("GET", "/v1/facts?scope=root.chat")["facts"]:
        assert not {"vegetarian", "cook", "lentils", "sunday"} & set(rollup["summary"].replace(",", " ").split())
        assert said not in rollup["source_episode_ids"]
    assert "harbour" in writer.ok("GET", f"/v1/facts/{rollups[0]['id']}")["summary"]
    assert not set(recall(writer, "vegetarian lentils", tiers=["daily", "weekly"])) & {r["id"] for r in rollups}


def test_forget_and_correct_a_fact_need_an_approver_and_keep_history(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    for n in range(3):
        remember(writer, f"Acme's billing plan is Basic, ticket {n}.", n, metadata={"customer": "acme"})
    consolidate(stack)
    [fact] = [f for f in writer.ok("GET", "/v1/facts?metadata.customer=acme")["facts"] if f["tier"] == "raw"]
    assert writer.ok("GET", "/v1/facts?metadata.customer=other")["facts"] == []
    approver = stack.key("lead", Role.approver)

    assert writer.call("PATCH", f"/v1/facts/{fact['id']}", {"version": 1, "value": "Premium"}).status_code == 403
    assert writer.call("DELETE", f"/v1/facts/{fact['id']}").status_code == 403
    patch = {"version": fact["version"], "value": "Premium", "reason": "upgraded by phone"}
    corrected = approver.ok("PATCH", f"/v1/facts/{fact['id']}", patch)
    assert (corrected["value"], corrected["version"]) == ("Premium", fact["version"] + 1)
    assert "Premium" in corrected["summary"] and "Basic" not in corrected["summary"]  # the sentence follows
    stale = approver.call("PATCH", f"/v1/facts/{fact['id']}", {**patch, "value": "Gold"})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_version"
    assert approver.call("PATCH", f"/v1/facts/{fact['id']}", {"version": 2}).status_code == 400
    [entry] = approver.ok("GET", f"/v1/facts/{fact['id']}")["history"]
    assert entry["changes"]["value"] == ["Basic", "Premium"] and entry["reason"] == "upgraded by phone"
    assert fact["id"] in recall(approver, "Acme billing plan Premium", kinds=["fact"])

    approver.ok("DELETE", f"/v1/facts/{fact['id']}?reason=wrong")
    assert fact["id"] not in recall(approver, "Acme billing plan Premium", kinds=["fact"])
    assert approver.get(f"/v1/facts/{fact['id']}").json()["error"]["details"]["reason"] == "wrong"


def test_another_tenant_gets_404_and_a_reader_cannot_forget(stack: Served) -> None:
    writer = stack.key("agent", Role.writer)
    episode = remember(writer, "Maya's favourite colour is teal.", metadata={"user": "maya"})
    remember(writer, "Maya's favourite colour is teal, again.", 1)
    consolidate(stack)
    fact = writer.ok("GET", "/v1/facts")["facts"][0]["id"]
    secret, _ = stack.services.keys.create("globex", "intruder", [Role.admin])
    intruder = stack.admin.as_key(secret)
    for method, path in (("GET", f"/v1/episodes/{episode}"), ("DELETE", f"/v1/episodes/{episode}"),
                         ("GET", f"/v1/facts/{fact}"), ("DELETE", f"/v1/facts/{fact}")):  # fmt: skip
        assert intruder.call(method, path).status_code == 404, (method, path)
    assert intruder.call("PATCH", f"/v1/facts/{fact}", {"version": 1, "value": "x"}).status_code == 404
    assert intruder.ok("GET", "/v1/episodes")["episodes"] == []
    assert intruder.ok("GET", "/v1/facts")["facts"] == []
    assert recall(intruder, "Maya colour teal") == []

    reader = stack.key("viewer", Role.reader)
    assert reader.call("DELETE", f"/v1/episodes/{episode}").status_code == 403
    assert reader.call("DELETE", f"/v1/facts/{fact}").status_code == 403
    assert reader.call("PATCH", f"/v1/facts/{fact}", {"version": 1, "value": "x"}).status_code == 403
    assert writer.ok("GET", f"/v1/episodes/{episode}")["id"] == episode
