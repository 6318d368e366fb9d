"""Bridges between STTP nodes and Mneme episodes (ingestion and export).

``node_to_episode_fields`` flattens a node into the fields an episode store needs. The content layer
becomes searchable text, one ``path: value`` line per leaf (nested keys joined by dots); a node whose
content is a single string field named ``text`` (what ``episode_to_node`` writes) yields that string
verbatim. Everything else goes into ``metadata`` as plain JSON, including the content with its
confidences, so that an export can rebuild the node.

``episode_to_node`` builds a strict-valid node for export. Defaults, used only where ``metadata`` does not
carry a value (for example an episode that never came from STTP):

* AVEC (user, model and attractor): stability = friction = logic = autonomy = 0.5, psi = 2.0 (neutral);
  compression AVEC falls back to the model AVEC (persistence model §7.3); a missing psi is the sum;
* metrics rho = kappa = 1.0 and psi = compression psi (a verbatim export loses nothing);
* provenance trigger = manual, response_format = temporal_node, compression_depth = 0, parent_node = null,
  context_summary = the first line of the text (at most 200 characters), relevant_tier = the tier,
  retrieval_budget = 8;
* content ``{ text(1.0): "<text>" }`` (the episode text verbatim, confidence 1.0) unless
  ``metadata["content"]`` flattens to exactly ``text``.

``session_id`` becomes ``provenance.origin_session`` (and ``envelope.session_id`` unless the metadata
carries one); ``occurred_at`` becomes ``envelope.timestamp`` (UTC, ``Z``; a naive datetime is taken as
UTC), keeping the metadata's original spelling when it denotes the same instant. Known keys are written in
schema order, followed by any extension keys found in ``metadata``; metadata keys other than ``avec``,
``metrics``, ``provenance``, ``envelope``, ``content`` and ``sttp`` are ignored. The result is checked with
the strict profile and ``ValueError`` is raised if it is not strict-valid (an unknown tier, a bad enum in
the metadata, a non-finite number, content nested too deep...).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mneme.sttp.api import parse
from mneme.sttp.model import (
    AVEC_KEYS,
    TIERS,
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
    plain,
)
from mneme.sttp.render import render

DEFAULT_AVEC = {"stability": 0.5, "friction": 0.5, "logic": 0.5, "autonomy": 0.5}
DEFAULT_CONFIDENCE = 1.0
DEFAULT_RETRIEVAL_BUDGET = 8
SUMMARY_CHARS = 200
_ENUMS = {"prime": ("relevant_tier",), "provenance": ("trigger", "response_format"), "envelope": ("tier",)}
_ORDER = {
    "provenance": (
        "trigger",
        "response_format",
        "origin_session",
        "compression_depth",
        "parent_node",
        "prime",
    ),
    "prime": ("attractor_config", "context_summary", "relevant_tier", "retrieval_budget"),
    "envelope": ("timestamp", "tier", "session_id", "schema_version", "user_avec", "model_avec"),
    "metrics": ("rho", "kappa", "psi", "compression_avec"),
}


def node_to_episode_fields(node: Node) -> dict[str, Any]:
    envelope, metrics = plain(node.envelope), plain(node.metrics)
    timestamp = envelope.get("timestamp")
    return {
        "text": content_text(node.content),
        "tier": envelope.get("tier"),
        "session_id": plain(node.provenance.get("origin_session")),
        "occurred_at": _datetime(timestamp) if isinstance(timestamp, str) else None,
        "metadata": {
            "avec": {
                "user": envelope.pop("user_avec", None),
                "model": envelope.pop("model_avec", None),
                "compression": metrics.pop("compression_avec", None),
            },
            "metrics": metrics,
            "provenance": plain(node.provenance),
            "envelope": envelope,
            "content": content_to_json(node.content),
            "sttp": {"ordinal": node.ordinal},
        },
    }


def episode_to_node(
    text: str, tier: str, session_id: str, occurred_at: datetime | str, metadata: dict[str, Any] | None = None
) -> Node:
    """A strict-valid node for an episode; raises ValueError when the inputs cannot make one."""
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    meta = metadata or {}
    avec = _dict(meta.get("avec"))
    user = _avec(avec.get("user"), DEFAULT_AVEC)
    model = _avec(avec.get("model"), DEFAULT_AVEC)
    compression = _avec(avec.get("compression"), model)
    provenance = _provenance(_dict(meta.get("provenance")), text, tier, session_id, user)
    envelope = _envelope(_dict(meta.get("envelope")), occurred_at, tier, session_id, user, model)
    met_meta = _dict(meta.get("metrics"))
    metrics = _ordered(
        "metrics",
        met_meta,
        {
            "rho": met_meta.get("rho", 1.0),
            "kappa": met_meta.get("kappa", 1.0),
            "psi": met_meta.get("psi", compression["psi"]),
            "compression_avec": compression,
        },
    )
    ordinal = _dict(meta.get("sttp")).get("ordinal", 0)
    return _strict(
        Node(
            provenance=_obj(provenance, _ENUMS["provenance"]),
            envelope=_obj(envelope, _ENUMS["envelope"]),
            content=_content(meta.get("content"), text),
            metrics=_obj(metrics),
            ordinal=ordinal if isinstance(ordinal, int) and not isinstance(ordinal, bool) and ordinal >= 0 else 0,
        )
    )


def _provenance(
    prov_meta: dict[str, Any], text: str, tier: str, session_id: str, user: dict[str, Any]
) -> dict[str, Any]:
    """The provenance layer: what the episode's metadata kept of it, the rest from the episode."""
    prime_meta = _dict(prov_meta.get("prime"))
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    prime = _ordered_obj(
        "prime",
        prime_meta,
        {
            "attractor_config": _attractor(prime_meta.get("attractor_config"), user),
            "context_summary": prime_meta.get("context_summary", first_line[:SUMMARY_CHARS]),
            "relevant_tier": prime_meta.get("relevant_tier", tier),
            "retrieval_budget": prime_meta.get("retrieval_budget", DEFAULT_RETRIEVAL_BUDGET),
        },
    )
    return _ordered(
        "provenance",
        prov_meta,
        {
            "trigger": prov_meta.get("trigger", "manual"),
            "response_format": prov_meta.get("response_format", "temporal_node"),
            "origin_session": session_id,
            "compression_depth": prov_meta.get("compression_depth", 0),
            "parent_node": prov_meta.get("parent_node"),
            "prime": prime,
        },
    )


