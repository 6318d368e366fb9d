"""Curation, structure, the change feed, erasure and the gateway's own answers, through the deployed shape."""

from __future__ import annotations

import pytest

from mneme.adapters.dynamo.store import DynamoRecordStore
from mneme.adapters.dynamo.structure import DynamoStructure
from tests.cloud.conftest import Cloud
from tests.cloud.deployment import aws_client
from tests.support.legacy import forget_sessions


def key(cloud: Cloud, admin: str, principal: str, *roles: str) -> str:
    response = cloud.api("POST", "/v1/keys", {"principal": principal, "roles": list(roles)}, key=admin)
    assert response.status == 201, str(response)
    return str(response.json()["api_key"])


def headers(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("<!-- ") and "priority" in line]


def test_review_approve_and_reject(cloud: Cloud, admin: str) -> None:
    writer, approver = key(cloud, admin, "bot", "writer"), key(cloud, admin, "rita", "approver")
    proposed = cloud.api("POST", "/v1/memories", {"scope": "root", "key": "tone", "body": "Be brief."}, key=writer)
    assert proposed.status == 201, str(proposed)
    assert proposed.json()["status"] == "pending"
    memory_id = proposed.json()["memory_id"]
    own = cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=writer).body
    assert next(h for h in headers(own) if "key: tone" in h).endswith("| pending -->")
    assert not [
        h for h in headers(cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=approver).body) if "tone" in h
    ]

    queue = cloud.api("GET", "/v1/reviews", key=approver)
    assert queue.status == 200, str(queue)
    assert memory_id in queue.body
    approved = cloud.api("POST", f"/v1/memories/{memory_id}/approve", {}, key=approver)
    assert approved.status == 200, str(approved)
    assert approved.json()["status"] == "published"
    bundle = cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=approver).body
    assert "Be brief." in bundle and not [h for h in headers(bundle) if h.endswith("| pending -->")]

    second = cloud.api("POST", "/v1/memories", {"scope": "root", "key": "slang", "body": "Use slang."}, key=writer)
    rejected = cloud.api(
        "POST", f"/v1/memories/{second.json()['memory_id']}/reject", {"reason": "not our voice"}, key=approver
    )
    assert rejected.status == 200, str(rejected)
    assert rejected.json()["status"] == "archived"  # a rejected new memory is archived, never published
    assert "Use slang." not in cloud.api("POST", "/v1/retrieve", {"path": "root"}, key=writer).body
    rejected_history = cloud.api("GET", f"/v1/memories/{second.json()['memory_id']}/history", key=approver)
    assert rejected_history.status == 200 and "not our voice" in rejected_history.body, str(rejected_history)
    history = cloud.api("GET", f"/v1/memories/{memory_id}/history", key=approver)
    assert history.status == 200 and len(history.json()["history"]) >= 2, str(history)


def test_a_structure_draft_is_previewed_then_published(cloud: Cloud, admin: str) -> None:
    for path in ("root.acme.vat", "root.globex"):
        assert cloud.api("POST", "/v1/scopes", {"path": path, "parents": True}, key=admin).status == 201
    memory = {"scope": "root.acme.vat", "key": "vat-policy", "body": "Acme files quarterly."}
    assert cloud.api("POST", "/v1/memories", memory, key=admin).status == 201
    draft = cloud.api(
        "POST",
        "/v1/structure/drafts",
        {"operations": [{"op": "move", "path": "root.acme.vat", "new_parent": "root.globex"}]},
        key=admin,
    )
    assert draft.status == 201, str(draft)
    body = draft.json()
    assert "root.globex.vat" in draft.body  # the preview names the new path
    fetched = cloud.api("GET", f"/v1/structure/drafts/{body['draft_id']}", key=admin)
    fingerprint = body["preview"]["fingerprint"]
    assert fetched.status == 200 and fetched.json()["preview"]["fingerprint"] == fingerprint, str(fetched)
    published = cloud.api(
        "POST", f"/v1/structure/drafts/{body['draft_id']}/publish", {"fingerprint": fingerprint}, key=admin
    )
    assert published.status == 200, str(published)
    moved = cloud.api("POST", "/v1/retrieve", {"path": "root.acme.vat"}, key=admin)  # the old path: an alias
    assert moved.status == 200, str(moved)
    assert "<!-- scoped: root.globex.vat | priority: 9 | key: vat-policy -->" in moved.body


