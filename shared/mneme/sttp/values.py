"""Recursive descent over objects, arrays, members and values (the part of the grammar below a layer).

Recursion is bounded by ``MAX_NESTING`` (three Python frames per level); containers nested deeper are
skipped by an iterative bracket counter, so no input can exhaust the stack. Recovery is local and
deterministic: a bad member is skipped to the next delimiter at its own nesting level, and a container
that meets a foreign closer or a layer marker is closed there, so nothing bleeds across layers.
"""

from __future__ import annotations

import math

from mneme.sttp.diagnostics import MAX_NESTING, MAX_NUMBER_CHARS, Reporter
from mneme.sttp.lexer import Token, decode_string
from mneme.sttp.raw import RawMember, RawValue, describe

TERMINAL = ("EOF", "LAYER", "STOP")
_VALUE_START = ("{", "[", "STR", "USTR", "NUM", "IDENT", "REF")
_CONFIDENCE_STOP = (")", ":", "=", ",", "|", "{", "}", "[", "]", *TERMINAL)


class ValueParser:
    def __init__(self, text: str, tokens: list[Token], reporter: Reporter) -> None:
        self.text = text
        self.tokens = tokens
        self.rep = reporter
        self.i = 0
        self.closers: list[str] = []

    def peek(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        token = self.tokens[self.i]
        if token[0] != "EOF":
            self.i += 1
        return token

    def last_end(self) -> int:
        return self.tokens[self.i - 1][2]

    # -- containers ----------------------------------------------------------------------------------
    def parse_object(self, depth: int) -> RawValue | None:
        start = self.advance()[1]
        if self._too_deep(depth, start):
            return None
        self.closers.append("}")
        members = self.parse_members("}", start, 1, depth)
        self.closers.pop()
        return RawValue("obj", start, self.last_end(), members=members)

    def parse_members(self, closer: str, open_at: int, open_len: int, depth: int) -> list[RawMember]:
        """Members up to ``closer`` (``}``, or ``STOP`` for a layer without braces, left unconsumed)."""
        members: list[RawMember] = []
        while True:
            kind, start, _ = self.peek()
            if kind == closer:
                if closer != "STOP":
                    self.advance()
                return members
            if kind in TERMINAL or (kind in ("}", "]") and kind in self.closers):
                if closer != "STOP":
                    message = f"object not closed before {describe(kind)}"
                    self.rep.error("STTP-E111", open_at, open_len, message)
                return members
            if self._stray_delimiter(kind, start):
                continue
            member = self.parse_member(depth)
            if member is not None:
                members.append(member)
            if member is None or member.value is None:
                self.skip_to_sync()
            self.separator(closer, ("IDENT", "STR"))

    def parse_array(self, depth: int) -> RawValue | None:
        start = self.advance()[1]
        if self._too_deep(depth, start):
            return None
        self.closers.append("]")
        items: list[RawValue] = []
        while True:
            kind, at, _ = self.peek()
            if kind == "]":
                self.advance()
                break
            if kind in TERMINAL or (kind == "}" and "}" in self.closers):
                self.rep.error("STTP-E111", start, 1, f"array not closed before {describe(kind)}")
                break
            if self._stray_delimiter(kind, at):
                continue
            value = self.parse_value(depth)
            if value is None:
                self.skip_to_sync()
            else:
                items.append(value)
            self.separator("]", _VALUE_START)
        self.closers.pop()
        return RawValue("arr", start, self.last_end(), items=items)

    def _too_deep(self, depth: int, start: int) -> bool:
        if depth <= MAX_NESTING:
            return False
        self.rep.error("STTP-E003", start, 1, f"containers nested deeper than {MAX_NESTING}")
        depth = 1
        while depth and self.peek()[0] not in TERMINAL:
            kind = self.advance()[0]
            depth += 1 if kind in ("{", "[") else -1 if kind in ("}", "]") else 0
        return True

    def _stray_delimiter(self, kind: str, start: int) -> bool:
        if kind in (",", "|"):
            self.advance()
            self.rep.deviation("STTP-E114", start, 1, f"extra delimiter {kind!r}")
            return True
        if kind in ("}", "]"):
            self.advance()
            self.rep.error("STTP-E112", start, 1, f"unmatched {kind!r}")
            return True
        return False

    def separator(self, closer: str, next_starts: tuple[str, ...]) -> None:
        kind, start, end = self.peek()
        if kind in (",", "|"):
            self.advance()
            if kind == "|":
                self.rep.deviation("STTP-E115", start, 1, "compact pipe delimiter")
            following = self.peek()[0]
            if following == closer or (closer == "STOP" and following in TERMINAL):
                self.rep.deviation("STTP-E114", start, 1, "trailing delimiter")
        elif kind in next_starts:
            self.rep.deviation("STTP-E113", start, 0, "missing ',' delimiter")
        elif kind != closer and kind not in TERMINAL and kind not in ("}", "]"):
            self.unexpected(kind, start, end, "',' or a closing bracket")
            self.skip_to_sync()
            if self.peek()[0] in (",", "|"):
                self.separator(closer, next_starts)

    def skip_to_sync(self) -> None:
        """Skip to the next delimiter or closer at the current nesting level (iterative)."""
        depth = 0
        while True:
            kind = self.peek()[0]
            if kind in TERMINAL or (depth == 0 and kind in (",", "|", "}", "]")):
                return
            depth += 1 if kind in ("{", "[") else -1 if kind in ("}", "]") else 0
            self.advance()

    # -- members and values --------------------------------------------------------------------------
    def parse_member(self, depth: int) -> RawMember | None:
        kind, start, end = self.peek()
        if kind not in ("IDENT", "STR"):
            self.unexpected(kind, start, end, "a key")
            return None
        self.advance()
        text = self.text
        key = text[start:end] if kind == "IDENT" else decode_string(text, start, end, True, self.rep)
        confidence, state, key_end = None, "none", end
        if self.peek()[0] == "(":
            confidence, state, key_end = self._confidence(end)
        kind, at, stop = self.peek()
        if kind == "=":
            self.rep.deviation("STTP-E116", at, 1, "compact '=' key-value separator")
        elif kind != ":":
            self.unexpected(kind, at, stop, f"':' after key {key!r}")
            return None
        self.advance()
        return RawMember(key, start, key_end, confidence, state, self.parse_value(depth))

    def _confidence(self, key_end: int) -> tuple[float | None, str, int]:
        _, open_at, open_end = self.advance()
        if open_at != key_end:
            message = "whitespace between key and confidence"
            self.rep.deviation("STTP-E017", key_end, open_at - key_end, message)
        (kind, num_at, num_end), closing = self.peek(), self.tokens[min(self.i + 1, len(self.tokens) - 1)]
        if kind == "NUM" and closing[0] == ")":
            self.advance()
            self.advance()
            if num_at != open_end or closing[1] != num_end:
                span = (open_at, closing[2] - open_at)
                self.rep.deviation("STTP-E017", *span, "whitespace inside a confidence")
            literal = self.text[num_at:num_end]
            value = float(literal) if len(literal) <= MAX_NUMBER_CHARS else math.inf
            if math.isfinite(value):
                return value, "ok", closing[2]
        else:
            while self.peek()[0] not in _CONFIDENCE_STOP:
                self.advance()
            if self.peek()[0] == ")":
                self.advance()
        stop = self.last_end()
        literal = self.text[open_at:stop]
        self.rep.error("STTP-E302", open_at, stop - open_at, f"confidence {literal!r} is not a finite number")
        return None, "bad", stop

    def parse_value(self, depth: int) -> RawValue | None:
        kind, start, end = self.peek()
        if kind == "{":
            return self.parse_object(depth + 1)
        if kind == "[":
            return self.parse_array(depth + 1)
        if kind not in ("STR", "NUM", "IDENT", "REF"):
            self.unexpected(kind, start, end, "a value")
            if kind == "USTR":
                self.advance()
            return None
        self.advance()
        word = self.text[start:end]
        if kind == "STR":
            return RawValue("str", start, end, decode_string(self.text, start, end, True, self.rep))
        if kind == "REF":
            return RawValue("ref", start, end, word[4:])
        if kind == "IDENT":
            if word in ("true", "false"):
                return RawValue("bool", start, end, word == "true")
            return RawValue("null", start, end) if word == "null" else RawValue("ident", start, end, word)
        number = self.number(word, start)
        return None if number is None else RawValue("num", start, end, number)

    def number(self, literal: str, start: int) -> int | float | None:
        if len(literal) <= MAX_NUMBER_CHARS:
            if not any(char in literal for char in ".eE"):
                return int(literal)
            value = float(literal)
            if math.isfinite(value):
                return value
        self.rep.error("STTP-E015", start, len(literal), "numeric literal is too long or not finite")
        return None

    def unexpected(self, kind: str, start: int, end: int, expected: str) -> None:
        if kind == "BAD":
            self.rep.error("STTP-E010", start, end - start, f"unexpected character {self.text[start]!r}")
        elif kind == "USTR":
            self.rep.error("STTP-E011", start, end - start, "string literal is not terminated")
        else:
            self.rep.error("STTP-E110", start, end - start, f"expected {expected}, found {describe(kind)}")
