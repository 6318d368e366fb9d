"""An STTP node remembered through the local server is recalled by its content and exported strict-valid."""

from __future__ import annotations

from pathlib import Path

from mneme import bootstrap, sttp
from tests.integration.helpers import Api

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "sttp" / "fixtures"


def test_remember_recall_and_export_an_sttp_node(admin: Api) -> None:
    node = (FIXTURES / "strict" / "spec_15_example.sttp").read_text()
    stored = admin.ok(
        "POST",
        "/v1/remember",
        {"scope": "root.lab", "create_scope": True, "format": "sttp", "content": node, "metadata": {"source": "locus"}},
        201,
    )
    found = admin.ok("POST", "/v1/recall", {"query": "grammar update parser mode", "scope": "root.lab"})
    top = found["results"][0]
    assert top["id"] == stored["episode_id"] and top["content"] == node  # the raw node, byte for byte
    assert top["session_id"] == "session-abc" and top["occurred_at"].startswith("2026-04-25")
    assert top["sttp"]["avec"]["model"]["logic"] == 0.98 and top["metadata"] == {"source": "locus"}
    [exported] = list(bootstrap.current().portability.export_sttp("default", "root.lab"))
    assert sttp.parse(exported, "strict").strict_valid and exported == node


def test_a_strict_failure_is_a_400_with_diagnostics_and_tolerant_accepts_legacy(admin: Api) -> None:
    legacy = (FIXTURES / "tolerant" / "compact_pipe_payloads.sttp").read_text()
    refused = admin.post(
        "/v1/remember", {"scope": "root.lab", "create_scope": True, "format": "sttp", "content": legacy}
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_sttp"
    assert refused.json()["error"]["details"]["diagnostics"][0]["code"].startswith("STTP-E")
    accepted = admin.post(
        "/v1/remember",
        {"scope": "root.lab", "create_scope": True, "format": "sttp", "profile": "tolerant", "content": legacy},
    )
    assert accepted.status_code == 201
    [exported] = list(bootstrap.current().portability.export_sttp("default", "root.lab"))
    assert sttp.parse(exported, "strict").strict_valid  # a legacy node exports in canonical form


def test_validate_returns_diagnostics_and_the_canonical_form(admin: Api) -> None:
    legacy = (FIXTURES / "tolerant" / "compact_pipe_payloads.sttp").read_text()
    strict = admin.ok("POST", "/v1/sttp/validate", {"text": legacy})
    assert not strict["ok"] and strict["diagnostics"] and strict["canonical"] is None
    tolerant = admin.ok("POST", "/v1/sttp/validate", {"text": legacy, "profile": "tolerant"})
    assert tolerant["ok"] and not tolerant["strict_valid"] and sttp.parse(tolerant["canonical"]).strict_valid


def test_avec_resonance_reorders_only_when_weighted(admin: Api) -> None:
    node = (FIXTURES / "strict" / "spec_15_example.sttp").read_text()
    admin.ok(
        "POST", "/v1/remember", {"scope": "root.lab", "create_scope": True, "format": "sttp", "content": node}, 201
    )
    admin.ok("POST", "/v1/remember", {"scope": "root.lab", "content": "grammar update for the parser mode"}, 201)
    state = {"stability": 0.9, "friction": 0.2, "logic": 0.98, "autonomy": 0.85}
    plain = admin.ok("POST", "/v1/recall", {"query": "grammar update parser mode", "avec": state})
    assert all("resonance" not in r["scores"] for r in plain["results"])
    tuned = admin.ok(
        "POST", "/v1/recall", {"query": "grammar update parser mode", "avec": state, "scoring": {"resonance": 1.0}}
    )
    top = tuned["results"][0]
    assert top["sttp"] is not None and top["scores"]["resonance"] == 1.0