def _envelope(
    env_meta: dict[str, Any],
    occurred_at: datetime | str,
    tier: str,
    session_id: str,
    user: dict[str, Any],
    model: dict[str, Any],
) -> dict[str, Any]:
    """The envelope layer; its timestamp is the metadata's own text when it names the same instant."""
    instant = _datetime(occurred_at)
    original = env_meta.get("timestamp")
    same = isinstance(original, str) and _parses(original) and _datetime(original) == instant
    stamp = original if same else instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
    known = {"timestamp": stamp, "tier": tier, "session_id": env_meta.get("session_id", session_id)}
    if "schema_version" in env_meta:
        known["schema_version"] = env_meta["schema_version"]
    return _ordered("envelope", env_meta, known | {"user_avec": user, "model_avec": model})


def _strict(node: Node) -> Node:
    """`node`, once it renders and parses back strict-valid; ValueError naming what fails otherwise."""
    try:
        check = parse(render(node), "strict")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata cannot be rendered as STTP: {exc}") from exc
    if not check.ok:
        raise ValueError(
            "episode does not make a strict-valid node: "
            + "; ".join(f"{d.code} {d.message}" for d in check.diagnostics[:5])
        )
    return node


def content_text(content: Obj) -> str:
    """Searchable text of a content layer (see the module docstring)."""
    only = content.members[0] if len(content.members) == 1 else None
    if only is not None and only.key == "text" and isinstance(only.value, Str):
        return only.value.value
    lines: list[str] = []
    _flatten(content, "", lines)
    return "\n".join(lines)


