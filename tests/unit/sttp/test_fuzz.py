"""Fuzzing: random text, token soup, mutated valid nodes, deep nesting and 1 MiB adversarial inputs.

Every input must parse without raising, satisfy the contract checked by ``both_profiles`` (ordering,
severities, strict/tolerant agreement, render round trip when a node is returned, determinism) and
carry at least one error diagnostic whenever it is rejected. Each adversarial pattern must also parse
in work linear in its size: counted in function calls, not timed, so the check is deterministic.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mneme.sttp import Node, parse, render
from mneme.sttp.diagnostics import MAX_INPUT_BYTES

from .strategies import nodes
from .support import both_profiles, counted_parse, spec_example

TOKENS = [
    "⊕⟨", "⦿⟨", "◈⟨", "⍉⟨", "⟩", "⏣", "⏣0", "{", "}", "[", "]", "(", ")", ",", ":", "|", "=", '"', "\\",
    "\n", " ", "\u00a0", "\ufeff", "ref:x", "manual", "raw", "true", "null", "1", "-2.5e3", ".99", "1e999",
    "trigger", "tier", "psi", "focus(.9)", '"s"', "@", "\x00", "⟨",
]  # fmt: skip
_STRING = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")')
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(text: str) -> None:
    results = {}
    for profile in ("strict", "tolerant"):
        result = parse(text, profile)
        assert result.ok or any(d.severity == "error" for d in result.diagnostics)
        results[profile] = result
    both_profiles(text, results["strict"], results["tolerant"])


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    check(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=200).map("".join))
def test_token_soup(text: str) -> None:
    check(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([spec_example(), render(draw(nodes()))]))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        piece = draw(st.sampled_from(TOKENS))
        width = draw(st.integers(1, 12))
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + width :]
        elif action == "replace":
            text = text[:at] + piece + text[at + width :]
        else:
            text = text[:at] + text[at : at + width * 8] + text[at:]
    return text


@FUZZ
@given(mutated())
def test_mutated_valid_nodes(text: str) -> None:
    check(text)


@FUZZ
@given(st.integers(0, 4000), st.sampled_from(["{", "[", "{a(.5): ", "[{b(.5): "]), st.booleans())
def test_deep_nesting(depth: int, opener: str, closed: bool) -> None:
    closer = "".join("}" if char == "{" else "]" for char in opener if char in "{[")[::-1]
    value = opener * depth + ("1" + closer * depth if closed else "")
    check(spec_example().replace('"grammar update"', value))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12).map("".join))
def test_one_mebibyte_of_a_random_repeated_unit(unit: str) -> None:
    text = (unit * (MAX_INPUT_BYTES // len(unit.encode()) + 1))[: MAX_INPUT_BYTES // 4]
    while len(text.encode()) > MAX_INPUT_BYTES:
        text = text[:-1]
    check(text)


def _fill(prefix: str, unit: str, suffix: str = "", size: int = MAX_INPUT_BYTES) -> str:
    room = size - len(prefix.encode()) - len(suffix.encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


ADVERSARIAL = {  # prefix, repeated unit, suffix
    "open braces": ("", "{"),
    "open braces in a layer": ("◈⟨ { a(.5): ", "{"),
    "alternating containers": ("◈⟨ { a(.5): ", "[{b(.5): "),
    "pipes": ("◈⟨ { ", "|"),
    "identifiers": ("", "a "),
    "members": ("◈⟨ { ", "k(.5): 1, ", "} ⟩"),
    "escapes in one string": ('◈⟨ { a(.5): "', "\\n", '" } ⟩'),
    "invalid escapes": ('◈⟨ { a(.5): "', "\\q", '" } ⟩'),
    "unterminated string": ('◈⟨ { a(.5): "', "x"),
    "escaped quotes": ("", '\\"\n'),
    "markers": ("", "⊕⟨ ⟩"),
    "markers in a string": ('◈⟨ { a(.5): "', "⟩⏣⟨", '" } ⟩'),
    "bad characters": ("◈⟨ { a(.5): ", "@"),
    "nbsp": ("◈⟨ {", "\u00a0"),
    "long numbers": ("◈⟨ { a(.5): [", "1" * 70 + ","),
    "spec example repeated": ("", spec_example()),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_one_mebibyte_adversarial_inputs(name: str) -> None:
    text = _fill(*ADVERSARIAL[name])
    assert MAX_INPUT_BYTES - 1024 < len(text.encode()) <= MAX_INPUT_BYTES
    result = parse(text, "tolerant")
    assert result.diagnostics and not result.ok
    check(text)


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_inputs_parse_in_linear_work(name: str) -> None:
    """Four times the input, about four times the calls (a quadratic parse would make sixteen)."""
    small, large = (counted_parse(_fill(*ADVERSARIAL[name], size=size), "tolerant")[1] for size in (16_384, 65_536))
    assert large <= 5 * small, f"{large} calls for 64 KiB against {small} for 16 KiB"


@FUZZ
@given(nodes())
def test_valid_nodes_stay_valid_under_whitespace_changes(node: Node) -> None:
    pieces = _STRING.split(render(node))  # odd pieces are string literals: leave them alone
    for at in range(0, len(pieces), 2):
        pieces[at] = pieces[at].replace(", ", ",\n    ").replace("⟩\n", "⟩\r\n\t\n")
    text = "".join(pieces)
    strict, _ = both_profiles(text)
    assert strict.ok and strict.node == node
