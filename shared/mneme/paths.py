"""Scope path grammar: `root` followed by up to 8 dotted segments."""

from __future__ import annotations

import re

from mneme.errors import InvalidInput

ROOT = "root"
MAX_DEPTH = 8
SEGMENT_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def validate_segment(segment: str, *, field: str = "segment") -> str:
    if not SEGMENT_RE.fullmatch(segment):
        raise InvalidInput(
            f"invalid {field} {segment!r}: a segment is 1-63 characters of a-z, 0-9 and '-', "
            "starting with a letter or digit",
            code="invalid_path",
        )
    return segment


def parse_path(path: object) -> tuple[str, ...]:
    """Return the segments after `root`; raise InvalidInput naming the exact problem."""
    if not isinstance(path, str) or not path:
        raise InvalidInput("a scope path is a non-empty string such as 'root.acme'", code="invalid_path")
    parts = path.split(".")
    if parts[0] != ROOT:
        raise InvalidInput(f"invalid path {path!r}: it must start with 'root'", code="invalid_path")
    segments = tuple(parts[1:])
    if len(segments) > MAX_DEPTH:
        raise InvalidInput(
            f"invalid path {path!r}: depth {len(segments)} exceeds the maximum of {MAX_DEPTH}",
            code="invalid_path",
        )
    for index, segment in enumerate(segments, start=1):
        if segment == "":
            raise InvalidInput(f"invalid path {path!r}: segment {index} is empty", code="invalid_path")
        if not SEGMENT_RE.fullmatch(segment):
            raise InvalidInput(
                f"invalid path {path!r}: segment {index} {segment!r} must match [a-z0-9][a-z0-9-]{{0,62}}",
                code="invalid_path",
            )
    return segments


def join(segments: tuple[str, ...] | list[str]) -> str:
    return ".".join((ROOT, *segments))
