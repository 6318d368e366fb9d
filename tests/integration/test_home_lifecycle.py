"""A home at rest and a home held, through real processes.

A clean stop (SIGTERM, Ctrl-C) of `mneme serve`, the end of a CLI command and the end of `mneme mcp` close
every store and index connection: no `-wal` is left, and `mneme.db` copied alone holds every acknowledged
write (it used to sit in `mneme.db-wal`, so a copy of the store was an empty store). One server holds a home
at a time: a second `mneme serve` stops at once, naming the first; CLI commands share the home with it; the
lock dies with the processes that hold it, kill -9 included.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.integration.serving import children, env, gone, start, stop


def rows(db: Path, sql: str) -> int:
    """One count from a plain read-only connection on `db` (no -wal beside it: the file alone)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def mneme(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mneme.cli", *args], env=env(home), capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(("workers", "how"), [("1", signal.SIGTERM), ("2", signal.SIGINT)])
def test_a_clean_stop_leaves_every_write_in_the_store_file_alone(
    tmp_path: Path, workers: str, how: signal.Signals
) -> None:
    # Given a server that acknowledged twenty writes
    home = tmp_path / "home"
    proc, client, _ = start(home, "--workers", workers)
    try:
        for n in range(20):
            client.remember("root.lab", f"sample {n} was logged at the bench", create_scope=True)
        helpers = children(proc.pid)
        # When it is stopped cleanly
        proc.send_signal(how)
        assert proc.wait(timeout=30) == 0
        assert gone(helpers) == []
    finally:
        stop(proc)
    # Then no -wal (or -shm) is left beside the store or the index
    assert sorted(p.name for p in home.iterdir() if p.name.endswith(("-wal", "-shm"))) == []
    # And the store file copied alone, read by a plain read-only connection, holds all twenty
    (tmp_path / "copy").mkdir()
    shutil.copyfile(home / "mneme.db", tmp_path / "copy" / "mneme.db")
    assert rows(tmp_path / "copy" / "mneme.db", "SELECT count(*) FROM episodes") == 20
    assert rows(home / "index.db", "SELECT count(*) FROM docs WHERE kind = 'episode'") == 20


def test_a_cli_command_leaves_the_store_whole_in_its_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = mneme(home, "remember", "The kiln was fired at dawn.", "--scope", "root.lab", "--create-scope")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in home.iterdir() if p.name.endswith(("-wal", "-shm"))) == []
    assert rows(home / "mneme.db", "SELECT count(*) FROM episodes") == 1


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM"])
def test_the_end_of_mneme_mcp_leaves_the_store_whole_in_its_file(tmp_path: Path, ending: str) -> None:
    home = tmp_path / "home"
    params = StdioServerParameters(command=sys.executable, args=["-m", "mneme.cli", "mcp"], env=env(home))

    async def session() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                result = await client.call_tool(
                    "remember", {"content": "The kiln was fired at dawn.", "scope": "root.lab", "create_scope": True}
                )
                assert not result.is_error
                if ending == "SIGTERM":  # as an agent host may end it, before closing its stdin
                    (server,) = children_named("mneme.cli")
                    os.kill(server, signal.SIGTERM)
                    await anyio.sleep(2)

    anyio.run(session)
    deadline = time.monotonic() + 20
    while children_named("mneme.cli") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(p.name for p in home.iterdir() if p.name.endswith(("-wal", "-shm"))) == []
    assert rows(home / "mneme.db", "SELECT count(*) FROM episodes") == 1


def children_named(word: str) -> list[int]:
    """This process's children whose command line holds `word` (the MCP client's server process)."""
    return [pid for pid in children(os.getpid()) if word.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_one_server_holds_a_home_and_cli_commands_share_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, client, _ = start(home, "--workers", "2")
    try:
        client.remember("root.lab", "the first server's kiln note", create_scope=True)
        # When a second server starts on the same home
        started = time.monotonic()
        second = mneme(home, "serve", "--port", "0", "--workers", "1", timeout=60)
        # Then it stops at once, with one line naming the process that holds the home
        assert second.returncode == 2 and "serving on" not in second.stdout
        assert second.stderr.strip().count("\n") == 0, second.stderr
        assert "home_in_use" in second.stderr and f"pid {proc.pid}: mneme serve on http://" in second.stderr
        assert time.monotonic() - started < 15  # it never loads the model, binds or opens the store
        # And CLI commands work beside the server (a backup included), while a restore over it is refused
        assert mneme(home, "remember", "a kiln note from the CLI", "--scope", "root.lab").returncode == 0
        assert mneme(home, "status").returncode == 0
        assert mneme(home, "backup", str(tmp_path / "backup")).returncode == 0
        refused = mneme(home, "restore", str(tmp_path / "backup"), "--force")
        assert refused.returncode == 2 and "home_in_use" in refused.stderr and f"pid {proc.pid}" in refused.stderr
        # When the server is killed with SIGKILL, the home is free again once its last process is gone
        helpers = children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert gone(helpers, timeout=30) == []
    finally:
        stop(proc)
    again, client, _ = start(home, "--workers", "1")
    try:
        assert len(client.recall("kiln", scope="root.lab", limit=10, scoring={"alpha": 0, "beta": 1}).results) == 2
    finally:
        stop(again)