def content_to_json(value: Value) -> Any:
    """Content as JSON: objects map each key to ``{"confidence": c, "value": ...}``."""
    if isinstance(value, Obj):
        return {m.key: {"confidence": m.confidence, "value": content_to_json(m.value)} for m in value.members}
    if isinstance(value, Arr):
        return [content_to_json(item) for item in value.items]
    return plain(value)


def content_from_json(data: Any) -> Value:
    if isinstance(data, dict):
        members = []
        for key, entry in data.items():
            if not isinstance(entry, dict) or "value" not in entry:
                raise ValueError(f"content member {key!r} must be {{'confidence', 'value'}}")
            confidence = entry.get("confidence", DEFAULT_CONFIDENCE)
            members.append(Member(str(key), content_from_json(entry["value"]), float(confidence)))
        return Obj(tuple(members))
    if isinstance(data, list):
        return Arr(tuple(content_from_json(item) for item in data))
    return _scalar(data, enum=False)


def _flatten(value: Value, path: str, lines: list[str]) -> None:
    if isinstance(value, Obj):
        for member in value.members:
            _flatten(member.value, f"{path}.{member.key}" if path else member.key, lines)
    elif isinstance(value, Arr):
        for item in value.items:
            _flatten(item, path, lines)
    else:
        scalar = plain(value)
        shown = "null" if scalar is None else str(scalar).lower() if isinstance(scalar, bool) else str(scalar)
        lines.append(f"{path}: {shown}")


def _content(data: Any, text: str) -> Obj:
    if data is not None:
        try:
            rebuilt = content_from_json(data)
        except (TypeError, ValueError):
            rebuilt = None
        if isinstance(rebuilt, Obj) and rebuilt.members and content_text(rebuilt) == text:
            return rebuilt
    return Obj((Member("text", Str(text), DEFAULT_CONFIDENCE),))


def _avec(data: Any, fallback: dict[str, Any]) -> dict[str, Any]:
    given = _dict(data)
    avec = {key: given.get(key, fallback[key]) for key in DEFAULT_AVEC}
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in avec.values())
    psi = given.get("psi", round(float(sum(avec.values())), 6) if numeric else None)
    return avec | {"psi": psi} | _extra(given, AVEC_KEYS)


def _attractor(data: Any, user: dict[str, Any]) -> dict[str, Any]:
    given = _dict(data)
    return {key: given.get(key, user[key]) for key in DEFAULT_AVEC} | _extra(given, tuple(DEFAULT_AVEC))


def _ordered(kind: str, source: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    return {key: known[key] for key in _ORDER[kind] if key in known} | _extra(source, _ORDER[kind])


def _extra(data: Any, known: tuple[str, ...] = AVEC_KEYS) -> dict[str, Any]:
    return {k: v for k, v in _dict(data).items() if k not in known}


def _ordered_obj(kind: str, source: dict[str, Any], known: dict[str, Any]) -> Obj:
    return _obj(_ordered(kind, source, known), _ENUMS[kind])


def _obj(data: dict[str, Any], enums: tuple[str, ...] = ()) -> Obj:
    """An object from plain data; strings under ``enums`` become identifiers, built values pass through."""
    return Obj(tuple(Member(key, _scalar(value, enum=key in enums)) for key, value in data.items()))


def _scalar(value: Any, enum: bool) -> Value:
    if isinstance(value, Str | Num | Bool | Null | Ident | Obj | Arr):
        return value
    if isinstance(value, dict):
        return _obj(value)
    if isinstance(value, list | tuple):
        return Arr(tuple(_scalar(item, enum=False) for item in value))
    if value is None:
        return Null()
    if isinstance(value, bool):
        return Bool(value)
    if isinstance(value, int | float):
        return Num(value)
    if isinstance(value, str):
        return Ident(value) if enum else Str(value)
    raise ValueError(f"cannot represent {type(value).__name__} in STTP")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _parses(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _datetime(value: datetime | str) -> datetime:
    instant = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
