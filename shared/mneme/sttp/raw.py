"""The raw syntax tree the parser builds: values with source spans, before schema checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mneme.sttp.model import LayerName

_NAMES = {
    "EOF": "end of input",
    "LAYER": "a layer marker",
    "STOP": "layer stop '⟩'",
    "NM": "node marker '⏣'",
    "STR": "a string",
    "USTR": "an unterminated string",
    "NUM": "a number",
    "IDENT": "an identifier",
    "REF": "a ref: reference",
    "BAD": "an unexpected character",
}


@dataclass(slots=True)
class RawValue:
    kind: str  # str | num | bool | null | ident | ref | obj | arr
    start: int
    end: int
    scalar: str | int | float | bool | None = None
    members: Sequence[RawMember] = ()
    items: Sequence[RawValue] = ()


@dataclass(slots=True)
class RawMember:
    key: str
    start: int
    end: int
    confidence: float | None
    confidence_state: str  # none | ok | bad (bad was already reported)
    value: RawValue | None


@dataclass(slots=True)
class RawLayer:
    name: LayerName
    start: int
    end: int
    ordinal: int | None
    ordinal_span: tuple[int, int]
    body: RawValue


def describe(kind: str) -> str:
    return _NAMES.get(kind, repr(kind))
