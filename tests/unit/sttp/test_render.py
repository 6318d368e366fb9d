"""Canonical rendering (§11): confidences, keys, escaping and refusal of non-finite numbers."""

from __future__ import annotations

import math

import pytest

from mneme.sttp import Arr, Bool, Member, Null, Num, Obj, Str, parse, render
from mneme.sttp.render import render_confidence, render_key, render_string, render_value

from .support import spec_example


@pytest.mark.parametrize(
    ("confidence", "text"),
    [(0.99, ".99"), (1.0, "1.0"), (0.0, ".0"), (0.5, ".5"), (1e-07, ".0000001"), (0.123456789, ".123456789")],
)
def test_confidence_form(confidence: float, text: str) -> None:
    assert render_confidence(confidence) == text and float(text) == confidence


def test_keys_are_bare_identifiers_or_strings() -> None:
    assert render_key("parser_mode") == "parser_mode"
    assert render_key("retry policy") == '"retry policy"'
    assert render_key("9lives") == '"9lives"'


def test_strings_escape_quotes_controls_and_protocol_markers() -> None:
    rendered = render_string('say "hi"\n⟩ ⊕⟨ ⏣')
    assert rendered == '"say \\"hi\\"\\n\\u27e9 ⊕\\u27e8 \\u23e3"'
    assert "⟩" not in rendered and "⟨" not in rendered and "⏣" not in rendered


def test_values() -> None:
    value = Arr((Num(1), Num(2.5), Bool(True), Null(), Str("x"), Obj((Member("k", Num(-1e-05)),))))
    assert render_value(value) == '[1, 2.5, true, null, "x", { k: -1e-05 }]'


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_numbers_are_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        render_value(Num(bad))
    with pytest.raises(ValueError):
        render_confidence(bad)


def test_render_output_is_strict_valid_with_no_diagnostics() -> None:
    node = parse(spec_example(), "strict").node
    assert node is not None
    result = parse(render(node), "strict")
    assert result.ok and result.strict_valid and result.diagnostics == [] and result.node == node
    assert len(render(node).splitlines()) == 4
