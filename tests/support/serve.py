"""`mneme serve` as a user starts it: a subprocess on an ephemeral loopback port, its output in a log file."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def mneme_serve(command: Sequence[str], cwd: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """Run `command` (a `mneme serve --port 0 …`) until the block ends; yields the URL it serves on."""
    with log.open("w") as out:
        process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    deadline, found = time.monotonic() + 120, None
    while found is None and process.poll() is None and time.monotonic() < deadline:
        found = re.search(r"serving on (http://\S+)", log.read_text())
        time.sleep(0.05)
    try:
        assert found, log.read_text()[-2000:]
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)
