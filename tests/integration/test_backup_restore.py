"""`mneme backup` while the home serves under load, `mneme restore` into a new home that then serves, and the
backups a restore refuses (damaged, foreign, from a newer Mneme) or the homes it will not overwrite."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from mneme import bootstrap, cli
from mneme.local import backup, home
from tests.integration.serving import env, start, stop


def mneme(at: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mneme.cli", *args], env=env(at), capture_output=True, text=True)


def episode_ids(store: Path) -> set[str]:
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        return {row[0] for row in db.execute("SELECT episode_id FROM episodes")}


def test_a_backup_under_load_restores_every_write_acknowledged_before_it(tmp_path: Path) -> None:
    # Given a home served by two processes, and four writers remembering as fast as they are answered
    source, copy, restored = tmp_path / "home", tmp_path / "backup", tmp_path / "restored"
    proc, client, _ = start(source, "--workers", "2")
    acked: list[tuple[str, float]] = []
    stop_writing = threading.Event()

    def write(writer: int) -> None:
        n = 0
        while not stop_writing.is_set():
            done = client.remember("root.lab", f"writer {writer} kiln entry {n}", create_scope=True)
            acked.append((done.episode_id, time.time()))
            n += 1

    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    try:
        for thread in writers:
            thread.start()
        while len(acked) < 20:
            time.sleep(0.05)
        # When a backup is taken meanwhile, by another process
        started = time.time()
        made = mneme(source, "backup", str(copy), "--json")
        time.sleep(1.0)  # the writers go on after it
    finally:
        stop_writing.set()
        for thread in writers:
            thread.join()
        stop(proc)
    assert made.returncode == 0, made.stderr
    before = {episode for episode, at in acked if at < started}
    assert len(before) >= 20 and len(acked) > len(before)
    # Then it holds the store, the keys and a manifest, and leaves the derived index out
    assert sorted(p.name for p in copy.iterdir()) == ["admin.key", "backup.json", "cursor.key", "mneme.db"]
    manifest = json.loads((copy / "backup.json").read_text())
    assert "index.db" in manifest["left_out"] and manifest["rows"]["default"]["episodes"] >= len(before)
    # And restored into a new home, every write acknowledged before the backup started is there
    put_back = mneme(restored, "restore", str(copy))
    assert put_back.returncode == 0, put_back.stderr
    assert "search index was rebuilt" in put_back.stdout
    assert before <= episode_ids(restored / "mneme.db")
    # And the restored home serves them, with the keys it was backed up with
    again, client, _ = start(restored, "--workers", "1")
    try:
        assert client.health().status == "ok"
        found = client.recall("kiln entry", scope="root.lab", limit=200, scoring={"alpha": 0.0, "beta": 1.0})
        assert before <= {r.id for r in found.results}
    finally:
        stop(again)
    # And the source home says when it was last backed up
    status = mneme(source, "status", "--json")
    assert json.loads(status.stdout)["last_backup"]["dest"] == str(copy)
    assert f"to {copy}" in mneme(source, "status").stdout


# -- refusals, in-process ---------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`mneme ARGS` in this process (its --home restores MNEME_HOME at the end); returns (code, out, err)."""
    monkeypatch.setenv("MNEME_HOME", str(tmp_path / "unused"))
    monkeypatch.setenv("MNEME_CONFIG", str(tmp_path / "no-config.toml"))  # an empty one: no user settings leak in
    (tmp_path / "no-config.toml").write_text("")
    for name in ("MNEME_URL", "MNEME_API_KEY", "MNEME_TENANT"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str) -> tuple[int, str, str]:
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    yield invoke
    bootstrap.reset()


