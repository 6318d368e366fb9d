"""§14.2 tolerant legacy fixtures (§9.2): every deviation is diagnosed, the canonical AST is recovered."""

from __future__ import annotations

import pytest

from mneme.sttp import Ident, Num, Obj, Str, parse, render

from .support import both_profiles, check_snapshot, codes, fixture

# fixture -> the exact multiset of deviation codes the tolerant profile reports for it
EXPECTED = {
    "compact_pipe_payloads.sttp": {"STTP-E115": 31, "STTP-E116": 40},  # counted by hand, line by line
    "omitted_wrappers.sttp": {"STTP-E107": 4},
    "unquoted_and_numeric_strings.sttp": {
        "STTP-E204": 4, "STTP-E118": 4, "STTP-E206": 3, "STTP-E207": 1, "STTP-E117": 1,
    },
    "spacing_and_order_variants.sttp": {
        "STTP-E016": 2, "STTP-E104": 2, "STTP-E017": 4, "STTP-E114": 1, "STTP-E113": 1, "STTP-E102": 1,
    },
    "aliases_and_derived_psi.sttp": {"STTP-E202": 12, "STTP-E209": 3},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_legacy_fixture_recovers_with_a_warning_per_deviation(name: str) -> None:
    strict, tolerant = both_profiles(fixture("tolerant", name))
    assert tolerant.ok and not tolerant.strict_valid
    assert all(d.severity == "warning" and d.strict_impact for d in tolerant.diagnostics)
    counts = {code: codes(tolerant).count(code) for code in set(codes(tolerant))}
    assert counts == EXPECTED[name]
    assert not strict.ok and strict.node is None and not strict.strict_valid
    assert all(d.severity == "error" for d in strict.diagnostics)
    check_snapshot(tolerant, f"tolerant__{name.removesuffix('.sttp')}")


def test_tolerant_profile_never_claims_strict_validity_for_legacy_text() -> None:
    for name in EXPECTED:
        assert parse(fixture("tolerant", name), "tolerant").strict_valid is False


def test_compact_pipes_do_not_split_strings() -> None:
    node = parse(fixture("tolerant", "compact_pipe_payloads.sttp"), "tolerant").node
    assert node is not None
    assert node.content.get("detail") == Str("a|b=c is not split")


def test_unquoted_values_are_canonicalised() -> None:
    node = parse(fixture("tolerant", "unquoted_and_numeric_strings.sttp"), "tolerant").node
    assert node is not None
    assert node.provenance.get("trigger") == Ident("manual")
    assert node.provenance.get("response_format") == Ident("temporal_node")
    assert node.provenance.get("origin_session") == Str("legacy_session")
    assert node.provenance.get("compression_depth") == Num(2)
    assert node.provenance.get("parent_node") == Str("parent-fix-check-2026-03-05")
    assert node.metrics.get("kappa") == Num(0.94)
    assert node.content.get("owner") == Str("ref:someone")  # only parent_node drops the ref: prefix


def test_layers_are_reordered_and_prose_is_ignored() -> None:
    text = fixture("tolerant", "spacing_and_order_variants.sttp")
    result = parse(text, "tolerant")
    assert result.node is not None and result.raw == text
    assert render(result.node).splitlines()[1].startswith("⦿⟨ ⏣0{ timestamp:")
    first = result.diagnostics[0]
    assert (first.code, first.span.offset, first.span.length) == ("STTP-E016", 0, 1)
    prose = [d for d in result.diagnostics if d.code == "STTP-E104"]
    assert [(d.span.line, d.span.column) for d in prose] == [(1, 2), (7, 1)]


def test_derived_psi_is_the_sum_of_the_four_dimensions() -> None:
    node = parse(fixture("tolerant", "aliases_and_derived_psi.sttp"), "tolerant").node
    assert node is not None
    user, model = node.envelope.get("user_avec"), node.envelope.get("model_avec")
    assert isinstance(user, Obj) and isinstance(model, Obj)
    assert user.get("psi") == Num(2.6) and model.get("psi") == Num(2.87)
    assert [m.key for m in node.provenance.members] == [
        "trigger", "response_format", "origin_session", "compression_depth", "parent_node", "prime",
    ]  # fmt: skip


def test_recovery_is_bounded_to_what_can_be_read_without_guessing() -> None:
    missing = fixture("tolerant", "omitted_wrappers.sttp").replace('origin_session: "no-braces", ', "")
    result = parse(missing, "tolerant")
    assert not result.ok and result.node is None
    assert "STTP-E200" in codes(result)
    assert any(d.severity == "warning" for d in result.diagnostics)


def test_an_incoherent_psi_is_kept_as_written_and_renders_with_it() -> None:
    """Tolerant keeps both psi values (never recomputed); the node renders with both, so only tolerant reads
    its canonical text back, with the same single finding."""
    text = fixture("strict", "spec_15_example.sttp")
    incoherent = text.replace("rho: 0.95, kappa: 0.94, psi: 2.93", "rho: 0.95, kappa: 0.94, psi: 12.93")
    assert incoherent != text
    strict, tolerant = both_profiles(incoherent)
    assert codes(strict) == codes(tolerant) == ["STTP-E211"]
    assert tolerant.node is not None and tolerant.node.metrics.get("psi") == Num(12.93)
    again = parse(render(tolerant.node), "strict")
    assert not again.ok and codes(again) == ["STTP-E211"]
