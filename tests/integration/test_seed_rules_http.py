"""The last seed rules through the local server: renames keep their guidance, archive never reads the
body, aliases answer canonically, an author finds their own revision, and the smaller input rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.integration.helpers import Api

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "sttp" / "fixtures"


def billing_rules(admin: Api) -> None:
    admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients"}})
    admin.ok("POST", "/v1/scopes", {"path": "root.northwind.vat", "parents": True}, 201)
    for client, currency in (("northwind", "USD"), ("contoso", "EUR")):
        memory = {"tag": f"clients={client}", "key": f"{client}-billing", "body": f"Invoice in {currency} only."}
        admin.ok("POST", "/v1/memories", memory, 201)


def test_a_rename_that_would_change_the_guidance_is_refused_with_the_draft_to_post(admin: Api) -> None:
    billing_rules(admin)
    rename = {"path": "root.northwind", "new_path": "root.contoso"}
    refused = admin.call("POST", "/v1/scopes/rename", rename)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "draft_required"
    assert error["details"]["operations"] == [{"op": "rename", **rename}]
    changes = {(t["key"], t["scope"], t["applies"]) for t in error["details"]["tagged"]}
    assert ("northwind-billing", "root.contoso.vat", "stops") in changes
    assert ("contoso-billing", "root.contoso.vat", "starts") in changes
    # nothing changed: the old path still serves Northwind's rule, and only it
    bundle = admin.ok("POST", "/v1/retrieve", {"path": "root.northwind.vat"})
    assert "Invoice in USD only." in bundle and "EUR" not in bundle
    # the draft it names previews the same changes and publishes them, with the old path as an alias
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": error["details"]["operations"]}, 201)
    assert draft["preview"]["path_changes"][0] == ["root.northwind", "root.contoso"]
    assert draft["preview"]["aliases"] == [["root.northwind", "root.contoso"]]
    assert draft["preview"]["tagged"] == error["details"]["tagged"]
    fingerprint = draft["preview"]["fingerprint"]
    admin.ok("POST", f"/v1/structure/drafts/{draft['draft_id']}/publish", {"fingerprint": fingerprint})
    assert [s["path"] for s in admin.ok("GET", "/v1/scopes")["scopes"]] == ["root", "root.contoso", "root.contoso.vat"]
    assert "Invoice in EUR only." in admin.ok("POST", "/v1/retrieve", {"path": "root.northwind.vat"})


def test_a_rename_dry_run_answers_with_the_preview_a_draft_gives(admin: Api) -> None:
    billing_rules(admin)
    rename = {"path": "root.northwind", "new_path": "root.contoso"}
    dry = admin.ok("POST", "/v1/scopes/rename", {**rename, "dry_run": True})
    draft = admin.ok("POST", "/v1/structure/drafts", {"operations": [{"op": "rename", **rename}]}, 201)
    assert dry == {"dry_run": True, "preview": draft["preview"]}
    assert admin.ok("GET", "/v1/scopes")["scopes"][1]["path"] == "root.northwind"  # a dry run changes nothing


def test_a_rename_that_keeps_the_guidance_applies_at_once(admin: Api) -> None:
    billing_rules(admin)
    admin.ok("POST", "/v1/scopes", {"path": "root.northwind.payroll"}, 201)
    renamed = admin.ok(
        "POST", "/v1/scopes/rename", {"path": "root.northwind.payroll", "new_path": "root.northwind.pay"}
    )
    assert (renamed["path"], renamed["alias"]) == ("root.northwind.pay", "root.northwind.payroll")
    assert "Invoice in USD only." in admin.ok("POST", "/v1/retrieve", {"path": "root.northwind.pay"})


def test_archive_answers_without_the_body(admin: Api) -> None:
    admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    memory = admin.ok(
        "POST", "/v1/memories", {"scope": "root.acme", "key": "pin", "body": "The door PIN is 4471."}, 201
    )
    archived = admin.ok("POST", f"/v1/memories/{memory['memory_id']}/archive", {})
    assert archived["status"] == "archived" and archived["key"] == "pin" and archived["target"] == "root.acme"
    assert "body" not in archived and "4471" not in str(archived)


def test_creating_a_scope_through_an_alias_answers_the_canonical_path(admin: Api) -> None:
    admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    admin.ok("POST", "/v1/scopes/rename", {"path": "root.acme", "new_path": "root.acme-ltd"})
    created = admin.ok("POST", "/v1/scopes", {"path": "root.acme.vat"}, 201)
    assert (created["path"], created["depth"]) == ("root.acme-ltd.vat", 2)
    assert [s["path"] for s in admin.ok("GET", "/v1/scopes")["scopes"]] == [
        "root",
        "root.acme-ltd",
        "root.acme-ltd.vat",
    ]


def test_an_author_finds_their_pending_revision_by_its_new_words(admin: Api) -> None:
    admin.ok("POST", "/v1/scopes", {"path": "root.acme"}, 201)
    writer = admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "wendy", "roles": ["writer"]})["api_key"])
    memory = admin.ok("POST", "/v1/memories", {"scope": "root.acme", "key": "zorb", "body": "Zorb the widgets."}, 201)
    writer.ok("PATCH", f"/v1/memories/{memory['memory_id']}", {"body": "Zorb the widgets with Zorblax."})
    # the published body is a vector hit for the query; the revision's new word must still count
    mine = writer.ok("POST", "/v1/recall", {"query": "Zorblax", "kinds": ["memory"]})["results"]
    assert [(r["id"], r["content"], r["status"]) for r in mine] == [
        (memory["memory_id"], "Zorb the widgets with Zorblax.", "pending")
    ]
    assert admin.ok("POST", "/v1/recall", {"query": "Zorblax", "kinds": ["memory"]})["results"] == []  # not others


def test_query_over_its_limit_is_too_large_and_an_empty_period_is_refused(admin: Api) -> None:
    too_long = admin.call("POST", "/v1/recall", {"query": "x" * 2049})
    assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "query_too_large"
    assert admin.call("POST", "/v1/recall", {"query": "é" * 1024}).status_code == 200  # 2 KiB exactly
    period = {"query": "invoices", "since": "2026-05-01T00:00:00Z", "until": "2026-04-01T00:00:00Z"}
    empty = admin.call("POST", "/v1/recall", period)
    assert empty.status_code == 400 and "since is after until" in empty.text


@pytest.mark.parametrize("limit", ["5.0", "5e0", "+5", " 5", "five"])
def test_a_feed_limit_is_digits_only(admin: Api, limit: str) -> None:
    refused = admin.call("GET", f"/v1/changes?limit={limit}")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_input"
    assert admin.call("GET", "/v1/changes?limit=5").status_code == 200
    assert admin.call("GET", f"/v1/consolidations?limit={limit}").status_code == 400


def test_sttp_psi_is_checked_against_the_compression_avec(admin: Api) -> None:
    node = (FIXTURES / "strict" / "spec_15_example.sttp").read_text()
    assert admin.ok("POST", "/v1/sttp/validate", {"text": node})["strict_valid"]
    incoherent = node.replace("rho: 0.95, kappa: 0.94, psi: 2.93", "rho: 0.95, kappa: 0.94, psi: 1.00")
    strict = admin.ok("POST", "/v1/sttp/validate", {"text": incoherent})
    assert not strict["strict_valid"] and [d["code"] for d in strict["diagnostics"]] == ["STTP-E211"]
    assert "1.0" in strict["diagnostics"][0]["message"] and "2.93" in strict["diagnostics"][0]["message"]
    tolerant = admin.ok("POST", "/v1/sttp/validate", {"text": incoherent, "profile": "tolerant"})
    assert tolerant["ok"] and not tolerant["strict_valid"]  # kept as written, never recomputed
    refused = admin.post("/v1/remember", {"scope": "root", "format": "sttp", "content": incoherent})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_sttp"


def test_facts_imported_without_vectors_are_embedded(admin: Api) -> None:
    from mneme import bootstrap
    from mneme.records import Fact

    services = bootstrap.current()
    now = datetime(2026, 3, 1, tzinfo=UTC)
    fact = Fact(
        tenant="src", fact_id="fa_kiln", scope_id=services.scopes.root("src").scope_id,
        entity="kiln", property="firing", value="cone 6", summary="The studio kiln fires stoneware at cone 6.",
        source_episode_ids=[], confidence=0.9, valid_from=now, created_at=now, updated_at=now, reinforced_at=now,
    )  # fmt: skip
    services.store.put_facts([fact])
    lines = list(services.portability.export("src", "root"))
    assert all("vector" not in line for line in lines)  # an export without --vectors
    services.portability.import_("default", lines)  # the admin key's tenant
    by_meaning = {
        "query": "at what cone does the studio kiln fire stoneware",
        "scoring": {"alpha": 1.0, "beta": 0.0, "fallback": "never"},
    }
    found = admin.ok("POST", "/v1/recall", by_meaning)["results"]
    assert [r["id"] for r in found] == ["fa_kiln"]  # found by its vector: it was embedded on import


@pytest.mark.parametrize(
    "body", ["---\nsummary: VAT\n---\n", "---\nowner: ops\n---\n## Context\nWhy we did this.\n## Origin\nA call.\n"]
)
def test_a_body_with_nothing_for_agents_is_refused(admin: Api, body: str) -> None:
    refused = admin.call("POST", "/v1/memories", {"scope": "root", "key": "hollow", "body": body})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_body"
    guidance = body.replace("---\n## ", "---\nFile quarterly.\n## ") if "## " in body else f"{body}File quarterly."
    kept = admin.ok("POST", "/v1/memories", {"scope": "root", "key": "full", "body": guidance}, 201)
    edit = admin.call("PATCH", f"/v1/memories/{kept['memory_id']}", {"body": body})
    assert edit.status_code == 400 and edit.json()["error"]["code"] == "invalid_body"
    recalled = admin.ok("POST", "/v1/recall", {"query": "file quarterly"})["context"]
    assert "File quarterly." in recalled and "owner: ops" not in recalled