@pytest.fixture
def good(tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A backup of a home with its two keys and three episodes."""
    from mneme.cli.server import ensure_first_run

    source = tmp_path / "source"
    monkeypatch.setenv("MNEME_HOME", str(source))
    bootstrap.reset()
    ensure_first_run()
    bootstrap.cursor_secret(bootstrap.current_settings())()
    bootstrap.close_current()
    for n in range(3):
        done = run("remember", f"the kiln was fired {n} times", "--scope", "root.lab", "--create-scope")
        assert done[0] == 0, done[2]
    code, _, err = run("backup", str(tmp_path / "good"), "--home", str(source))
    assert code == 0, err
    return tmp_path / "good"


def reseal(copy: Path) -> None:
    """Rewrite the manifest's sizes and digests for the files as they now are (a forger's backup)."""
    manifest = json.loads((copy / "backup.json").read_text())
    manifest["files"] = {name: backup._describe(copy / name) for name in manifest["files"]}
    (copy / "backup.json").write_text(json.dumps(manifest))


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(copy: Path) -> None:
        manifest = json.loads((copy / "backup.json").read_text())
        change(manifest)
        (copy / "backup.json").write_text(json.dumps(manifest))

    return apply


def flip_a_byte(copy: Path) -> None:
    data = bytearray((copy / "mneme.db").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "mneme.db").write_bytes(bytes(data))


def cut_the_store(copy: Path) -> None:
    data = (copy / "mneme.db").read_bytes()
    (copy / "mneme.db").write_bytes(data[: len(data) // 2])
    reseal(copy)


def foreign_database(copy: Path) -> None:
    (copy / "mneme.db").unlink()
    with closing(sqlite3.connect(copy / "mneme.db")) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        db.commit()
    reseal(copy)


def newer_store(copy: Path) -> None:
    with closing(sqlite3.connect(copy / "mneme.db")) as db:
        db.execute("PRAGMA user_version = 99")
    reseal(copy)


def cut_key(copy: Path) -> None:
    (copy / "admin.key").write_text("mnk_short\n")
    reseal(copy)


DAMAGE = {
    "no manifest": (lambda copy: (copy / "backup.json").unlink(), "is not a Mneme backup (no backup.json)"),
    "another format": (edit_manifest(lambda m: m.update(format="tarball")), "is not a Mneme backup"),
    "a newer format": (edit_manifest(lambda m: m.update(version=9)), "written by a newer Mneme"),
    "a path outside it": (edit_manifest(lambda m: m["files"].update({"../x": {}})), "may list only"),
    "a flipped byte": (flip_a_byte, "mneme.db is damaged"),
    "a cut store": (cut_the_store, "is damaged"),
    "a foreign database": (foreign_database, "not Mneme's"),
    "a newer store": (newer_store, "written by a newer Mneme (schema 99"),
    "a cut key": (cut_key, "admin.key holds a 9-character key"),
    "a missing file": (lambda copy: (copy / "cursor.key").unlink(), "cursor.key cannot be read"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_backup_is_refused_and_nothing_is_written(
    good: Path, tmp_path: Path, run: Any, damage: str
) -> None:
    spoil, says = DAMAGE[damage]
    copy = tmp_path / "spoiled"
    shutil.copytree(good, copy)
    spoil(copy)
    target = tmp_path / "target"
    code, _, err = run("restore", str(copy), "--home", str(target))
    assert code == 2 and "backup_refused" in err and says in err, err
    assert err.strip().count("\n") == 0, err
    assert not target.exists() or {p.name for p in target.iterdir()} <= set(home.LOCK_FILES)


def test_a_home_that_holds_anything_is_replaced_only_with_force(good: Path, tmp_path: Path, run: Any) -> None:
    # Given a home with a store and a key of its own
    target = tmp_path / "target"
    assert run("remember", "the old home's only note", "--scope", "root.old", "--create-scope", "--home",
               str(target))[0] == 0  # fmt: skip
    (target / "admin.key").write_text("mnk_" + "o" * 43 + "\n")
    before = episode_ids(target / "mneme.db")
    # When a backup is restored over it without --force, it is refused and nothing changes
    code, _, err = run("restore", str(good), "--home", str(target))
    assert code == 2 and "is not empty" in err and "--force" in err
    assert episode_ids(target / "mneme.db") == before
    # With --force, its files are moved aside (kept), and the backup's are in their place
    code, out, err = run("restore", str(good), "--home", str(target), "--force")
    assert code == 0, err
    [aside] = target.glob("replaced-*")
    assert f"moved to {aside}" in out
    assert episode_ids(aside / "mneme.db") == before
    assert (aside / "admin.key").read_text().startswith("mnk_ooo")
    assert len(episode_ids(target / "mneme.db")) == 3 and not before & episode_ids(target / "mneme.db")
    assert (target / "admin.key").read_text() == (good / "admin.key").read_text()
    # And the restored index finds what the store holds
    code, out, _ = run("recall", "kiln", "--scope", "root.lab", "--json", "--home", str(target))
    assert code == 0 and len(json.loads(out)["results"]) == 3


def test_a_backup_refuses_a_destination_that_holds_anything(good: Path, tmp_path: Path, run: Any) -> None:
    code, _, err = run("backup", str(good), "--home", str(tmp_path / "source"))
    assert code == 2 and "already exists and is not an empty folder" in err
    assert sorted(p.name for p in good.iterdir()) == ["admin.key", "backup.json", "cursor.key", "mneme.db"]
    assert not list(tmp_path.glob(".good.partial-*"))


def test_a_restore_while_the_store_is_open_elsewhere_names_the_process(good: Path, tmp_path: Path, run: Any) -> None:
    target = tmp_path / "target"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time; from mneme.adapters.sqlite.store import SqliteRecordStore;"
         f"SqliteRecordStore({str(target / 'mneme.db')!r}).row_counts(); print('open', flush=True); time.sleep(60)"],
        env=env(target), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        code, _, err = run("restore", str(good), "--home", str(target), "--force")
        assert code == 2 and "home_in_use" in err and f"pid {holder.pid}" in err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    code, _, err = run("restore", str(good), "--home", str(target), "--force")
    assert code == 0, err
