"""`mneme serve` over loopback with a real HTTP client: first run, then the README walk-through."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from mneme import cli
from mneme.models import Role

from .helpers import Api, assert_error, block, bundle, new_key

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

TARGET = "root.pennine-joinery.vat"


@pytest.fixture
def walkthrough(admin: Api) -> dict[str, str]:
    """The README walk-through up to retrieve. Returns memory ids by key."""
    admin.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
    for path in (TARGET, "root.acme.vat"):
        admin.ok("POST", "/v1/scopes", {"path": path, "parents": True}, status=201)
    ids: dict[str, str] = {}

    def remember(key: str, body: str, **target: str) -> None:
        ids[key] = admin.create_memory(key, body, **target)["memory_id"]

    # Scoped at depth 0, 1 and 2, created out of key order to show that a bucket sorts by key
    remember("tone", "Be brief.", scope="root")
    remember("glossary", "Say client, never customer.", scope="root")
    remember("client-profile", "Family-run joinery in Hebden Bridge.", scope="root.pennine-joinery")
    remember("vat-policy", "Pennine Joinery uses the flat-rate VAT scheme.", scope=TARGET)
    # Layer-wide and value-targeted tags at both layers
    remember("client-etiquette", "Address clients by company name.", tag="clients=*")
    remember("pj-contacts", "Invoices go to accounts@pennine.example.", tag="clients=pennine-joinery")
    remember("service-checklist", "Confirm the period before filing.", tag="services=*")
    remember("flat-rate-rule", "Check flat-rate eligibility every April.", tag="services=vat")
    remember("cash-basis", "Acme accounts on a cash basis.", tag="services=vat")
    # Guidance that must not reach root.pennine-joinery.vat
    remember("acme-vat", "Acme is VAT-registered quarterly.", scope="root.acme.vat")
    remember("acme-contacts", "Acme prefers phone calls.", tag="clients=acme")
    remember("payroll-rule", "Run payroll on the 25th.", tag="services=payroll")
    return ids


def expected_target_bundle(ids: dict[str, str]) -> str:
    def tagged(label: str, priority: int, key: str) -> str:
        return f"tagged: {label} | priority: {priority} | key: {key} | memory_id: {ids[key]}"

    return bundle(
        TARGET,
        block("scoped: root | priority: 3 | key: glossary", "Say client, never customer."),
        block("scoped: root | priority: 3 | key: tone", "Be brief."),
        block(
            "scoped: root.pennine-joinery | priority: 6 | key: client-profile",
            "Family-run joinery in Hebden Bridge.",
        ),
        block(tagged("clients=*", 4, "client-etiquette"), "Address clients by company name."),
        block(tagged("clients=pennine-joinery", 5, "pj-contacts"), "Invoices go to accounts@pennine.example."),
        block(
            f"scoped: {TARGET} | priority: 9 | key: vat-policy",
            "Pennine Joinery uses the flat-rate VAT scheme.",
        ),
        block(tagged("services=*", 7, "service-checklist"), "Confirm the period before filing."),
        block(tagged("services=vat", 8, "cash-basis"), "Acme accounts on a cash basis."),
        block(tagged("services=vat", 8, "flat-rate-rule"), "Check flat-rate eligibility every April."),
    )


def test_first_run_creates_one_admin_key_that_works(server: str, home: Path) -> None:
    # When the store starts for the first time
    key_file, created = cli.ensure_first_run()
    # Then an admin key is written, readable by its owner only
    assert created and key_file == home / "admin.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = key_file.read_text().strip()
    assert secret.startswith("mnk_")
    # and it lists itself as the default tenant's local admin
    keys = Api(server, secret).ok("GET", "/v1/keys")["keys"]
    assert [(k["tenant"], k["principal"], k["roles"]) for k in keys] == [("default", "local-admin", ["admin"])]
    # and the root scope exists
    assert [s["path"] for s in Api(server, secret).ok("GET", "/v1/scopes")["scopes"]] == ["root"]
    # When it starts again, the same key is kept and no second one is made
    assert cli.ensure_first_run() == (key_file, False)
    assert key_file.read_text().strip() == secret
    assert len(Api(server, secret).ok("GET", "/v1/keys")["keys"]) == 1


def test_health_needs_no_key(server: str) -> None:
    response = Api(server).get("/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_walkthrough_builds_the_tree_and_layers(admin: Api, walkthrough: dict[str, str]) -> None:
    # Then the scope tree lists canonical paths depth-first by segment
    scopes = admin.ok("GET", "/v1/scopes")["scopes"]
    assert [(s["path"], s["depth"]) for s in scopes] == [
        ("root", 0),
        ("root.acme", 1),
        ("root.acme.vat", 2),
        ("root.pennine-joinery", 1),
        ("root.pennine-joinery.vat", 2),
    ]
    assert admin.ok("GET", "/v1/layers") == {"layers": {"1": "clients", "2": "services"}}
    # and a subtree can be listed on its own
    sub = admin.ok("GET", "/v1/scopes?path=root.acme")["scopes"]
    assert [s["path"] for s in sub] == ["root.acme", "root.acme.vat"]


def test_retrieve_returns_the_exact_bundle_byte_identical_on_repeat(admin: Api, walkthrough: dict[str, str]) -> None:
    # When the agent retrieves root.pennine-joinery.vat
    first = admin.retrieve(TARGET)
    # Then it is text/markdown with every header verbatim, in emission order per depth
    assert first.status_code == 200
    assert first.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert first.content.decode() == expected_target_bundle(walkthrough)
    # and the same state gives byte-identical output
    second = admin.retrieve(TARGET)
    assert second.content == first.content


def test_retrieve_json_matches_the_markdown(admin: Api, walkthrough: dict[str, str]) -> None:
    body = admin.retrieve(TARGET, as_json=True).json()
    assert body["markdown"] == expected_target_bundle(walkthrough)
    assert [b["priority"] for b in body["blocks"]] == [3, 3, 6, 4, 5, 9, 7, 8, 8]
    assert [b["depth"] for b in body["blocks"]] == [0, 0, 1, 1, 1, 2, 2, 2, 2]


def test_the_other_client_gets_its_own_guidance(admin: Api, walkthrough: dict[str, str]) -> None:
    # When root.acme.vat is retrieved, the value-targeted services=vat memories apply there too
    markdown = admin.retrieve("root.acme.vat").text
    assert "key: acme-vat" in markdown and "key: acme-contacts" in markdown
    assert "key: flat-rate-rule" in markdown and "key: cash-basis" in markdown
    # but nothing attached to Pennine Joinery or to other services
    for key in ("client-profile", "pj-contacts", "vat-policy", "payroll-rule"):
        assert f"key: {key}" not in markdown


def test_an_existing_empty_scope_is_200_with_no_blocks(admin: Api) -> None:
    # Given a scope with nothing in it (no layers, no memories)
    admin.ok("POST", "/v1/scopes", {"path": "root.acme.vat", "parents": True}, status=201)
    # When it is retrieved
    response = admin.retrieve("root.acme.vat", as_json=True)
    # Then 200 with an empty bundle
    assert response.status_code == 200
    assert response.json()["blocks"] == []
    assert response.json()["markdown"] == bundle("root.acme.vat")
    assert admin.retrieve("root.acme.vat").text == bundle("root.acme.vat")


def test_an_unknown_path_is_404_scope_not_found(admin: Api, walkthrough: dict[str, str]) -> None:
    error = assert_error(admin.retrieve("root.pennine-joinery.payroll"), 404, "scope_not_found")
    assert "root.pennine-joinery.payroll" in error["message"]


def test_a_writers_memory_is_pending_and_visible_to_its_author_only(admin: Api, walkthrough: dict[str, str]) -> None:
    # Given a writer key and a reader key made by the admin over the API
    writer = admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "bot", "roles": ["writer"]})["api_key"])
    reader = admin.as_key(admin.ok("POST", "/v1/keys", {"principal": "viewer", "roles": ["reader"]})["api_key"])
    before = admin.retrieve(TARGET).text
    # When the writer creates a memory
    draft = writer.create_memory("draft-note", "Ask about the new VAT threshold.", scope=TARGET)
    # Then it is pending, authored by the writer
    assert draft["status"] == "pending" and draft["author"] == "bot"
    # and the writer sees it, marked pending, in its bucket
    mine = writer.retrieve(TARGET).text
    assert (
        "<!-- scoped: root.pennine-joinery.vat | priority: 9 | key: draft-note | pending -->\n"
        "```\nAsk about the new VAT threshold.\n```\n" in mine
    )
    assert mine.index("key: draft-note") < mine.index("key: vat-policy")
    # while the admin and a reader see exactly what they saw before
    assert admin.retrieve(TARGET).text == before
    assert reader.retrieve(TARGET).text == before
    assert "draft-note" not in reader.retrieve(TARGET, as_json=True).text


def test_an_archived_memory_leaves_the_bundle(admin: Api, walkthrough: dict[str, str]) -> None:
    # When an admin archives the value-targeted flat-rate rule
    archived = admin.ok("POST", f"/v1/memories/{walkthrough['flat-rate-rule']}/archive")
    assert archived["status"] == "archived"
    # Then it no longer appears, and archiving again is a conflict
    assert "flat-rate-rule" not in admin.retrieve(TARGET).text
    assert_error(admin.post(f"/v1/memories/{walkthrough['flat-rate-rule']}/archive"), 409, "memory_archived")


def test_a_published_edit_changes_the_bundle(admin: Api, walkthrough: dict[str, str]) -> None:
    edited = admin.ok("PATCH", f"/v1/memories/{walkthrough['tone']}", {"body": "Be brief and kind.", "version": 1})
    assert edited["version"] == 2
    assert (
        "<!-- scoped: root | priority: 3 | key: tone -->\n```\nBe brief and kind.\n```\n" in admin.retrieve(TARGET).text
    )
    # A stale version is refused
    assert_error(admin.patch(f"/v1/memories/{walkthrough['tone']}", {"body": "x", "version": 1}), 409)


def test_unknown_route_and_wrong_method(admin: Api) -> None:
    assert_error(admin.get("/v1/nothing"), 404, "route_not_found")
    assert_error(admin.call("DELETE", "/v1/layers"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "damage",
    [lambda path: path.write_bytes(b"\xff" * 64), lambda path: path.mkdir(), lambda path: path.write_text("")],
    ids=["not-utf8", "directory", "empty"],
)
def test_a_damaged_cursor_key_is_a_503_that_health_reports(
    server: str, home: Path, damage: Callable[[Path], object]
) -> None:
    # Given two episodes, and a cursor key damaged before the first page is asked for
    headers = {"Authorization": f"Bearer {new_key('acme', 'alice', Role.writer)}"}
    items = [{"scope": "root", "content": f"turn {i}"} for i in range(2)]
    assert requests.post(server + "/v1/remember", json={"items": items}, headers=headers, timeout=30).ok
    damage(home / "cursor.key")
    # Then the routes that sign or read a cursor answer 503 key_file_damaged (never a 500), naming the file
    for path in ("/v1/changes", "/v1/episodes?limit=1", "/v1/facts?cursor=abc.def"):
        response = requests.get(server + path, headers=headers, timeout=10)
        assert response.status_code == 503, (path, response.text)
        assert response.json()["error"]["code"] == "key_file_damaged" and "cursor.key" in response.text
    # And health says degraded, and why
    health = requests.get(server + "/v1/health", timeout=10).json()
    assert health["status"] == "degraded" and "cursor.key" in health["cursor_key"]
