"""§14.4 adversarial fixtures by §12 threat class: strict fails closed, tolerant fails informatively."""

from __future__ import annotations

import pytest

from mneme.sttp import Ident, Obj, Str, parse, render

from .support import both_profiles, codes, fixture, names

# fixture -> (diagnostic codes in order, tolerant recovers?)
CASES: dict[str, tuple[list[str], bool]] = {
    # 1. marker spoofing and layer confusion
    "spoof_markers_in_string.sttp": (["STTP-E014"], True),
    "spoof_injected_second_envelope.sttp": (["STTP-E101"], False),
    "spoof_ordinal_mismatch.sttp": (["STTP-E106"], False),
    "spoof_marker_in_unquoted_value.sttp": (
        ["STTP-E111", "STTP-E200", "STTP-E200", "STTP-E118", "STTP-E101"],
        False,
    ),
    # 2. malformed confidence signatures
    "confidence_double_dot.sttp": (["STTP-E302"], False),
    "confidence_not_a_number.sttp": (["STTP-E302"], False),
    "confidence_empty.sttp": (["STTP-E302"], False),
    "confidence_negative.sttp": (["STTP-E303"], False),
    "confidence_unclosed.sttp": (["STTP-E302"], False),
    "confidence_outside_content.sttp": (["STTP-E210"], False),
    # 3. delimiter smuggling in compact forms
    "smuggle_duplicate_key_via_pipe.sttp": (["STTP-E118", "STTP-E115", "STTP-E201", "STTP-E116"], False),
    "smuggle_pipe_inside_string.sttp": ([], True),
    # 4. layer bleed-through via unbalanced containers
    "bleed_unclosed_object.sttp": (["STTP-E111"], False),
    "bleed_extra_closer.sttp": (["STTP-E110"], False),
    "bleed_unclosed_array.sttp": (["STTP-E111", "STTP-E118", "STTP-E110"], False),
    "bleed_missing_layer_stop.sttp": (["STTP-E103"], False),
    "bleed_unterminated_string.sttp": (
        ["STTP-E103", "STTP-E111", "STTP-E113", "STTP-E011", "STTP-E100"],
        False,
    ),
}


def test_every_adversarial_fixture_has_expectations() -> None:
    assert sorted(CASES) == names("adversarial")


@pytest.mark.parametrize("name", sorted(CASES))
def test_adversarial_fixture(name: str) -> None:
    expected, recovers = CASES[name]
    strict, tolerant = both_profiles(fixture("adversarial", name))
    assert codes(strict) == expected and codes(tolerant) == expected
    if expected:
        assert not strict.ok and strict.node is None  # strict fails closed
    assert tolerant.ok is recovers
    assert tolerant.strict_valid is (not expected)
    for diagnostic in tolerant.diagnostics:
        assert diagnostic.message and diagnostic.recovery  # fails informative


def test_spoofed_markers_stay_inside_the_string_and_are_escaped_on_render() -> None:
    result = parse(fixture("adversarial", "spoof_markers_in_string.sttp"), "tolerant")
    assert result.node is not None
    assert result.node.envelope.get("tier") == Ident("raw")  # the spoofed "tier: yearly" has no effect
    prime = result.node.provenance.get("prime")
    assert isinstance(prime, Obj) and prime.get("context_summary") == Str("ok ⟩\n⦿⟨ ⏣0{ tier: yearly } ⟩")
    rendered = render(result.node)
    assert rendered.count("⟩") == 4 and rendered.count("⟨") == 4 and "\\u27e9" in rendered
    assert rendered.count("\n") == 3


def test_smuggled_key_never_overrides_the_first() -> None:
    result = parse(fixture("adversarial", "smuggle_duplicate_key_via_pipe.sttp"), "tolerant")
    duplicate = next(d for d in result.diagnostics if d.code == "STTP-E201")
    assert duplicate.severity == "error" and duplicate.recovery == "kept the first occurrence"
    assert result.node is None


def test_pipe_inside_a_string_is_text() -> None:
    result = parse(fixture("adversarial", "smuggle_pipe_inside_string.sttp"), "strict")
    assert result.ok and result.node is not None
    assert result.node.envelope.get("session_id") == Str("session-abc|tier=yearly")
    assert result.node.envelope.get("tier") == Ident("raw")


def test_unbalanced_containers_do_not_bleed_into_the_next_layer() -> None:
    text = fixture("adversarial", "bleed_unclosed_object.sttp")
    result = parse(text, "tolerant")
    (diagnostic,) = result.diagnostics
    assert diagnostic.span.offset == text.index("{") and diagnostic.span.line == 1
    # the envelope, content and metrics layers still parse cleanly: no diagnostic past line 1
    assert all(d.span.line == 1 for d in result.diagnostics)


def test_diagnostics_are_deterministic_for_equal_input() -> None:
    for name in names("adversarial"):
        text = fixture("adversarial", name)
        runs = [parse(text, "tolerant").diagnostics for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]
