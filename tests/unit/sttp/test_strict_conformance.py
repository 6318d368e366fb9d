"""§14.1 strict canonical fixtures (including the §15 example verbatim) and §14.5 AST snapshots."""

from __future__ import annotations

import pytest

from mneme.sttp import Ident, Member, Node, Null, Num, Obj, Str, parse, render

from .support import both_profiles, check_snapshot, fixture, names, spec_example

SPEC_15_LINE_1 = (
    '⊕⟨ ⏣0{ trigger: manual, response_format: temporal_node, origin_session: "session-abc", '
    "compression_depth: 1, parent_node: null, prime: { attractor_config: { stability: 0.90, friction: 0.20, "
    'logic: 0.98, autonomy: 0.85 }, context_summary: "parser hardening session", relevant_tier: raw, '
    "retrieval_budget: 8 } } ⟩"
)


def test_the_spec_example_fixture_is_verbatim() -> None:
    assert spec_example().splitlines()[0] == SPEC_15_LINE_1
    assert len(spec_example().splitlines()) == 4


@pytest.mark.parametrize("name", names("strict"))
def test_strict_fixture_is_valid_in_both_profiles_without_diagnostics(name: str) -> None:
    strict, tolerant = both_profiles(fixture("strict", name))
    assert strict.ok and strict.strict_valid and strict.diagnostics == []
    assert tolerant.ok and tolerant.strict_valid and tolerant.diagnostics == []
    assert strict.node == tolerant.node
    check_snapshot(strict, f"strict__{name.removesuffix('.sttp')}")


@pytest.mark.parametrize("name", names("strict"))
def test_rendering_is_a_fixed_point(name: str) -> None:
    node = parse(fixture("strict", name), "strict").node
    assert node is not None
    once = render(node)
    again = parse(once, "strict")
    assert again.node == node and render(again.node) == once


def test_spec_example_ast() -> None:
    node = parse(spec_example(), "strict").node
    assert isinstance(node, Node) and node.ordinal == 0
    assert node.provenance.members[0] == Member("trigger", Ident("manual"))
    assert node.provenance.get("parent_node") == Null()
    assert node.envelope.get("tier") == Ident("raw")
    assert node.envelope.get("schema_version") == Str("sttp-1.0")
    assert node.metrics.get("rho") == Num(0.95)
    assert node.content == Obj(
        (
            Member("focus", Str("grammar update"), 0.99),
            Member("decision", Obj((Member("parser_mode", Str("strict_and_tolerant"), 0.95),)), 0.96),
        )
    )


def test_raw_is_kept_byte_for_byte() -> None:
    text = "\ufeff" + spec_example().replace("\n", "\r\n")
    result = parse(text, "tolerant")
    assert result.raw == text and result.ok and not result.strict_valid


def test_canonical_render_of_the_spec_example() -> None:
    node = parse(spec_example(), "strict").node
    assert node is not None
    assert render(node).splitlines()[2] == (
        '◈⟨ ⏣0{ focus(.99): "grammar update", decision(.96): { parser_mode(.95): "strict_and_tolerant" } } ⟩'
    )


def test_node_marker_is_optional_and_ordinal_is_kept() -> None:
    bare = spec_example().replace("⏣0", "")
    result = parse(bare, "strict")
    assert result.ok and result.diagnostics == []
    assert result.node == parse(spec_example(), "strict").node
    seven = parse(spec_example().replace("⏣0", "⏣7"), "strict")
    assert seven.ok and seven.node is not None and seven.node.ordinal == 7
    assert render(seven.node).startswith("⊕⟨ ⏣7{")
