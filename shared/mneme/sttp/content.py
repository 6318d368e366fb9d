"""Schema-free conversion: extension values, the content layer (S4, S5) and shared checks."""

from __future__ import annotations

from mneme.sttp.diagnostics import CONTENT_MAX_DEPTH, Reporter
from mneme.sttp.model import Arr, Bool, Member, Null, Num, Obj, Str, Value
from mneme.sttp.raw import RawMember, RawValue


class ValueConverter:
    def __init__(self, reporter: Reporter) -> None:
        self.rep = reporter
        self.text = reporter.text

    def generic(self, raw: RawValue | None, path: str) -> Value | None:
        """An extension value outside the content layer: any JSON-like value, no confidences."""
        if raw is None:
            return None
        if raw.kind == "obj":
            members: list[Member] = []
            seen: set[str] = set()
            for member in raw.members:
                if self.unique(member, member.key, seen, path):
                    self.no_confidence(member, path)
                    value = self.generic(member.value, f"{path}.{member.key}")
                    if value is not None:
                        members.append(Member(member.key, value))
            return Obj(tuple(members))
        if raw.kind == "arr":
            return Arr(tuple(v for v in (self.generic(item, path) for item in raw.items) if v is not None))
        return self.scalar(raw, path)

    def content_object(self, raw: RawValue, depth: int) -> Obj:
        """A content object: every member needs a confidence in [0, 1] (S4); depth at most 5 (S5)."""
        self.depth(raw, depth)
        members: list[Member] = []
        seen: set[str] = set()
        for member in raw.members:
            if not self.unique(member, member.key, seen, "content"):
                continue
            confidence = self.confidence(member)
            value = self.content_value(member.value, depth, member.key)
            if value is not None and confidence is not None:
                members.append(Member(member.key, value, confidence))
        return Obj(tuple(members))

    def content_value(self, raw: RawValue | None, depth: int, path: str) -> Value | None:
        if raw is None:
            return None
        if raw.kind == "obj":
            return self.content_object(raw, depth + 1)
        if raw.kind == "arr":
            self.depth(raw, depth + 1)
            items = (self.content_value(item, depth + 1, path) for item in raw.items)
            return Arr(tuple(item for item in items if item is not None))
        return self.scalar(raw, path)

    def scalar(self, raw: RawValue, path: str) -> Value | None:
        if raw.kind == "str":
            return Str(str(raw.scalar))
        if raw.kind == "num":
            assert isinstance(raw.scalar, int | float)
            return Num(raw.scalar)
        if raw.kind == "bool":
            return Bool(bool(raw.scalar))
        if raw.kind == "null":
            return Null()
        return self.text_value(raw, path)

    def text_value(self, raw: RawValue, path: str) -> Str | None:
        """A string, or a bare identifier / ref: token read as a string (§9.2 unquoted values)."""
        if raw.kind == "str":
            return Str(str(raw.scalar))
        if raw.kind in ("ident", "ref"):
            literal = self.text[raw.start : raw.end]
            message = f"{path} value {literal!r} is unquoted"
            self.rep.deviation("STTP-E118", raw.start, raw.end - raw.start, message)
            return Str(literal)
        return None

    def confidence(self, member: RawMember) -> float | None:
        span = (member.start, member.end - member.start)
        if member.confidence_state == "none":
            self.rep.error("STTP-E301", *span, f"content field {member.key!r} has no confidence annotation")
            return None
        confidence = member.confidence
        if confidence is not None and not 0.0 <= confidence <= 1.0:
            message = f"confidence {confidence!r} of {member.key!r} is outside [0, 1]"
            self.rep.error("STTP-E303", *span, message)
            return None
        return confidence

    def depth(self, raw: RawValue, depth: int) -> None:
        if depth == CONTENT_MAX_DEPTH + 1:
            message = f"content nesting reaches depth {depth} (maximum {CONTENT_MAX_DEPTH})"
            self.rep.error("STTP-E304", raw.start, 1, message)

    def unique(self, member: RawMember, key: str, seen: set[str], path: str) -> bool:
        if key in seen:
            span = (member.start, member.end - member.start)
            self.rep.error("STTP-E201", *span, f"duplicate key {path}.{key}")
            return False
        seen.add(key)
        return True

    def no_confidence(self, member: RawMember, path: str) -> None:
        if member.confidence_state == "ok":
            message = f"{path}.{member.key} carries a confidence outside the content layer"
            self.rep.error("STTP-E210", member.start, member.end - member.start, message)