def test_the_change_feed_pages_without_gaps_or_repeats(cloud: Cloud, admin: str) -> None:
    assert cloud.api("POST", "/v1/scopes", {"path": "root.feed", "parents": True}, key=admin).status == 201
    items = [{"scope": "root.feed", "content": f"Observation number {i} about the feed."} for i in range(5)]
    written = cloud.api("POST", "/v1/remember", {"items": items}, key=admin)
    assert written.status == 201, str(written)
    cloud.later(minutes=1)  # past the feed's settle horizon
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(20):
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = cloud.api("GET", "/v1/changes", key=admin, query=query)
        assert page.status == 200, str(page)
        seen += [change["id"] for change in page.json()["changes"]]
        cursor = page.json()["next_cursor"]
        if not page.json()["has_more"]:
            break
    assert len(seen) == len(set(seen))
    assert set(written.json()["episode_ids"]) <= set(seen)
    tampered = cloud.api("GET", "/v1/changes", key=admin, query={"cursor": (cursor or "x")[:-2] + "zz"})
    assert tampered.status == 400, str(tampered)


def test_erasure_counts_then_deletes_a_subtree_for_good(cloud: Cloud, admin: str) -> None:
    assert cloud.api("POST", "/v1/scopes", {"path": "root.gone.deep", "parents": True}, key=admin).status == 201
    items = [{"scope": "root.gone.deep", "content": "Quokka invoices are paid in kind."}]
    episode_id = cloud.api("POST", "/v1/remember", {"items": items}, key=admin).json()["episode_ids"][0]
    dry = cloud.api("DELETE", "/v1/scopes", key=admin, query={"path": "root.gone"})
    assert dry.status == 200, str(dry)
    assert dry.json()["dry_run"] is True
    recall = {"query": "quokka invoices", "scope": "root.gone"}
    assert [r["id"] for r in cloud.api("POST", "/v1/recall", recall, key=admin).json()["results"]] == [episode_id]
    erased = cloud.api("DELETE", "/v1/scopes", key=admin, query={"path": "root.gone", "dry_run": "false"})
    assert erased.status == 200, str(erased)
    assert erased.json()["counts"] == dry.json()["counts"]
    assert cloud.api("POST", "/v1/retrieve", {"path": "root.gone.deep"}, key=admin).status == 404
    everywhere = cloud.api("POST", "/v1/recall", {"query": "quokka invoices"}, key=admin)
    assert everywhere.status == 200 and everywhere.json()["results"] == [], str(everywhere)


