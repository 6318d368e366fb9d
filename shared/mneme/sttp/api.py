"""``parse``: text -> :class:`ParseResult` under the strict or tolerant profile (spec §9). Never raises."""

from __future__ import annotations

from dataclasses import dataclass, field

from mneme.sttp.diagnostics import MAX_INPUT_BYTES, Diagnostic, Profile, Reporter, Span
from mneme.sttp.lexer import tokenize
from mneme.sttp.model import LAYER_ORDER, LayerName, Node, Obj
from mneme.sttp.parser import Parser
from mneme.sttp.raw import RawLayer
from mneme.sttp.schema import Converter


@dataclass(frozen=True)
class ParseResult:
    ok: bool
    """No error diagnostic under the requested profile (and then ``node`` is set)."""
    strict_valid: bool
    """The strict profile accepts this exact text (true for a tolerant parse only when nothing deviated)."""
    node: Node | None
    """The canonical AST; only set when ``ok``."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    raw: str = ""
    """The input, untouched."""
    profile: Profile = "strict"


def parse(text: str, profile: Profile = "strict") -> ParseResult:
    """Parse one STTP node. Errors are reported as diagnostics, never raised."""
    raw = text if isinstance(text, str) else ""
    if profile not in ("strict", "tolerant") or not isinstance(text, str):
        what = "text must be a str" if not isinstance(text, str) else f"unknown profile {profile!r}"
        return _rejected(raw, "strict", "STTP-E001", what)
    try:
        if len(text) > MAX_INPUT_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
            return _rejected(text, profile, "STTP-E002", f"input is larger than {MAX_INPUT_BYTES} bytes")
        return _parse(text, profile)
    except Exception as exc:  # the contract is to report, not raise; tests assert this never happens
        return _rejected(text, profile, "STTP-E000", f"internal parser failure: {type(exc).__name__}")


def _rejected(text: str, profile: Profile, code: str, message: str) -> ParseResult:
    diagnostic = Diagnostic(code, message, Span(1, 1, 0, 0), "error", "none: input not parsed", True)
    return ParseResult(False, False, None, [diagnostic], text, profile)


def _parse(text: str, profile: Profile) -> ParseResult:
    reporter = Reporter(text, profile)
    tokens = tokenize(text, reporter)
    raw_layers = Parser(text, tokens, reporter).parse_document()
    layers, ordinal = _assemble(raw_layers, reporter)
    converter = Converter(reporter)
    bodies: dict[LayerName, Obj] = {name: converter.layer(name, layer.body) for name, layer in layers.items()}
    node = None
    if not reporter.has_error and len(bodies) == len(LAYER_ORDER):
        node = Node(ordinal=ordinal, **bodies)
    diagnostics = reporter.finish()
    ok = node is not None
    strict_valid = ok and not reporter.strict_invalid
    return ParseResult(ok, strict_valid, node, diagnostics, text, profile)


def _assemble(raw_layers: list[RawLayer], reporter: Reporter) -> tuple[dict[LayerName, RawLayer], int]:
    """Pick one layer of each kind, in canonical order (S1); check ordinals; report missing layers."""
    if not raw_layers:
        reporter.error("STTP-E006", 0, 0, "no STTP layer marker (⊕⟨ ⦿⟨ ◈⟨ ⍉⟨) found")
        return {}, 0
    layers: dict[LayerName, RawLayer] = {}
    highest = -1
    for layer in raw_layers:
        if layer.name in layers:
            reporter.error(
                "STTP-E101",
                layer.start,
                layer.end - layer.start,
                f"second {layer.name} layer (first at offset {layers[layer.name].start})",
                "ignored the second layer",
            )
            continue
        rank = LAYER_ORDER.index(layer.name)
        if rank < highest:
            reporter.deviation(
                "STTP-E102",
                layer.start,
                layer.end - layer.start,
                f"{layer.name} layer appears after the {LAYER_ORDER[highest]} layer",
                "reordered the layers canonically",
            )
        highest = max(highest, rank)
        layers[layer.name] = layer
    ordinal: int | None = None
    for layer in raw_layers:
        if layers.get(layer.name) is not layer or layer.ordinal is None:
            continue
        if ordinal is not None and layer.ordinal != ordinal:
            offset, length = layer.ordinal_span
            reporter.error(
                "STTP-E106",
                offset,
                length,
                f"{layer.name} layer is node ⏣{layer.ordinal}, earlier layers are node ⏣{ordinal}",
                "none: layers of different nodes cannot be combined",
            )
        ordinal = layer.ordinal if ordinal is None else ordinal
    for rank, name in enumerate(LAYER_ORDER):
        if name not in layers:
            later = [layers[n].start for n in LAYER_ORDER[rank + 1 :] if n in layers]
            at = min(later) if later else len(reporter.text)
            reporter.error("STTP-E100", at, 0, f"missing {name} layer", "none: layers are never fabricated")
    return {name: layers[name] for name in LAYER_ORDER if name in layers}, ordinal or 0
