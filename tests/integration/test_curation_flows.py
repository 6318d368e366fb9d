"""Review, structure drafts and the change feed through the local server."""

from __future__ import annotations

from tests.integration.helpers import Api


def key(admin: Api, principal: str, role: str) -> Api:
    return admin.as_key(admin.ok("POST", "/v1/keys", {"principal": principal, "roles": [role]})["api_key"])


def test_the_full_review_story(admin: Api) -> None:
    admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    wendy, omar, alice = key(admin, "wendy", "writer"), key(admin, "omar", "writer"), key(admin, "alice", "approver")
    # A writer proposes; only she sees it, marked pending
    proposed = wendy.ok(
        "POST", "/v1/memories", {"scope": "root.acme", "key": "vat", "body": "Acme is on flat rate."}, 201
    )
    assert proposed["status"] == "pending"
    assert "<!-- scoped: root.acme | priority: 6 | key: vat | pending -->" in wendy.ok(
        "POST", "/v1/retrieve", {"path": "root.acme"}
    )
    assert "key: vat" not in omar.ok("POST", "/v1/retrieve", {"path": "root.acme"})
    # The approver sees it in the queue and approves
    queue = alice.ok("GET", "/v1/reviews")["queue"]
    assert [(i["kind"], i["author"], i["key"]) for i in queue] == [("create", "wendy", "vat")]
    assert wendy.post(f"/v1/memories/{proposed['memory_id']}/approve", {}).status_code == 403
    alice.ok("POST", f"/v1/memories/{proposed['memory_id']}/approve", {})
    for reader in (wendy, omar):
        bundle = reader.ok("POST", "/v1/retrieve", {"path": "root.acme"})
        assert "<!-- scoped: root.acme | priority: 6 | key: vat -->\n```\nAcme is on flat rate.\n```" in bundle
    # A writer's edit of published work is a revision; rejected with a reason she can read
    edited = omar.ok("PATCH", f"/v1/memories/{proposed['memory_id']}", {"body": "Acme is on standard rate."})
    assert edited["pending_revision"]["changes"] == {"body": "Acme is on standard rate."}
    alice.ok("POST", f"/v1/memories/{proposed['memory_id']}/reject", {"reason": "Not confirmed by the client."})
    [mine] = omar.ok("GET", "/v1/reviews?mine=true")["mine"]
    assert (mine["status"], mine["reason"]) == ("rejected", "Not confirmed by the client.")
    history = alice.ok("GET", f"/v1/memories/{proposed['memory_id']}/history")["history"]
    assert [h["action"] for h in history] == ["created", "approved", "revision_rejected"]


def test_a_draft_moves_and_merges_then_old_paths_resolve(admin: Api) -> None:
    for path in ("root.prospects.initech", "root.clients", "root.old-leads.hooli", "root.leads"):
        admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, 201)
    admin.ok("POST", "/v1/memories", {"scope": "root.prospects.initech", "key": "intro", "body": "Met in May."}, 201)
    operations = [
        {"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"},
        {"op": "merge", "path": "root.old-leads", "into": "root.leads"},
    ]
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": operations}, 201)
    preview = draft["preview"]
    assert ["root.prospects.initech", "root.clients.initech"] in preview["path_changes"]
    assert ["root.old-leads.hooli", "root.leads.hooli"] in preview["path_changes"]
    assert preview["conflicts"] == []
    stale = admin.post(f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": "nope"})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_preview"
    admin.ok("POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": preview["fingerprint"]})
    bundle = admin.ok("POST", "/v1/retrieve", {"path": "root.prospects.initech"})
    assert "<!-- scoped: root.clients.initech | priority: 9 | key: intro -->" in bundle
    assert admin.ok("POST", "/v1/retrieve", {"path": "root.old-leads.hooli"}, 200)
    paths = [s["path"] for s in admin.ok("GET", "/v1/scopes")["scopes"]]
    assert "root.leads.hooli" in paths and "root.old-leads" not in paths


def test_the_scope_tree_lists_aliases_and_a_discarded_draft_changes_nothing(admin: Api) -> None:
    # Given a moved scope, and a draft to move it back
    for path in ("root.prospects.initech", "root.clients"):
        admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, 201)
    move = {"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"}
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": [move]}, 201)
    admin.ok(
        "POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": draft["preview"]["fingerprint"]}
    )
    back = {"op": "move", "path": "root.clients.initech", "new_parent": "root.prospects"}
    unwanted = admin.ok("POST", "/v1/structure/drafts", {"operations": [back]}, 201)
    # When it is discarded
    discarded = admin.ok("POST", f"/v1/structure/drafts/{unwanted['draft_id']}/discard", {})
    # Then it is closed: it cannot be published nor discarded again, and the tree did not change
    assert discarded["status"] == "discarded"
    fingerprint = {"fingerprint": unwanted["preview"]["fingerprint"]}
    refused = admin.post(f"/v1/structure/drafts/{unwanted['draft_id']}/publish", fingerprint)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "draft_closed"
    assert admin.post(f"/v1/structure/drafts/{unwanted['draft_id']}/discard", {}).status_code == 409
    writer = key(admin, "wendy", "writer")
    assert writer.post(f"/v1/structure/drafts/{draft['draft_id']}/discard", {}).status_code == 403
    # And the tree lists the old path under the scope it resolves to, only when asked
    scopes = {s["path"]: s for s in admin.ok("GET", "/v1/scopes?aliases=true")["scopes"]}
    assert scopes["root.clients.initech"]["aliases"] == ["root.prospects.initech"]
    assert scopes["root.clients"]["aliases"] == []
    assert "aliases" not in admin.ok("GET", "/v1/scopes")["scopes"][0]


def test_me_names_the_caller_and_runs_are_listed_newest_first(admin: Api) -> None:
    reader = key(admin, "rita", "reader")
    assert reader.ok("GET", "/v1/me") == {"tenant": "default", "principal": "rita", "roles": ["reader"]}
    assert admin.ok("GET", "/v1/consolidations")["runs"] == []
    admin.ok("POST", "/v1/remember", {"scope": "root", "content": "Acme's year end is 31 March."}, 201)
    first = admin.ok("POST", "/v1/consolidate", {}, 202)["run_id"]
    second = admin.ok("POST", "/v1/consolidate", {}, 202)["run_id"]
    runs = reader.ok("GET", "/v1/consolidations?limit=5")["runs"]
    assert {r["run_id"] for r in runs} == {first, second} and runs[0]["started_at"] >= runs[1]["started_at"]
    assert [r["run_id"] for r in reader.ok("GET", "/v1/consolidations?limit=1")["runs"]] == [runs[0]["run_id"]]
    assert reader.get("/v1/consolidations?limit=0").status_code == 400


def test_the_change_feed_pages_with_cursors(admin: Api) -> None:
    admin.ok(
        "POST",
        "/v1/remember",
        {"items": [{"scope": "root.feed", "content": f"n{i}", "create_scope": True} for i in range(25)]},
        201,
    )
    seen, cursor = [], ""
    while True:
        page = admin.ok("GET", f"/v1/changes?limit=10&cursor={cursor}")
        seen += [(c["kind"], c["id"]) for c in page["changes"]]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    assert len([s for s in seen if s[0] == "episode"]) == 25 and len(seen) == len(set(seen))
    tampered = admin.get(f"/v1/changes?cursor={cursor[:-3]}abc")
    assert tampered.status_code == 400 and tampered.json()["error"]["code"] == "invalid_cursor"
