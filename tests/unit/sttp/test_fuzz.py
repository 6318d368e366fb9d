"""Fuzzing: random text, token soup, mutated valid nodes, deep nesting and 1 MiB adversarial inputs.

Every input must parse without raising, within a time bound, satisfy the contract checked by
``both_profiles`` (ordering, severities, strict/tolerant agreement, render round trip when a node is
returned, determinism) and carry at least one error diagnostic whenever it is rejected.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mneme.sttp import Node, render
from mneme.sttp.diagnostics import MAX_INPUT_BYTES

from .strategies import nodes
from .support import both_profiles, spec_example, timed_parse

# Guards against super-linear parsing, not a speed target: a quadratic parse of 1 MiB takes minutes, a linear
# one 0.05-0.25 s alone (several times that under `make test`'s coverage tracing on a loaded machine).
FAST = 2.0  # CPU seconds, for inputs of a few KiB
MIB_BOUND = 5.0  # CPU seconds, for 1 MiB inputs
TOKENS = [
    "⊕⟨", "⦿⟨", "◈⟨", "⍉⟨", "⟩", "⏣", "⏣0", "{", "}", "[", "]", "(", ")", ",", ":", "|", "=", '"', "\\",
    "\n", " ", "\u00a0", "\ufeff", "ref:x", "manual", "raw", "true", "null", "1", "-2.5e3", ".99", "1e999",
    "trigger", "tier", "psi", "focus(.9)", '"s"', "@", "\x00", "⟨",
]  # fmt: skip
_STRING = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")')
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(text: str, bound: float = FAST) -> None:
    results = {}
    for profile in ("strict", "tolerant"):
        result, elapsed = timed_parse(text, profile)
        assert elapsed < bound, f"{profile} parse took {elapsed:.2f}s of CPU"
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
    check(text, MIB_BOUND)


def _fill(prefix: str, unit: str, suffix: str = "") -> str:
    room = MAX_INPUT_BYTES - len(prefix.encode()) - len(suffix.encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


ADVERSARIAL_MIB = {
    "open braces": _fill("", "{"),
    "open braces in a layer": _fill("◈⟨ { a(.5): ", "{"),
    "alternating containers": _fill("◈⟨ { a(.5): ", "[{b(.5): "),
    "pipes": _fill("◈⟨ { ", "|"),
    "identifiers": _fill("", "a "),
    "members": _fill("◈⟨ { ", "k(.5): 1, ", "} ⟩"),
    "escapes in one string": _fill('◈⟨ { a(.5): "', "\\n", '" } ⟩'),
    "invalid escapes": _fill('◈⟨ { a(.5): "', "\\q", '" } ⟩'),
    "unterminated string": _fill('◈⟨ { a(.5): "', "x"),
    "escaped quotes": _fill("", '\\"\n'),
    "markers": _fill("", "⊕⟨ ⟩"),
    "markers in a string": _fill('◈⟨ { a(.5): "', "⟩⏣⟨", '" } ⟩'),
    "bad characters": _fill("◈⟨ { a(.5): ", "@"),
    "nbsp": _fill("◈⟨ {", "\u00a0"),
    "long numbers": _fill("◈⟨ { a(.5): [", "1" * 70 + ","),
    "spec example repeated": _fill("", spec_example()),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ADVERSARIAL_MIB))
def test_one_mebibyte_adversarial_inputs(name: str) -> None:
    text = ADVERSARIAL_MIB[name]
    assert MAX_INPUT_BYTES - 1024 < len(text.encode()) <= MAX_INPUT_BYTES
    result, elapsed = timed_parse(text, "tolerant")
    assert elapsed < MIB_BOUND, f"tolerant parse took {elapsed:.2f}s of CPU"
    assert result.diagnostics and not result.ok
    check(text, MIB_BOUND)


@FUZZ
@given(nodes())
def test_valid_nodes_stay_valid_under_whitespace_changes(node: Node) -> None:
    pieces = _STRING.split(render(node))  # odd pieces are string literals: leave them alone
    for at in range(0, len(pieces), 2):
        pieces[at] = pieces[at].replace(", ", ",\n    ").replace("⟩\n", "⟩\r\n\t\n")
    text = "".join(pieces)
    strict, _ = both_profiles(text)
    assert strict.ok and strict.node == node
