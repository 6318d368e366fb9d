"""Lexer and parser details: literals, limits, argument errors, spans and recovery."""

from __future__ import annotations

import pytest

from mneme.sttp import Arr, Num, Obj, Span, Str, parse
from mneme.sttp.diagnostics import MAX_DIAGNOSTICS, MAX_INPUT_BYTES, MAX_NESTING, MAX_TOKENS

from .support import both_profiles, checked_parse, codes, spec_example

FOCUS = 'focus(.99): "grammar update"'


def with_focus(value: str) -> str:
    """The §15 example with the value of its first content field replaced by ``value``."""
    return spec_example().replace(FOCUS, f"focus(.99): {value}")


def focus(text: str, profile: str = "strict") -> object:
    result = parse(text, profile)  # type: ignore[arg-type]
    assert result.node is not None, result.diagnostics
    return result.node.content.get("focus")


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r'"tab\tquote\"slash\/back\\"', 'tab\tquote"slash/back\\'),
        (r'"\u00e9\u27e9"', "é⟩"),
        (r'"\ud83d\ude00 pair"', "😀 pair"),
        ('"raw ünïcode ✓"', "raw ünïcode ✓"),
        ("0", 0),
        ("-12", -12),
        ("1.5e3", 1500.0),
        (".5", 0.5),
        ("[1, [2.0], {}]", None),
    ],
)
def test_literals(literal: str, value: object) -> None:
    result = focus(with_focus(literal))
    if value is None:
        assert result == Arr((Num(1), Arr((Num(2.0),)), Obj()))
    elif isinstance(value, str):
        assert result == Str(value)
    else:
        assert isinstance(value, int | float) and isinstance(result, Num)
        assert result == Num(value) and type(result.value) is type(value)


@pytest.mark.parametrize(
    ("literal", "code", "kept", "at"),
    [
        (r'"bad \q escape"', "STTP-E012", "bad \\q escape", "\\q"),
        ('"raw\ttab"', "STTP-E013", "raw\ttab", "\t"),
        ('"spoof ⏣"', "STTP-E014", "spoof ⏣", "⏣"),
    ],
)
def test_string_deviations_are_kept_in_tolerant(literal: str, code: str, kept: str, at: str) -> None:
    text = with_focus(literal)
    strict, tolerant = both_profiles(text)
    assert codes(strict) == [code] and not strict.ok
    assert tolerant.ok and focus(text, "tolerant") == Str(kept)
    assert tolerant.diagnostics[0].span.offset == text.index(literal) + literal.index(at)


@pytest.mark.parametrize(
    ("literal", "code"),
    [("1" * 65, "STTP-E015"), ("1e999", "STTP-E015"), ("@", "STTP-E010"), (":", "STTP-E110")],
)
def test_bad_values_are_errors_with_their_span(literal: str, code: str) -> None:
    text = with_focus(literal)
    strict, tolerant = both_profiles(text)
    assert codes(strict)[0] == code and not tolerant.ok
    assert strict.diagnostics[0].span.offset == text.index(f"focus(.99): {literal}") + len("focus(.99): ")


def test_unknown_profile_and_non_string_input_are_reported_not_raised() -> None:
    result = parse(spec_example(), "lenient")  # type: ignore[arg-type]
    assert codes(result) == ["STTP-E001"] and not result.ok
    result = parse(b"bytes", "strict")  # type: ignore[arg-type]
    assert codes(result) == ["STTP-E001"] and result.raw == ""


def test_input_over_the_size_cap_gets_one_diagnostic_and_no_parse() -> None:
    text = spec_example() + " " * (MAX_INPUT_BYTES + 1 - len(spec_example().encode()))
    result = parse(text, "tolerant")
    assert codes(result) == ["STTP-E002"] and result.node is None and result.raw is text
    assert result.diagnostics[0].span == Span(1, 1, 0, 0)


def test_input_at_the_size_cap_is_parsed() -> None:
    text = spec_example() + " " * (MAX_INPUT_BYTES - len(spec_example().encode()))
    assert len(text.encode()) == MAX_INPUT_BYTES
    assert parse(text, "strict").ok


