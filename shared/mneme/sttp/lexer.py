"""Lexer: one compiled master regex, tokens as ``(kind, start, end)`` tuples.

Whitespace is dropped, so two tokens are adjacent exactly when ``previous.end == next.start``; the parser
uses that to police compound tokens (``⏣0``, ``name(.99)``). Unknown characters become ``BAD`` tokens and
the parser decides what they mean (an error inside a layer, ignorable prose outside). Every pattern is
unambiguous (no nested quantifiers over the same characters), so lexing is linear in the input, and it
stops after ``MAX_TOKENS`` tokens.
"""

from __future__ import annotations

import re

from mneme.sttp.diagnostics import MAX_TOKENS, Reporter

Token = tuple[str, int, int]

LAYER_CHARS = {"⊕": "provenance", "⦿": "envelope", "◈": "content", "⍉": "metrics"}

_MASTER = re.compile(
    r"""
    (?P<WS>[ \t\r\n]+)
  | (?P<UWS>(?:[^\S \t\r\n]|\ufeff)+)
  | (?P<STR>"[^"\\]*(?:\\[\s\S][^"\\]*)*"?)
  | (?P<LAYER>[⊕⦿◈⍉]\s*⟨)
  | (?P<STOP>⟩)
  | (?P<NM>⏣)
  | (?P<REF>ref:[^\s,{}\[\]()|"=⟨⟩]+)
  | (?P<NUM>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<IDENT>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<PUNCT>[{}\[\](),:|=])
  | (?P<BAD>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str, reporter: Reporter) -> list[Token]:
    """Tokens of ``text`` followed by one ``EOF`` token; never raises."""
    tokens: list[Token] = []
    append = tokens.append
    for match in _MASTER.finditer(text):
        kind = match.lastgroup or "BAD"
        if kind == "WS":
            continue
        start, end = match.span()
        if kind == "UWS":
            reporter.deviation(
                "STTP-E016",
                start,
                end - start,
                "non-ASCII whitespace or byte-order mark between tokens",
                "treated as ordinary whitespace",
            )
            continue
        if kind == "PUNCT":
            kind = text[start]
        elif kind == "STR" and not _closed(text, start, end):
            kind = "USTR"
        if len(tokens) >= MAX_TOKENS:
            reporter.error(
                "STTP-E004",
                start,
                1,
                f"more than {MAX_TOKENS} tokens; input rejected from here",
                "stopped reading the input",
            )
            append(("EOF", start, start))
            return tokens
        append((kind, start, end))
    append(("EOF", len(text), len(text)))
    return tokens


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SPECIAL = re.compile(r"[\\\x00-\x1f⟨⟩⏣]")
_SPOOF = re.compile("[⟨⟩⏣]")
"""Characters that open, close or number a layer; raw ones inside strings are a spoofing deviation."""
_STRING_PIECE = re.compile(r"\\u[0-9A-Fa-f]{4}(?:\\u[0-9A-Fa-f]{4})?|\\[\s\S]?|[\x00-\x1f]")


def decode_string(text: str, start: int, end: int, closed: bool, reporter: Reporter) -> str:
    """Decode the literal ``text[start:end]`` (quotes included), reporting escapes, controls, markers."""
    body_start = start + 1
    body = text[body_start : end - 1 if closed else end]
    if not _SPECIAL.search(body):  # the common case: one regex scan, no copy beyond the slice
        return body
    spoofed = _SPOOF.search(body)
    if spoofed:
        message = f"raw protocol marker {spoofed.group()!r} inside a string literal"
        reporter.deviation("STTP-E014", body_start + spoofed.start(), 1, message)
    out: list[str] = []
    last = 0
    reported: set[str] = set()  # one diagnostic per kind and string keeps output bounded
    for piece in _STRING_PIECE.finditer(body):
        out.append(body[last : piece.start()])
        last = piece.end()
        token = piece.group()
        if len(token) >= 6 and token.startswith("\\u"):
            out.append(_decode_unicode(token))
        elif len(token) == 2 and token[1] in _ESCAPES:
            out.append(_ESCAPES[token[1]])
        else:
            code = "STTP-E013" if token[0] != "\\" else "STTP-E012"
            if code not in reported:
                reported.add(code)
                what = "raw control character" if code == "STTP-E013" else f"invalid escape {token!r}"
                at = body_start + piece.start()
                reporter.deviation(code, at, len(token), f"{what} in a string literal")
            out.append(token)
    out.append(body[last:])
    return "".join(out)


def _closed(text: str, start: int, end: int) -> bool:
    """A string token is closed when its last quote is not its opening quote and is not escaped."""
    if end - start < 2 or text[end - 1] != '"':
        return False
    backslashes = 0
    at = end - 2
    while at > start and text[at] == "\\":
        backslashes += 1
        at -= 1
    return backslashes % 2 == 0


def _decode_unicode(token: str) -> str:
    first = int(token[2:6], 16)
    if len(token) == 12:
        second = int(token[8:12], 16)
        if 0xD800 <= first <= 0xDBFF and 0xDC00 <= second <= 0xDFFF:
            return chr(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        return chr(first) + chr(second)
    return chr(first)
