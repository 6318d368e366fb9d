"""Document-level parsing: the four layers, their markers and ordinals (spec §6).

A hand-written recursive-descent parser over the lexer's tokens; see :mod:`mneme.sttp.values` for the
objects, arrays and values inside a layer.
"""

from __future__ import annotations

from mneme.sttp.diagnostics import MAX_LAYERS
from mneme.sttp.lexer import LAYER_CHARS
from mneme.sttp.model import LayerName
from mneme.sttp.raw import RawLayer, RawValue, describe
from mneme.sttp.values import TERMINAL, ValueParser


class Parser(ValueParser):
    def parse_document(self) -> list[RawLayer]:
        """Every layer in source order; prose between layers is skipped with a deviation."""
        layers: list[RawLayer] = []
        while True:
            kind, start, end = self.peek()
            if kind == "EOF":
                return layers
            if kind == "LAYER" and len(layers) == MAX_LAYERS:
                message = f"more than {MAX_LAYERS} layer markers; the rest of the input was not parsed"
                self.rep.error("STTP-E101", start, end - start, message, "stopped parsing")
                return layers
            if kind == "LAYER":
                layers.append(self.parse_layer())
            elif kind in ("STOP", "NM"):
                self.advance()
                self.rep.error("STTP-E105", start, end - start, f"stray {describe(kind)} outside any layer")
            else:
                while self.peek()[0] not in ("EOF", "LAYER", "STOP", "NM"):
                    self.advance()
                span = (start, self.last_end() - start)
                self.rep.deviation("STTP-E104", *span, "text outside the four layers")

    def parse_layer(self) -> RawLayer:
        _, start, end = self.advance()
        name: LayerName = LAYER_CHARS[self.text[start]]  # type: ignore[assignment]
        if end - start != 2:
            self.rep.deviation("STTP-E017", start, end - start, "whitespace inside a layer marker")
        ordinal, ordinal_span = self._ordinal()
        if self.peek()[0] == "{":
            body = self.parse_object(1) or RawValue("obj", start, end)
        else:
            message = f"{name} layer payload is not wrapped in braces"
            self.rep.deviation("STTP-E107", start, end - start, message)
            body = RawValue("obj", start, end, members=self.parse_members("STOP", start, end - start, 1))
        kind, at, stop = self.peek()
        if kind not in TERMINAL:
            self.unexpected(kind, at, stop, "'⟩' after the layer object")
            while self.peek()[0] not in TERMINAL:
                self.advance()
        if self.peek()[0] == "STOP":
            self.advance()
        else:
            found = describe(self.peek()[0])
            self.rep.error("STTP-E103", start, end - start, f"{name} layer is not closed by ⟩ before {found}")
        return RawLayer(name, start, end, ordinal, ordinal_span, body)

    def _ordinal(self) -> tuple[int | None, tuple[int, int]]:
        if self.peek()[0] != "NM":
            return None, (0, 0)
        _, start, end = self.advance()
        kind, num_start, num_end = self.peek()
        if kind != "NUM":
            return None, (start, end - start)
        self.advance()
        if num_start != end:
            self.rep.deviation("STTP-E017", end, num_start - end, "whitespace between ⏣ and its ordinal")
        literal = self.text[num_start:num_end]
        if not (literal.isascii() and literal.isdigit() and len(literal) <= 18):
            self.rep.error(
                "STTP-E106",
                num_start,
                num_end - num_start,
                f"node ordinal {literal!r} is not a non-negative integer",
                "ignored the ordinal",
            )
            return None, (start, num_end - start)
        return int(literal), (start, num_end - start)
