"""Diagnostics (spec §10): stable codes, spans, severities, recovery actions and strict impact.

Every problem the lexer, parser or schema check finds is one of three kinds:

* ``error``: the text cannot be read as a valid node without inventing or discarding meaning. Errors are
  errors in both profiles; the node is not returned.
* ``deviation``: a legacy or non-canonical form (§9.2) with one deterministic canonical reading. The strict
  profile reports it as an error (fail closed, §9.1); the tolerant profile reports it as a warning and
  canonicalises it (§9.2, §11).
* ``info``: informational only, never affects strict validity.

Both profiles run the same code path, so a tolerant parse is strict-valid exactly when it has no diagnostic
with ``strict_impact``. Offsets, columns and lengths count Unicode code points of the input ``str``; lines are
split on ``\\n`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]
Profile = Literal["strict", "tolerant"]
Kind = Literal["error", "deviation", "info"]

MAX_INPUT_BYTES = 1024 * 1024
"""Inputs larger than this (UTF-8 bytes) get one diagnostic and are not parsed."""
MAX_NESTING = 64
"""Hard container nesting cap for every layer; deeper containers are skipped iteratively."""
MAX_TOKENS = 100_000
"""Lexing stops after this many tokens (bounds time and memory on adversarial input). A node is a few
hundred tokens; even one carrying a 10k-element array stays far below this."""
MAX_LAYERS = 8
"""Layer markers parsed per input (a node has four); parsing stops at the next one."""
MAX_DIAGNOSTICS = 100
"""Errors kept per parse, and non-errors kept per parse; the rest are counted in one STTP-E005 info."""
MAX_NUMBER_CHARS = 64
CONTENT_MAX_DEPTH = 5
"""S5: the content layer's root object is depth 1; each nested object or array adds one."""

# code -> (kind, title, default recovery). Titles are the stable meaning; messages add the specifics.
CODES: dict[str, tuple[Kind, str, str]] = {
    "STTP-E000": (
        "error",
        "internal parser failure (a bug: the parser never raises)",
        "none: input rejected",
    ),
    "STTP-E001": ("error", "invalid argument (profile or input type)", "none: input not parsed"),
    "STTP-E002": ("error", "input exceeds the size limit", "none: input not parsed"),
    "STTP-E003": ("error", "container nesting exceeds the hard limit", "skipped the container"),
    "STTP-E004": ("error", "token limit exceeded", "stopped reading the input"),
    "STTP-E005": ("info", "further diagnostics were truncated", "none"),
    "STTP-E006": ("error", "no STTP layer marker found", "none: nothing to parse"),
    "STTP-E010": ("error", "unexpected character", "skipped to the next delimiter"),
    "STTP-E011": ("error", "unterminated string literal", "read to the end of input"),
    "STTP-E012": ("deviation", "invalid escape sequence in a string", "kept the characters literally"),
    "STTP-E013": ("deviation", "raw control character in a string", "kept; the renderer escapes it"),
    "STTP-E014": (
        "deviation",
        "protocol marker inside a string (marker spoofing)",
        "kept as text; rendered escaped",
    ),
    "STTP-E015": ("error", "numeric literal too long or not finite", "dropped the value"),
    "STTP-E016": ("deviation", "non-ASCII whitespace or byte-order mark", "treated as whitespace"),
    "STTP-E017": ("deviation", "whitespace inside a compound token", "joined the token"),
    "STTP-E100": ("error", "required layer missing", "none: layers are never fabricated"),
    "STTP-E101": ("error", "duplicate layer (layer confusion)", "ignored the second layer"),
    "STTP-E102": ("deviation", "layer out of order (S1)", "reordered the layers canonically"),
    "STTP-E103": ("error", "layer not closed by ⟩ (layer bleed-through)", "closed the layer there"),
    "STTP-E104": ("deviation", "text outside the layers", "ignored it"),
    "STTP-E105": ("error", "stray layer stop or node marker outside a layer", "ignored it"),
    "STTP-E106": ("error", "invalid or conflicting node ordinal", "none: the ordinal identifies the node"),
    "STTP-E107": ("deviation", "layer payload without braces (omitted wrapper)", "read the members up to ⟩"),
    "STTP-E110": ("error", "unexpected token", "skipped to the next delimiter"),
    "STTP-E111": ("error", "unclosed object or array", "closed the container there"),
    "STTP-E112": ("error", "unmatched closing bracket", "ignored it"),
    "STTP-E113": ("deviation", "missing ',' between members or items", "inserted ','"),
    "STTP-E114": ("deviation", "extra or trailing delimiter", "ignored it"),
    "STTP-E115": ("deviation", "compact pipe '|' delimiter", "read it as ','"),
    "STTP-E116": ("deviation", "compact '=' key-value separator", "read it as ':'"),
    "STTP-E117": ("deviation", "legacy ref: parent reference", "normalised to a string"),
    "STTP-E118": ("deviation", "unquoted value where a string is required", "read it as a string"),
    "STTP-E200": ("error", "required key missing (S2)", "none: missing values are never fabricated"),
    "STTP-E201": ("error", "duplicate key", "kept the first occurrence"),
    "STTP-E202": ("deviation", "known alias of a canonical key", "renamed to the canonical key"),
    "STTP-E203": ("error", "value not in the enum (S3)", "dropped the value"),
    "STTP-E204": ("deviation", "enum value quoted or not lower case", "normalised the enum value"),
    "STTP-E205": ("error", "value of the wrong type (S3)", "dropped the value"),
    "STTP-E206": ("deviation", "numeric value written as a string", "converted to a number"),
    "STTP-E207": ("deviation", "integer field written as an integral decimal", "converted to an integer"),
    "STTP-E208": ("error", "timestamp is not an ISO-8601 date-time", "dropped the value"),
    "STTP-E209": ("deviation", "AVEC psi omitted", "derived psi as the sum of the four dimensions"),
    "STTP-E210": ("error", "confidence annotation outside the content layer", "none: no meaning there"),
    "STTP-E211": (
        "deviation",
        "metrics psi incoherent with the compression AVEC",
        "kept both values as written (psi is never recomputed)",
    ),
    "STTP-E300": ("error", "content layer has no semantic field", "none: no content to recover"),
    "STTP-E301": ("error", "content field without confidence (S4)", "none: confidence is never fabricated"),
    "STTP-E302": ("error", "malformed confidence annotation (S4)", "skipped the annotation"),
    "STTP-E303": ("error", "confidence outside [0, 1] (S4)", "dropped the field"),
    "STTP-E304": ("error", "content nesting deeper than 5 (S5)", "none: deeper content is not recoverable"),
}

