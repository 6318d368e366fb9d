"""The typed, canonical AST of an STTP node (spec §3-§7), plus a JSON form for snapshots.

A canonical AST is what the renderer writes and the strict profile reads back unchanged:

* layers are always in semantic order (provenance, envelope, content, metrics);
* :class:`Ident` appears only at the enum positions (``trigger``, ``response_format``, ``tier`` and
  ``prime.relevant_tier``); every other text value is a :class:`Str`;
* content members carry a confidence in ``[0, 1]``, members elsewhere carry none;
* members keep their source order; no key appears twice in one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mneme.models import TIERS as TIERS  # STTP's temporal tiers are the stored ones

LayerName = Literal["provenance", "envelope", "content", "metrics"]
LAYER_ORDER: tuple[LayerName, ...] = ("provenance", "envelope", "content", "metrics")
LAYER_MARKERS: dict[LayerName, str] = {
    "provenance": "⊕⟨",
    "envelope": "⦿⟨",
    "content": "◈⟨",
    "metrics": "⍉⟨",
}
LAYER_STOP = "⟩"
NODE_MARKER = "⏣"

TRIGGERS = ("scheduled", "threshold", "resonance", "seed", "manual")
RESPONSE_FORMATS = ("temporal_node", "natural_language", "hybrid")
AVEC_KEYS = ("stability", "friction", "logic", "autonomy", "psi")
ATTRACTOR_KEYS = ("stability", "friction", "logic", "autonomy")


@dataclass(frozen=True)
class Str:
    value: str


@dataclass(frozen=True)
class Num:
    value: int | float


@dataclass(frozen=True)
class Bool:
    value: bool


@dataclass(frozen=True)
class Null:
    pass


@dataclass(frozen=True)
class Ident:
    """A bare enum-like identifier (only at enum positions in a canonical AST)."""

    name: str


@dataclass(frozen=True)
class Member:
    key: str
    value: Value
    confidence: float | None = None


@dataclass(frozen=True)
class Obj:
    members: tuple[Member, ...] = ()

    def get(self, key: str) -> Value | None:
        for member in self.members:
            if member.key == key:
                return member.value
        return None


@dataclass(frozen=True)
class Arr:
    items: tuple[Value, ...] = ()


Value = Str | Num | Bool | Null | Ident | Obj | Arr


@dataclass(frozen=True)
class Node:
    provenance: Obj
    envelope: Obj
    content: Obj
    metrics: Obj
    ordinal: int = 0

    def layer(self, name: LayerName) -> Obj:
        layer: Obj = getattr(self, name)
        return layer


def plain(value: Value | None) -> Any:
    """The value as plain JSON-compatible Python (identifiers become strings, confidences dropped)."""
    if value is None or isinstance(value, Null):
        return None
    if isinstance(value, Str | Num | Bool):
        return value.value
    if isinstance(value, Ident):
        return value.name
    if isinstance(value, Arr):
        return [plain(item) for item in value.items]
    return {member.key: plain(member.value) for member in value.members}


def value_to_json(value: Value, content: bool = False) -> Any:
    """Compact, lossless JSON for snapshots: objects are dicts, content keys read ``name(confidence)``.

    Strings, numbers, booleans, null and arrays are themselves; an identifier is ``{"ident": name}``
    (so an extension object whose only key is ``ident`` would read back as an identifier: snapshots only).
    """
    if isinstance(value, Str | Num | Bool):
        return value.value
    if isinstance(value, Null):
        return None
    if isinstance(value, Ident):
        return {"ident": value.name}
    if isinstance(value, Arr):
        return [value_to_json(item, content) for item in value.items]
    out: dict[str, Any] = {}
    for member in value.members:
        key = member.key if member.confidence is None else f"{member.key}({member.confidence!r})"
        out[key] = value_to_json(member.value, content)
    return out


def value_from_json(data: Any, content: bool = False) -> Value:
    if isinstance(data, bool):
        return Bool(data)
    if isinstance(data, int | float):
        return Num(data)
    if isinstance(data, str):
        return Str(data)
    if data is None:
        return Null()
    if isinstance(data, list):
        return Arr(tuple(value_from_json(item, content) for item in data))
    if set(data) == {"ident"} and isinstance(data["ident"], str) and not content:
        return Ident(data["ident"])
    members = []
    for key, item in data.items():
        confidence = None
        if content:
            key, _, number = key.rpartition("(")
            confidence = float(number.rstrip(")"))
        members.append(Member(key, value_from_json(item, content), confidence))
    return Obj(tuple(members))


def node_to_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"ordinal": node.ordinal}
    for name in LAYER_ORDER:
        out[name] = value_to_json(node.layer(name), name == "content")
    return out


def node_from_json(data: dict[str, Any]) -> Node:
    layers = {}
    for name in LAYER_ORDER:
        value = value_from_json(data[name], name == "content")
        if not isinstance(value, Obj):
            raise ValueError(f"layer {name} must be an object")
        layers[name] = value
    return Node(ordinal=int(data.get("ordinal", 0)), **layers)
