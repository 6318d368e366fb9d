"""Shared helpers for the STTP tests: fixtures, snapshots and invariants every parse must satisfy."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mneme.sttp import ParseResult, parse, render
from mneme.sttp.diagnostics import CODES, Profile, severity_of
from mneme.sttp.model import node_from_json, node_to_json

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"
UPDATE = os.environ.get("STTP_UPDATE_SNAPSHOTS") == "1"
KEPT_AS_WRITTEN = {"STTP-E211"}  # deviations tolerant keeps in the node rather than repairs


def fixture(group: str, name: str) -> str:
    # newline="" keeps the bytes exactly as stored (no universal-newline translation).
    with open(FIXTURES / group / name, encoding="utf-8", newline="") as handle:
        return handle.read()


def names(group: str) -> list[str]:
    return sorted(path.name for path in (FIXTURES / group).glob("*.sttp"))


def spec_example() -> str:
    return fixture("strict", "spec_15_example.sttp")


def check_snapshot(result: ParseResult, snapshot: str) -> None:
    """The canonical AST equals the reviewed JSON snapshot (regenerate with STTP_UPDATE_SNAPSHOTS=1)."""
    assert result.node is not None
    path = SNAPSHOTS / f"{snapshot}.json"
    if UPDATE or not path.exists():
        path.write_text(json.dumps(node_to_json(result.node), indent=2, ensure_ascii=False) + "\n", "utf-8")
    expected = json.loads(path.read_text("utf-8"))
    assert node_to_json(result.node) == expected
    assert node_from_json(expected) == result.node


def checked_parse(text: str, profile: Profile, result: ParseResult | None = None) -> ParseResult:
    """Parse (unless ``result`` is given) and assert the contract that holds for every input."""
    result = result or parse(text, profile)
    assert result.raw is text or result.raw == text
    assert all(d.code in CODES for d in result.diagnostics)
    assert all(d.code != "STTP-E000" for d in result.diagnostics), result.diagnostics
    for diagnostic in result.diagnostics:
        assert diagnostic.severity == severity_of(diagnostic.code, profile)
        assert diagnostic.strict_impact == (diagnostic.severity != "info")
        assert diagnostic.span.line >= 1 and diagnostic.span.column >= 1
        assert 0 <= diagnostic.span.offset <= len(text)
    keys = [(d.span.offset, d.code) for d in result.diagnostics]
    assert keys == sorted(keys)
    has_error = any(d.severity == "error" for d in result.diagnostics)
    assert result.ok == (not has_error)
    assert (result.node is not None) == result.ok
    if profile == "strict":
        assert result.strict_valid == result.ok
    else:
        assert result.strict_valid == (result.ok and not any(d.strict_impact for d in result.diagnostics))
    if result.node is not None:
        check_round_trip(result)
    return result


def check_round_trip(result: ParseResult) -> None:
    """The rendered node reads back as the same node: strict and without findings, unless the node holds
    an incoherent psi (STTP-E211), which tolerant keeps as written and strict refuses, so canonical text
    cannot carry it past the strict profile."""
    assert result.node is not None
    kept = [d.code for d in result.diagnostics if d.code in KEPT_AS_WRITTEN]
    again = parse(render(result.node), "tolerant" if kept else "strict")
    assert again.ok and again.node == result.node
    assert [d.code for d in again.diagnostics] == kept


def both_profiles(
    text: str, strict: ParseResult | None = None, tolerant: ParseResult | None = None
) -> tuple[ParseResult, ParseResult]:
    """Strict and tolerant parses; the tolerant one claims strict validity exactly when strict passes."""
    strict = checked_parse(text, "strict", strict)
    tolerant = checked_parse(text, "tolerant", tolerant)
    assert tolerant.strict_valid == strict.ok
    truncated = any(d.code == "STTP-E005" for d in (*strict.diagnostics, *tolerant.diagnostics))
    if not truncated:  # same findings, only the severities of deviations differ
        found = [(d.code, d.span) for d in tolerant.diagnostics]
        assert [(d.code, d.span) for d in strict.diagnostics] == found
    if len(text) < 100_000:
        assert parse(text, "tolerant") == tolerant  # deterministic for equal input
    return strict, tolerant


def counted_parse(text: str, profile: Profile) -> tuple[ParseResult, int]:
    """Parse and count the function calls it made (Python and C): the parser's work, measured
    deterministically (the same input always gives the same count, however loaded the machine)."""
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        result = parse(text, profile)
    finally:
        sys.setprofile(previous)
    return result, calls


def codes(result: ParseResult) -> list[str]:
    return [d.code for d in result.diagnostics]
