"""Layer schemas (spec §7) and the raw-tree -> canonical-AST conversion that enforces S2 and S3.

Conversion canonicalises what §11 allows (known aliases, unambiguous numeric strings, quoted or
mis-cased enum values, bare identifiers and ``ref:`` references where a string is required, an omitted
AVEC ``psi`` derived from its four dimensions) and never fills in anything else: a missing key, an unknown
enum value or an invalid confidence is an error, so no canonical node is produced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from mneme.sttp.content import ValueConverter
from mneme.sttp.model import (
    ATTRACTOR_KEYS,
    AVEC_KEYS,
    RESPONSE_FORMATS,
    TIERS,
    TRIGGERS,
    Ident,
    LayerName,
    Member,
    Null,
    Num,
    Obj,
    Str,
    Value,
)
from mneme.sttp.raw import RawValue

NUMERIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
PSI_TOLERANCE = 0.01  # psi is written to two decimals; the sum of four such dimensions rounds within this
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}")


@dataclass(frozen=True)
class Field:
    kind: str  # enum | str | int | num | parent | timestamp | obj
    required: bool = True
    choices: tuple[str, ...] = ()
    sub: dict[str, Field] | None = None


AVEC = {key: Field("num") for key in AVEC_KEYS}
ATTRACTOR = {key: Field("num") for key in ATTRACTOR_KEYS}
PRIME = {
    "attractor_config": Field("obj", sub=ATTRACTOR),
    "context_summary": Field("str"),
    "relevant_tier": Field("enum", choices=TIERS),
    "retrieval_budget": Field("int"),
}
SCHEMAS: dict[LayerName, dict[str, Field]] = {
    "provenance": {
        "trigger": Field("enum", choices=TRIGGERS),
        "response_format": Field("enum", choices=RESPONSE_FORMATS),
        "origin_session": Field("str"),
        "compression_depth": Field("int"),
        "parent_node": Field("parent"),
        "prime": Field("obj", sub=PRIME),
    },
    "envelope": {
        "timestamp": Field("timestamp"),
        "tier": Field("enum", choices=TIERS),
        "session_id": Field("str"),
        "schema_version": Field("str", required=False),
        "user_avec": Field("obj", sub=AVEC),
        "model_avec": Field("obj", sub=AVEC),
    },
    "metrics": {
        "rho": Field("num"),
        "kappa": Field("num"),
        "psi": Field("num"),
        "compression_avec": Field("obj", sub=AVEC),
    },
}
_EXPECTED = {
    "obj": "an object",
    "int": "an integer",
    "num": "a number",
    "str": "a string",
    "parent": "null or a string",
    "timestamp": "a date-time string",
    "enum": "an enum identifier",
}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


_KNOWN = {key for schema in (*SCHEMAS.values(), PRIME) for key in schema}
ALIASES: dict[str, str] = {_camel(key): key for key in _KNOWN if "_" in key}
ALIASES |= {"comp_avec": "compression_avec", "parent_node_id": "parent_node"}
"""§11.2 known aliases: camelCase spellings of the canonical keys, plus two legacy names."""


class Converter(ValueConverter):
    def layer(self, name: LayerName, body: RawValue) -> Obj:
        if name == "metrics":
            metrics = self.known(body, SCHEMAS[name], name)
            self.psi_coherence(body, metrics)
            return metrics
        if name != "content":
            return self.known(body, SCHEMAS[name], name)
        if not body.members:
            span = (body.start, self._open_len(body))
            self.rep.error("STTP-E300", *span, "content layer has no semantic field")
        return self.content_object(body, 1)

    def known(self, raw: RawValue, schema: dict[str, Field], path: str) -> Obj:
        members: list[Member] = []
        seen: set[str] = set()
        for member in raw.members:
            key, target = member.key, ALIASES.get(member.key)
            if key not in schema and target in schema:
                message = f"{path}.{key} is an alias of {target}"
                self.rep.deviation("STTP-E202", member.start, member.end - member.start, message)
                key = target
            if not self.unique(member, key, seen, path):
                continue
            self.no_confidence(member, path)
            field = schema.get(key)
            if field is None:
                value = self.generic(member.value, f"{path}.{key}")
            else:
                value = self.field(member.value, field, f"{path}.{key}")
            if value is not None:
                members.append(Member(key, value))
        for key, field in schema.items():
            if field.required and key not in seen:
                self._missing(raw, schema, key, f"{path}.{key}", members, seen)
        return Obj(tuple(members))

    def psi_coherence(self, raw: RawValue, metrics: Obj) -> None:
        """§12: the metrics' psi agrees with the compression AVEC's psi (to PSI_TOLERANCE)."""
        psi, compression = metrics.get("psi"), metrics.get("compression_avec")
        expected = compression.get("psi") if isinstance(compression, Obj) else None
        if not isinstance(psi, Num) or not isinstance(expected, Num):
            return
        if abs(float(psi.value) - float(expected.value)) <= PSI_TOLERANCE:
            return
        where = next((m for m in raw.members if m.key == "psi"), None)
        span = (where.start, where.end - where.start) if where is not None else (raw.start, self._open_len(raw))
        message = f"metrics.psi {psi.value!r} disagrees with metrics.compression_avec.psi {expected.value!r}"
        self.rep.deviation("STTP-E211", *span, message)

    def _missing(
        self,
        raw: RawValue,
        schema: dict[str, Field],
        key: str,
        path: str,
        members: list[Member],
        seen: set[str],
    ) -> None:
        span = (raw.start, self._open_len(raw))
        dims = [m.value.value for m in members if m.key in ATTRACTOR_KEYS and isinstance(m.value, Num)]
        if key == "psi" and schema is AVEC and len(dims) == len(ATTRACTOR_KEYS):
            derived = round(float(sum(dims)), 6)
            self.rep.deviation("STTP-E209", *span, f"{path} omitted", f"derived psi = {derived!r}")
            members.append(Member("psi", Num(derived)))
        else:
            self.rep.error("STTP-E200", *span, f"missing required key {path}")

    def field(self, raw: RawValue | None, field: Field, path: str) -> Value | None:
        if raw is None:
            return None
        kind, span = field.kind, (raw.start, raw.end - raw.start)
        if kind == "enum" and raw.kind in ("ident", "str"):
            return self._enum(raw, field.choices, path)
        if kind == "obj" and raw.kind == "obj":
            return self.known(raw, field.sub or {}, path)
        if kind in ("int", "num") and raw.kind in ("num", "str"):
            return self._number(raw, kind == "int", path)
        if kind == "parent" and raw.kind == "null":
            return Null()
        if kind == "parent" and raw.kind == "ref":
            message = f"{path} uses the legacy ref: form"
            self.rep.deviation("STTP-E117", *span, message, f"normalised to the string {raw.scalar!r}")
            return Str(str(raw.scalar))
        if kind == "timestamp" and raw.kind == "str":
            if _is_timestamp(str(raw.scalar)):
                return Str(str(raw.scalar))
            self.rep.error("STTP-E208", *span, f"{path} {raw.scalar!r} is not an ISO-8601 date-time")
            return None
        text = self.text_value(raw, path) if kind in ("str", "parent") else None
        if text is None:
            self.rep.error("STTP-E205", *span, f"{path} must be {_EXPECTED[kind]}, found {raw.kind}")
        return text

    def _enum(self, raw: RawValue, choices: tuple[str, ...], path: str) -> Value | None:
        word, span = str(raw.scalar), (raw.start, raw.end - raw.start)
        if raw.kind == "ident" and word in choices:
            return Ident(word)
        canonical = word.strip().lower()
        if canonical in choices:
            message = f"{path} enum value {word!r} is quoted or not lower case"
            self.rep.deviation("STTP-E204", *span, message, f"normalised to {canonical}")
            return Ident(canonical)
        self.rep.error("STTP-E203", *span, f"{path} value {word!r} is not one of {'|'.join(choices)}")
        return None

    def _number(self, raw: RawValue, integer: bool, path: str) -> Value | None:
        number, span = raw.scalar, (raw.start, raw.end - raw.start)
        if raw.kind == "str":
            text = str(raw.scalar).strip()
            if not NUMERIC.fullmatch(text) or len(text) > 64:
                message = f"{path} must be a number, found the string {raw.scalar!r}"
                self.rep.error("STTP-E205", *span, message)
                return None
            number = float(text) if any(char in text for char in ".eE") else int(text)
            if number in (float("inf"), float("-inf")):
                self.rep.error("STTP-E015", *span, f"{path} is not a finite number")
                return None
            self.rep.deviation("STTP-E206", *span, f"{path} is a numeric string", f"converted to {number!r}")
        assert isinstance(number, int | float) and not isinstance(number, bool)
        if integer and isinstance(number, float):
            if not number.is_integer():
                self.rep.error("STTP-E205", *span, f"{path} must be an integer, found {number!r}")
                return None
            message = f"{path} is written as a decimal"
            self.rep.deviation("STTP-E207", *span, message, f"converted to {int(number)}")
            number = int(number)
        return Num(number)

    def _open_len(self, raw: RawValue) -> int:
        return 1 if self.text[raw.start : raw.start + 1] == "{" else raw.end - raw.start


def _is_timestamp(text: str) -> bool:
    if not _TIMESTAMP.match(text):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