STRICT_REJECT = "none: strict profile fails closed on non-canonical forms"


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    offset: int
    length: int


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    severity: Severity
    recovery: str
    strict_impact: bool


class Reporter:
    """Collects diagnostics during one parse; resolves line and column only when finishing."""

    def __init__(self, text: str, profile: Profile) -> None:
        self.text = text
        self.profile = profile
        # Errors and the rest are capped separately, so a flood of warnings never hides the error
        # that makes a parse fail: ``ok`` is false exactly when an error diagnostic is present.
        self._errors: list[tuple[int, int, str, str, Severity, str, bool]] = []
        self._others: list[tuple[int, int, str, str, Severity, str, bool]] = []
        self.dropped = 0
        self.has_error = False
        self.strict_invalid = False

    def error(self, code: str, offset: int, length: int, message: str, recovery: str = "") -> None:
        self._add(code, offset, length, message, "error", recovery or CODES[code][2], True)

    def deviation(self, code: str, offset: int, length: int, message: str, recovery: str = "") -> None:
        """A non-canonical form: an error in strict, a canonicalised warning in tolerant."""
        if self.profile == "strict":
            self._add(code, offset, length, message, "error", STRICT_REJECT, True)
        else:
            self._add(code, offset, length, message, "warning", recovery or CODES[code][2], True)

    def _add(
        self, code: str, offset: int, length: int, message: str, sev: Severity, recovery: str, impact: bool
    ) -> None:
        self.has_error = self.has_error or sev == "error"
        self.strict_invalid = self.strict_invalid or impact
        bucket = self._errors if sev == "error" else self._others
        if len(bucket) >= MAX_DIAGNOSTICS:
            self.dropped += 1
            return
        bucket.append((offset, max(length, 0), code, message, sev, recovery, impact))

    def finish(self) -> list[Diagnostic]:
        """Diagnostics sorted by offset, then code (stable, so equal input gives equal output)."""
        pending = self._errors + self._others
        if self.dropped:
            message = f"{self.dropped} further diagnostics were not recorded"
            pending.append((len(self.text), 0, "STTP-E005", message, "info", "none", False))
        pending.sort(key=lambda item: (item[0], item[2]))
        return [
            Diagnostic(code, message, self.span(offset, length), sev, recovery, impact)
            for offset, length, code, message, sev, recovery, impact in pending
        ]

    def span(self, offset: int, length: int) -> Span:
        offset = min(max(offset, 0), len(self.text))
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return Span(line=line, column=column, offset=offset, length=length)


def severity_of(code: str, profile: Profile) -> Severity:
    """The severity a code carries in a profile (for documentation and tests)."""
    kind = CODES[code][0]
    if kind == "info":
        return "info"
    if kind == "deviation" and profile == "tolerant":
        return "warning"
    return "error"
