"""Printing for the CLI: JSON, progress lines on stderr, and a quiet embedded runtime."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from pydantic import BaseModel


def quiet_runtime() -> None:
    """Prepare this process to run the handlers in-process (embedded mode, `mneme mcp`).

    Tracing and metrics off, the handlers' JSON logs at WARNING and on stderr (stdout carries the
    command's output, or the MCP protocol), and Powertools' empty-metrics warning silenced.
    """
    from mneme.local import runtime

    runtime.configure(logs_to_stderr=True)


def plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def emit_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(plain(value), indent=2, ensure_ascii=False, default=str), file=out or sys.stdout)


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Progress:
    """A progress line on stderr: count, total and percentage when known, rate and ETA.

    On a terminal the line is redrawn in place (at most 10 times a second); otherwise a line is
    written at most every `every` seconds, so logs of a long import stay short. `done()` always
    prints the final line.
    """

    def __init__(
        self,
        label: str,
        *,
        unit: str = "items",
        total: int | None = None,
        quiet: bool = False,
        every: float = 2.0,
        detail: Callable[[], str] | None = None,
    ) -> None:
        self.label, self.unit, self.total, self.quiet, self.detail = label, unit, total, quiet, detail
        self.count = 0
        self.start = self._last = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.every = 0.1 if self.tty else every
        self._drawn = False

    def advance(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._draw()

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-6)
        rate = self.count / elapsed
        text = f"{self.label}: {self.count:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({100 * self.count / self.total:.0f}%)"
        else:
            text += f" {self.unit}"
        if self.detail is not None and (extra := self.detail()):
            text += f", {extra}"
        text += f", {rate:,.0f}/s"
        if self.total and rate > 0 and self.count < self.total:
            text += f", eta {(self.total - self.count) / rate:,.0f}s"
        return text

    def _draw(self, final: bool = False) -> None:
        if self.quiet:
            return
        if self.tty:
            end = "\n" if final else ""
            print(f"\r\033[K{self.line()}", end=end, file=sys.stderr, flush=True)
        else:
            print(self.line(), file=sys.stderr, flush=True)
        self._drawn = True

    def done(self) -> None:
        self._draw(final=True)

    def interrupted(self) -> None:
        """End the redrawn line so the next message starts on its own line."""
        if self.tty and self._drawn and not self.quiet:
            print(file=sys.stderr, flush=True)
