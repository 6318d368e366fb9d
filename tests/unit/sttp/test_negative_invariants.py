"""§14.3 negative fixtures by invariant class (S1-S5): exact code, span, severity and strict impact."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mneme.sttp import Span

from .support import both_profiles, fixture, names


@dataclass(frozen=True)
class Expect:
    code: str
    anchor: str  # the text the span starts at (first occurrence unless `nth` says otherwise)
    length: int
    line: int
    column: int
    recoverable: bool = False  # a deviation the tolerant profile canonicalises
    nth: int = 0


def _offset(text: str, anchor: str, nth: int) -> int:
    if anchor == "<end>":
        return len(text)
    at = -1
    for _ in range(nth + 1):
        at = text.index(anchor, at + 1)
    return at


CASES: dict[str, list[Expect]] = {
    # S1: layer order
    "s1_envelope_after_content.sttp": [Expect("STTP-E102", "⦿⟨", 2, 3, 1, recoverable=True)],
    "s1_metrics_first.sttp": [
        Expect("STTP-E102", "⊕⟨", 2, 2, 1, recoverable=True),
        Expect("STTP-E102", "⦿⟨", 2, 3, 1, recoverable=True),
        Expect("STTP-E102", "◈⟨", 2, 4, 1, recoverable=True),
    ],
    # S2: completeness
    "s2_missing_origin_session.sttp": [Expect("STTP-E200", "{", 1, 1, 6)],
    "s2_missing_prime_retrieval_budget.sttp": [Expect("STTP-E200", "{ attractor_config", 1, 1, 136)],
    "s2_missing_metrics_layer.sttp": [Expect("STTP-E100", "<end>", 0, 3, 100)],
    "s2_missing_avec_psi.sttp": [Expect("STTP-E209", "{ stability", 1, 2, 120, recoverable=True, nth=1)],
    # S3: types
    "s3_tier_not_in_enum.sttp": [Expect("STTP-E203", "hourly", 6, 2, 49)],
    "s3_trigger_mixed_case.sttp": [Expect("STTP-E204", "Manual", 6, 1, 17, recoverable=True)],
    "s3_rho_not_numeric.sttp": [Expect("STTP-E205", '"high"', 6, 4, 13)],
    "s3_compression_depth_fractional.sttp": [Expect("STTP-E205", "1.5", 3, 1, 107)],
    "s3_timestamp_not_a_datetime.sttp": [Expect("STTP-E208", '"yesterday"', 11, 2, 19)],
    # S4: confidence
    "s4_missing_confidence.sttp": [Expect("STTP-E301", "focus", 5, 3, 8)],
    "s4_nested_missing_confidence.sttp": [Expect("STTP-E301", "parser_mode", 11, 3, 55)],
    "s4_confidence_above_one.sttp": [Expect("STTP-E303", "decision(1.5)", 13, 3, 38)],
    # S5: structural depth
    "s5_content_depth_six.sttp": [Expect("STTP-E304", "{ e(.9)", 1, 3, 89)],
    "s5_array_counts_as_level.sttp": [Expect("STTP-E304", '["array at depth 6"]', 1, 3, 101)],
}


def test_every_negative_fixture_has_expectations() -> None:
    assert sorted(CASES) == names("negative")


@pytest.mark.parametrize("name", sorted(CASES))
def test_negative_fixture_diagnostics(name: str) -> None:
    text = fixture("negative", name)
    strict, tolerant = both_profiles(text)
    expected = CASES[name]
    spans = [Span(e.line, e.column, _offset(text, e.anchor, e.nth), e.length) for e in expected]
    wanted = [(e.code, span) for e, span in zip(expected, spans, strict=True)]
    assert [(d.code, d.span) for d in strict.diagnostics] == wanted
    # strict fails closed on every invariant class
    assert not strict.ok and not strict.strict_valid and strict.node is None
    assert all(d.severity == "error" and d.strict_impact for d in strict.diagnostics)
    # tolerant: canonicalises deviations (warnings) but never recovers a violated invariant
    recoverable = all(e.recoverable for e in expected)
    assert tolerant.ok is recoverable and not tolerant.strict_valid
    severities = ["warning" if e.recoverable else "error" for e in expected]
    assert [d.severity for d in tolerant.diagnostics] == severities
    assert all(d.recovery and d.message for d in tolerant.diagnostics)
