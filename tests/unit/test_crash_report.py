"""A native crash during the suite prints the stack of the thread that crashed, alone (`tests/conftest.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CRASH = """
import ctypes, threading, time

def test_a_thread_crashes():
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # an idle thread, not printed
    crashing = threading.Thread(target=lambda: ctypes.string_at(0), name="crashing")
    crashing.start()
    crashing.join()
"""


def test_a_segfault_prints_the_crashing_threads_stack_alone(tmp_path: Path) -> None:
    (tmp_path / "test_crash.py").write_text(CRASH)
    command = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # run in tmp_path: a core file, if the machine writes one, stays there
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode < 0 or done.returncode > 128, done.stdout[-2000:]  # killed by the signal
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "in string_at" in done.stderr and "test_crash.py" in done.stderr
    assert "most recent call first" in done.stderr and "Thread 0x" not in done.stderr  # no other thread's stack
