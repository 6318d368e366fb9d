"""Canonical rendering (spec §11): a node written so that the strict profile reads it back unchanged (a node
whose psi disagrees with its compression AVEC, which only tolerant accepts and keeps as written, reads back
unchanged in tolerant, with that one finding).

Canonical text is one line per layer, in semantic order, each ``<marker> ⏣<ordinal>{ ... } ⟩``, members
``key: value`` separated by ``", "``, content keys ``name(.confidence)``. Keys are bare when they are
identifiers and JSON strings otherwise. Strings are JSON-escaped and, in addition, the protocol characters
⟨ ⟩ ⏣ are written as ``\\u`` escapes so that no rendered string can be mistaken for a marker by any reader.
Numbers use Python's shortest round-trip form; confidences drop the leading zero and use positional
notation unless that would exceed 24 characters (values below about 1e-20).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

from mneme.sttp.model import (
    LAYER_MARKERS,
    LAYER_ORDER,
    LAYER_STOP,
    NODE_MARKER,
    Arr,
    Bool,
    Ident,
    Member,
    Node,
    Null,
    Num,
    Obj,
    Str,
    Value,
)

_MAX_FIXED = 24
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPOOF = str.maketrans({"⟨": "\\u27e8", "⟩": "\\u27e9", "⏣": "\\u23e3"})


def render(node: Node) -> str:
    """The canonical, strict-valid text of ``node`` (raises ValueError for a non-finite number)."""
    lines = []
    for name in LAYER_ORDER:
        body = render_value(node.layer(name))
        lines.append(f"{LAYER_MARKERS[name]} {NODE_MARKER}{node.ordinal}{body} {LAYER_STOP}")
    return "\n".join(lines)


def render_value(value: Value) -> str:
    if isinstance(value, Obj):
        if not value.members:
            return "{}"
        return "{ " + ", ".join(_member(member) for member in value.members) + " }"
    if isinstance(value, Arr):
        return "[" + ", ".join(render_value(item) for item in value.items) + "]"
    if isinstance(value, Str):
        return render_string(value.value)
    if isinstance(value, Num):
        return _number(value.value)
    if isinstance(value, Bool):
        return "true" if value.value else "false"
    if isinstance(value, Null):
        return "null"
    if isinstance(value, Ident):
        return value.name
    raise TypeError(f"not an STTP value: {value!r}")


def render_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).translate(_SPOOF)


def render_key(key: str) -> str:
    return key if _IDENT.fullmatch(key) else render_string(key)


def render_confidence(confidence: float) -> str:
    if not math.isfinite(confidence):
        raise ValueError(f"confidence must be finite, got {confidence!r}")
    text = repr(float(confidence))
    if "e" in text:
        fixed = format(Decimal(text), "f")
        text = fixed if len(fixed) <= _MAX_FIXED else text  # only sub-1e-20 values keep an exponent
    if text.startswith("0."):
        text = text[1:]
    return text


def _member(member: Member) -> str:
    key = render_key(member.key)
    if member.confidence is not None:
        key += f"({render_confidence(member.confidence)})"
    return f"{key}: {render_value(member.value)}"


def _number(number: int | float) -> str:
    if isinstance(number, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(number, int):
        return str(number)
    if not math.isfinite(number):
        raise ValueError(f"numbers must be finite, got {number!r}")
    return repr(number)