@pytest.mark.parametrize("text", ["", "   \n", "just prose, no node", "{ trigger: manual }"])
def test_text_without_layers(text: str) -> None:
    strict, tolerant = both_profiles(text)
    assert codes(strict)[0] == "STTP-E006" and not tolerant.ok


def test_stray_layer_stop_outside_layers() -> None:
    text = spec_example() + "⟩"
    _, tolerant = both_profiles(text)
    assert codes(tolerant) == ["STTP-E105"] and tolerant.diagnostics[0].span == Span(5, 1, len(text) - 1, 1)


def test_unmatched_closer_inside_an_object() -> None:
    text = spec_example().replace("rho: 0.95,", "rho: 0.95, ],")
    assert codes(parse(text, "tolerant")) == ["STTP-E112", "STTP-E114"]


def test_array_delimiter_deviations() -> None:
    text = with_focus('["a" "b", "c",]')
    _, tolerant = both_profiles(text)
    assert codes(tolerant) == ["STTP-E113", "STTP-E114"] and tolerant.ok
    assert focus(text, "tolerant") == Arr((Str("a"), Str("b"), Str("c")))


def test_empty_layer_reports_omitted_wrapper_and_missing_content() -> None:
    lines = spec_example().splitlines()
    text = "\n".join([lines[0], lines[1], "◈⟨ ⟩", lines[3]])
    assert codes(parse(text, "tolerant")) == ["STTP-E107", "STTP-E300"]


def test_duplicate_content_field_is_an_error() -> None:
    text = with_focus('"a", focus(.5): "b"')
    result = parse(text, "tolerant")
    assert codes(result) == ["STTP-E201"] and not result.ok


def test_nesting_beyond_the_hard_cap_is_skipped_iteratively() -> None:
    deep = "[" * (MAX_NESTING + 10) + "]" * (MAX_NESTING + 10)
    text = spec_example().replace("rho: 0.95,", f"x_deep: {deep}, rho: 0.95,")
    result = checked_parse(text, "tolerant")
    assert codes(result) == ["STTP-E003"]
    assert result.diagnostics[0].span.offset == text.index("[") + MAX_NESTING - 1


def test_token_limit() -> None:
    text = "◈⟨ { a(.5): [" + "1," * MAX_TOKENS + "] } ⟩"
    result = checked_parse(text, "tolerant")
    assert "STTP-E004" in codes(result) and not result.ok


def test_diagnostics_are_capped_and_the_rest_counted() -> None:
    text = with_focus('"x"' + ", |" * 500)
    result = checked_parse(text, "tolerant")
    assert len(result.diagnostics) == MAX_DIAGNOSTICS + 1
    last = result.diagnostics[-1]
    assert last.code == "STTP-E005" and last.severity == "info" and not last.strict_impact
    assert result.ok  # only warnings were dropped, so the node is still recovered


def test_line_and_column_with_crlf_and_non_ascii() -> None:
    text = spec_example().replace("\n", "\r\n").replace("tier: raw, session_id", "tier: hourly, session_id")
    (diagnostic,) = parse(text, "strict").diagnostics
    assert diagnostic.code == "STTP-E203"
    assert (diagnostic.span.line, diagnostic.span.column, diagnostic.span.length) == (2, 49, 6)
    assert text[diagnostic.span.offset : diagnostic.span.offset + 6] == "hourly"


def test_ref_form_outside_parent_node_is_an_unquoted_string() -> None:
    text = spec_example().replace('origin_session: "session-abc"', "origin_session: ref:abc")
    result = parse(text, "tolerant")
    assert codes(result) == ["STTP-E118"]
    assert result.node is not None and result.node.provenance.get("origin_session") == Str("ref:abc")


def test_nbsp_and_bom_are_whitespace_deviations() -> None:
    text = "\ufeff" + spec_example().replace("rho: 0.95", "rho:\u00a00.95")
    _, tolerant = both_profiles(text)
    assert codes(tolerant) == ["STTP-E016", "STTP-E016"] and tolerant.ok