def test_the_gateway_answers_in_mnemes_error_shape(cloud: Cloud, admin: str) -> None:
    missing = cloud.api("POST", "/v1/retrieve", {"path": "root"})
    assert (missing.status, missing.error_code, missing.function) == (401, "unauthorized", None)
    malformed = cloud.api("POST", "/v1/retrieve", {"path": "root"}, headers={"Authorization": "Basic abc"})
    assert (malformed.status, malformed.error_code) == (401, "unauthorized")
    before = len(cloud.deployment.invocations)
    unknown = cloud.api("POST", "/v1/retrieve", {"path": "root"}, key="mnk_not-a-key")
    assert (unknown.status, unknown.error_code) == (401, "unauthorized")
    # a Deny, not an exception: no Lambda error for the authorizer-errors alarm to page on
    (looked_up,) = [i for i in cloud.deployment.invocations[before:] if i.function == "authorizer"]
    assert looked_up.error is None and looked_up.payload["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert cloud.api("GET", "/v1/nowhere", key=admin).error_code == "route_not_found"
    reader = key(cloud, admin, "ro", "reader")
    forbidden = cloud.api("PUT", "/v1/layers", {"layers": {"1": "clients"}}, key=reader)
    assert (forbidden.status, forbidden.function) == (403, "curate"), str(forbidden)


def test_a_revoked_key_is_refused_once_the_authorizer_cache_expires(cloud: Cloud, admin: str) -> None:
    doomed = key(cloud, admin, "temp", "reader")
    assert cloud.api("GET", "/v1/scopes", key=doomed).status == 200
    key_id = next(k for k in cloud.api("GET", "/v1/keys", key=admin).json()["keys"] if k["principal"] == "temp")
    assert cloud.api("POST", f"/v1/keys/{key_id['key_id']}/revoke", {}, key=admin).status == 200
    assert cloud.api("GET", "/v1/scopes", key=doomed).status == 200  # the cached Allow (docs/deploy.md)
    (authorizer,) = cloud.deployment.template.of_type("AWS::ApiGateway::Authorizer").values()
    cloud.gateway.now += authorizer["Properties"]["AuthorizerResultTtlInSeconds"] + 1
    refused = cloud.api("GET", "/v1/scopes", key=doomed)
    assert (refused.status, refused.error_code) == (401, "key_revoked"), str(refused)


def test_recall_records_what_a_session_was_given_within_its_narrow_write_grant(cloud: Cloud, admin: str) -> None:
    """recall may write only delivered-session markers (a `dynamodb:LeadingKeys` condition on its role): the
    second recall of a session collapses what the first delivered, and every write it made was allowed."""
    assert cloud.api("POST", "/v1/scopes", {"path": "root.delta", "parents": True}, key=admin).status == 201
    items = [{"scope": "root.delta", "content": "Walrus deliveries arrive on Tuesdays."}]
    assert cloud.api("POST", "/v1/remember", {"items": items}, key=admin).status == 201
    ask = {"query": "walrus deliveries", "session_id": "chat-1", "delta": True}
    first = cloud.api("POST", "/v1/recall", ask, key=admin)
    assert first.status == 200, str(first)
    second = cloud.api("POST", "/v1/recall", ask, key=admin)
    assert second.status == 200, str(second)
    assert "already loaded" in second.json()["context"]
    writes = [
        c
        for i in cloud.deployment.invocations
        if i.function == "recall"
        for c in i.calls
        if c.request.action in ("dynamodb:PutItem", "dynamodb:BatchWriteItem")
    ]
    assert writes and all(c.decision.allowed for c in writes)
    assert all("#DELIVERED#" in key for c in writes for key in c.request.context["dynamodb:LeadingKeys"])


def test_a_reply_remembered_alone_is_found_by_the_question_before_it(cloud: Cloud, admin: str) -> None:
    """remember finds a turn's predecessors in its session (GSI4 of the deployed table) within its role, and
    the reply, which shares no word with the question, is indexed with them."""
    assert cloud.api("POST", "/v1/scopes", {"path": "root.chat", "parents": True}, key=admin).status == 201
    turn = {"scope": "root.chat", "session_id": "call-7", "metadata": {"speaker": "Tobias"}}
    asked = {**turn, "content": "Which colour did you paint the hallway?", "occurred_at": "2025-05-01T10:00:00Z"}
    reply = {**turn, "content": "Sage green, and the trim white.", "occurred_at": "2025-05-01T10:01:00Z"}
    assert cloud.api("POST", "/v1/remember", asked, key=admin).status == 201
    answered = cloud.api("POST", "/v1/remember", reply, key=admin)
    assert answered.status == 201, str(answered)
    found = cloud.api("POST", "/v1/recall", {"query": "hallway paint", "scope": "root.chat"}, key=admin)
    assert found.status == 200, str(found)
    hits = {r["content"]: r["scores"]["bm25"] for r in found.json()["results"]}
    assert hits.get("Sage green, and the trim white.", 0) > 0
    calls = [c for i in cloud.deployment.invocations if i.function == "remember" for c in i.calls]
    assert any(c.request.action == "dynamodb:Query" for c in calls)
    assert all(c.decision.allowed for c in calls)


def test_a_resumed_publish_rebuilds_the_index_and_gives_older_turns_their_session_within_curates_role(
    cloud: Cloud, admin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish the curate function finishes after a crash rebuilds the tenant's index from the table, and
    that rebuild first gives episodes stored before GSI4 their session keys (a transaction of UpdateItems,
    within curate's role), so a reply is indexed with the question said before it."""
    for path in ("root.chat", "root.old"):
        assert cloud.api("POST", "/v1/scopes", {"path": path, "parents": True}, key=admin).status == 201
    turn = {"scope": "root.chat", "session_id": "call-9", "metadata": {"speaker": "Tobias"}}
    asked = {**turn, "content": "Which colour did you paint the hallway?", "occurred_at": "2025-05-01T10:00:00Z"}
    reply = {**turn, "content": "Sage green, and the trim white.", "occurred_at": "2025-05-01T10:01:00Z"}
    said = cloud.api("POST", "/v1/remember", asked, key=admin)
    assert said.status == 201, str(said)
    table_id, _ = cloud.deployment.template.one("AWS::DynamoDB::Table")
    table = DynamoRecordStore(cloud.deployment.template.ref(table_id), client=aws_client("dynamodb"))
    forget_sessions(table, "acme", [said.json()["episode_id"]])  # as stored before GSI4 existed
    assert cloud.api("POST", "/v1/remember", reply, key=admin).status == 201

    def bm25_of_reply() -> float:
        found = cloud.api("POST", "/v1/recall", {"query": "hallway paint", "scope": "root.chat"}, key=admin)
        assert found.status == 200, str(found)
        return float({r["content"]: r["scores"]["bm25"] for r in found.json()["results"]}.get(reply["content"], 0))

    assert bm25_of_reply() == 0  # indexed without the question it answers
    move = {"operations": [{"op": "move", "path": "root.old", "new_parent": "root.chat"}]}
    draft = cloud.api("POST", "/v1/structure/drafts", move, key=admin).json()
    publish = f"/v1/structure/drafts/{draft['draft_id']}/publish"
    fingerprint = {"fingerprint": draft["preview"]["fingerprint"]}
    monkeypatch.setattr(DynamoStructure, "fail_after_step", 1)  # the function dies part-way through
    assert cloud.api("POST", publish, fingerprint, key=admin).status >= 500
    monkeypatch.setattr(DynamoStructure, "fail_after_step", None)
    before = len(cloud.deployment.invocations)

    published = cloud.api("POST", publish, fingerprint, key=admin)  # finishes it, then rebuilds the index

    assert published.status == 200, str(published)
    calls = [c for i in cloud.deployment.invocations[before:] if i.function == "curate" for c in i.calls]
    keys = [(c.request.action, c.request.context.get("dynamodb:LeadingKeys")) for c in calls]
    assert ("dynamodb:UpdateItem", ("T#acme#EPISODES",)) in keys  # the backfill's (in a transaction)
    assert all(c.decision.allowed for c in calls)
    assert bm25_of_reply() > 0


def test_the_index_repair_schedule_runs_within_its_role(cloud: Cloud, admin: str) -> None:
    assert cloud.api("POST", "/v1/scopes", {"path": "root.repair", "parents": True}, key=admin).status == 201
    items = [{"scope": "root.repair", "content": "Narwhal shipments need a signature."}]
    assert cloud.api("POST", "/v1/remember", {"items": items}, key=admin).status == 201
    tick = cloud.fire_schedule("index-repair")
    assert tick.error is None, tick.error
    assert tick.calls and all(c.decision.allowed for c in tick.calls)


def test_the_console_is_served_by_curate_without_a_key_and_its_api_calls_still_need_one(
    cloud: Cloud, admin: str
) -> None:
    # The page and its files: no Authorization header, answered by the curate function under the policy
    for path, kind in (("/console", "text/html"), ("/console/console.js", "text/javascript")):
        page = cloud.api("GET", path)
        assert page.status == 200 and page.function == "curate", page
        assert page.headers["Content-Type"].startswith(kind)
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert cloud.api("GET", "/console/admin.key").status == 404
    # What the page calls first still goes through the authorizer
    assert cloud.api("GET", "/v1/me").status == 401
    me = cloud.api("GET", "/v1/me", key=key(cloud, admin, "rita", "reader"))
    assert me.status == 200 and me.json()["roles"] == ["reader"]


def test_recall_finds_a_paraphrase_through_the_collections_knn(cloud: Cloud, admin: str) -> None:
    """The deployed hybrid recall: a query sharing no word with an episode finds it by the collection's
    kNN (not BM25, and not the fresh tail: the clock is past the index's visibility lag)."""
    assert cloud.api("POST", "/v1/scopes", {"path": "root.house", "parents": True}, key=admin).status == 201
    items = [
        {"scope": "root.house", "content": "The boiler in the basement broke down and we had no hot water."},
        {"scope": "root.house", "content": "Invoices are paid on the last Friday of each month."},
    ]
    remembered = cloud.api("POST", "/v1/remember", {"items": items}, key=admin)
    assert remembered.status == 201, str(remembered)
    boiler = remembered.json()["episode_ids"][0]
    cloud.later(minutes=10)  # past fresh_window_seconds: only the collection's own search can find it

    ask = {"query": "heating failure, showers icy cold", "scope": "root.house", "explain": True}
    found = cloud.api("POST", "/v1/recall", ask, key=admin)

    assert found.status == 200, str(found)
    answer = found.json()
    assert answer["retrieval_path"] == "hybrid", answer["retrieval_path"]
    (search,) = [s for s in answer["explain"]["stages"] if s["stage"] == "search"]
    assert search["error"] is None and search["channels"]["vector"] >= 1, search
    assert search["channels"].get("fresh", 0) == 0, search
    top = answer["results"][0]
    assert top["id"] == boiler, answer["results"]
    assert top["scores"]["bm25"] == 0 and top["scores"]["vector"] > 0.25, top["scores"]


def test_a_rename_that_moves_tagged_guidance_goes_through_a_draft(cloud: Cloud, admin: str) -> None:
    assert cloud.api("PUT", "/v1/layers", {"layers": {"1": "clients"}}, key=admin).status == 200
    assert cloud.api("POST", "/v1/scopes", {"path": "root.northwind.vat", "parents": True}, key=admin).status == 201
    for client, currency in (("northwind", "USD"), ("contoso", "EUR")):
        memory = {"tag": f"clients={client}", "key": f"{client}-billing", "body": f"Invoice in {currency} only."}
        assert cloud.api("POST", "/v1/memories", memory, key=admin).status == 201
    rename = {"path": "root.northwind", "new_path": "root.contoso"}
    refused = cloud.api("POST", "/v1/scopes/rename", rename, key=admin)
    assert refused.status == 409 and refused.json()["error"]["code"] == "draft_required", str(refused)
    dry = cloud.api("POST", "/v1/scopes/rename", {**rename, "dry_run": True}, key=admin)
    assert dry.status == 200 and dry.json()["preview"]["path_changes"][0] == ["root.northwind", "root.contoso"]
    draft = cloud.api(
        "POST", "/v1/structure/drafts", {"operations": refused.json()["error"]["details"]["operations"]}, key=admin
    )
    assert draft.status == 201 and draft.json()["preview"] == dry.json()["preview"], str(draft)
    published = cloud.api(
        "POST",
        f"/v1/structure/drafts/{draft.json()['draft_id']}/publish",
        {"fingerprint": draft.json()["preview"]["fingerprint"]},
        key=admin,
    )
    assert published.status == 200, str(published)
    bundle = cloud.api("POST", "/v1/retrieve", {"path": "root.northwind.vat"}, key=admin).body  # through the alias
    assert "Invoice in EUR only." in bundle and "USD" not in bundle and "root.contoso.vat" in bundle
