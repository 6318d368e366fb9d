"""What `mneme serve` reads from a request's target, and what it says when h11 refuses a head: the problem and
the header's name, never the refused text (h11's messages quote the offending line, and that line can hold an
API key: `illegal header line: bytearray(b'Authorization: Bearer mnk_...')`)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import h11

from mneme.errors import InvalidInput

QUOTED = re.compile(r"b['\"]|bytearray\(")  # h11 quotes what it refused with repr(): b'...' or bytearray(b'...')
HEADER_NAME = re.compile(r"(?:bytearray\()?b['\"]([A-Za-z0-9_.-]{1,64})\s*:")


def protocol_message(error: h11.RemoteProtocolError | None, fallback: str) -> str:
    """What h11 refused, without the text it refused: its messages quote the offending line (`illegal header
    line: bytearray(b'Authorization: Bearer mnk_...')`), which can hold a key. A header line is named by its
    header's name; anything quoted is left out."""
    text = str(error) if error is not None else fallback
    problem, _, quoted = text.partition(": ")
    if not QUOTED.search(text):
        return text[:200]
    if problem == "illegal header line":
        named = HEADER_NAME.match(quoted)
        header = f"the {named.group(1)} header" if named else "a header"
        return (
            f"illegal header line: {header} is malformed (a bare CR, a space before the colon, or a character "
            "HTTP does not allow); its value is not repeated here"
        )
    if problem == "illegal request line":
        return "illegal request line: send METHOD /path HTTP/1.1 with an ASCII target; it is not repeated here"
    return f"{problem}; the refused text is not repeated here" if not QUOTED.search(problem) else "malformed request"


def request_path(raw_path: bytes) -> str:
    """The path of an origin-form target (`/v1/...`) as sent, or of an absolute-form one (`http://host/v1/...`);
    a target no URL parser reads is refused (400), never a 500."""
    text = raw_path.decode("latin-1")
    if text.startswith("/"):
        return text
    try:
        return urlsplit(text).path
    except ValueError:
        raise InvalidInput("the request target is not a URL path: send /v1/...", code="bad_request") from None
