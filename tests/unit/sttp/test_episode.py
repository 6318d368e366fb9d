"""Ingestion (node -> episode fields) and export (episode -> strict-valid node)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from mneme.sttp import Ident, Member, Num, Obj, Str, episode_to_node, node_to_episode_fields, parse, render

from .support import fixture, spec_example


def spec_node():  # type: ignore[no-untyped-def]
    node = parse(spec_example(), "strict").node
    assert node is not None
    return node


def test_fields_of_the_spec_example() -> None:
    fields = node_to_episode_fields(spec_node())
    assert fields["text"] == "focus: grammar update\ndecision.parser_mode: strict_and_tolerant"
    assert fields["tier"] == "raw"
    assert fields["session_id"] == "session-abc"
    assert fields["occurred_at"] == datetime(2026, 4, 25, tzinfo=UTC)
    meta = fields["metadata"]
    assert meta["avec"]["user"] == {
        "stability": 0.9,
        "friction": 0.2,
        "logic": 0.98,
        "autonomy": 0.85,
        "psi": 2.93,
    }
    assert meta["avec"]["compression"]["psi"] == 2.93
    assert meta["metrics"] == {"rho": 0.95, "kappa": 0.94, "psi": 2.93}
    assert meta["provenance"]["trigger"] == "manual"
    assert meta["provenance"]["prime"]["context_summary"] == "parser hardening session"
    assert meta["envelope"]["schema_version"] == "sttp-1.0"
    assert meta["content"]["decision"] == {
        "confidence": 0.96,
        "value": {"parser_mode": {"confidence": 0.95, "value": "strict_and_tolerant"}},
    }


@pytest.mark.parametrize(
    "group_name", [("strict", "spec_15_example.sttp"), ("strict", "extensions_arrays_escapes.sttp")]
)
def test_fields_rebuild_the_same_node(group_name: tuple[str, str]) -> None:
    node = parse(fixture(*group_name), "strict").node
    assert node is not None
    assert episode_to_node(**node_to_episode_fields(node)) == node


def test_plain_episode_exports_a_strict_valid_node_with_documented_defaults() -> None:
    when = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)
    node = episode_to_node("first line\nsecond line", "daily", "sess-1", when)
    result = parse(render(node), "strict")
    assert result.ok and result.diagnostics == [] and result.node == node
    assert node.content == Obj((Member("text", Str("first line\nsecond line"), 1.0),))
    assert node.envelope.get("timestamp") == Str("2026-05-01T12:30:00Z")
    assert node.envelope.get("tier") == Ident("daily")
    assert node.metrics.get("rho") == Num(1.0) and node.metrics.get("psi") == Num(2.0)
    prime = node.provenance.get("prime")
    assert isinstance(prime, Obj) and prime.get("context_summary") == Str("first line")
    fields = node_to_episode_fields(node)
    assert fields["text"] == "first line\nsecond line" and fields["session_id"] == "sess-1"


def test_edited_text_replaces_the_stored_content() -> None:
    fields = node_to_episode_fields(spec_node())
    fields["text"] = "rewritten by a human"
    node = episode_to_node(**fields)
    assert node.content == Obj((Member("text", Str("rewritten by a human"), 1.0),))
    assert node.metrics == spec_node().metrics


def test_timestamps_keep_their_original_spelling_when_the_instant_is_unchanged() -> None:
    fields = node_to_episode_fields(spec_node())
    fields["metadata"]["envelope"]["timestamp"] = "2026-04-25T02:00:00+02:00"
    node = episode_to_node(**fields)
    assert node.envelope.get("timestamp") == Str("2026-04-25T02:00:00+02:00")
    fields["occurred_at"] = datetime(2026, 4, 25, 1, tzinfo=timezone(timedelta(hours=1))) + timedelta(hours=1)
    node = episode_to_node(**fields)
    assert node.envelope.get("timestamp") == Str("2026-04-25T01:00:00Z")


def test_naive_datetimes_are_utc() -> None:
    node = episode_to_node("x", "raw", "s", datetime(2026, 1, 1))
    assert node.envelope.get("timestamp") == Str("2026-01-01T00:00:00Z")
    assert node_to_episode_fields(node)["occurred_at"] == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tier", "metadata"),
    [
        ("hourly", None),
        ("raw", {"provenance": {"trigger": "whenever"}}),
        ("raw", {"metrics": {"rho": float("nan")}}),
        ("raw", {"avec": {"user": {"stability": "high"}}}),
    ],
)
def test_invalid_inputs_raise_value_error(tier: str, metadata: dict | None) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError):
        episode_to_node("x", tier, "s", datetime(2026, 1, 1, tzinfo=UTC), metadata)


def test_foreign_metadata_is_ignored() -> None:
    node = episode_to_node("x", "raw", "s", datetime(2026, 1, 1, tzinfo=UTC), {"source": "slack", "avec": 3})
    assert parse(render(node), "strict").ok
