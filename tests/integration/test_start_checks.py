"""What `mneme serve` does with the files it finds in MNEME_HOME: a damaged, foreign, unreadable or lost
store refuses to start with one line (never serves 500s, never silently becomes a new store); a missing,
damaged or stale index is rebuilt in the background while `/v1/health` says `degraded`, `mneme status`
says so, and recall reads the records the index lacks."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from mneme import bootstrap
from mneme.local import checks
from mneme.models import Principal, Role
from mneme.settings import Settings
from tests.support.embedding import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
EPISODES = ["the kiln reached 1280 degrees", "the glaze cracked in the cold", "orders ship on Thursdays"]


def build_home(home: Path) -> None:
    """A home as `mneme serve` leaves it: an admin key, a cursor key, a tenant with indexed episodes."""
    from mneme.cli.server import ensure_first_run
    from mneme.services.remember import RememberItem

    os.environ["MNEME_HOME"] = str(home)
    bootstrap.reset()
    services = bootstrap.build(Settings(home=home), embedder=HashEmbedder(), background=False)  # type: ignore[call-arg]
    try:
        ensure_first_run(services)
        bootstrap.cursor_secret(Settings(home=home))()  # type: ignore[call-arg]
        caller = Principal(tenant="default", principal="local-admin", roles=frozenset({Role.admin}))
        items = [RememberItem(content=text, scope="root.studio", create_scope=True) for text in EPISODES]
        services.remember.remember(caller, items)
    finally:
        bootstrap.reset()
        services.close()  # else a connection the collector closes later deletes the -wal mid-copy of this home
    for name in ("mneme.db", "index.db"):  # as a server leaves them when it stops: the WAL written back
        with sqlite3.connect(home / name) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("pristine") / "home"
    saved = os.environ.get("MNEME_HOME")
    build_home(home)
    if saved is None:
        os.environ.pop("MNEME_HOME", None)
    else:
        os.environ["MNEME_HOME"] = saved
    yield home


def serve(home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`mneme serve` on `home`: its exit and output, or (stopped at once) what it printed once it served."""
    env = {**os.environ, "MNEME_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # "serving on ..." when it started; "" when it exited
    if first:
        proc.terminate()
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, 0 if first else proc.returncode, first + out, err)


def truncate_half(home: Path) -> None:
    db = home / "mneme.db"
    os.truncate(db, db.stat().st_size // 2)


def random_bytes(home: Path) -> None:
    (home / "mneme.db").write_bytes(os.urandom(64 * 1024))


def corrupt_pages(home: Path) -> None:
    db = home / "mneme.db"
    data = bytearray(db.read_bytes())
    for page in range(1, len(data) // 4096):
        data[page * 4096 + 8 : page * 4096 + 200] = os.urandom(192)
    db.write_bytes(bytes(data))


def foreign_sqlite(home: Path) -> None:
    (home / "mneme.db").unlink()
    with sqlite3.connect(home / "mneme.db") as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        db.execute("INSERT INTO invoices VALUES (1, 99.5)")


def directory(home: Path) -> None:
    (home / "mneme.db").unlink()
    (home / "mneme.db").mkdir()


def dev_null(home: Path) -> None:
    (home / "mneme.db").unlink()
    (home / "mneme.db").symlink_to("/dev/null")


def zero_bytes(home: Path) -> None:
    (home / "mneme.db").write_bytes(b"")


def missing(home: Path) -> None:
    (home / "mneme.db").unlink()


def newer_schema(home: Path) -> None:
    with sqlite3.connect(home / "mneme.db") as db:
        db.execute("PRAGMA user_version = 99")


DAMAGED: list[tuple[str, Callable[[Path], None], str, str]] = [
    ("truncated-50%", truncate_half, "store_damaged", "damaged"),
    ("random-bytes", random_bytes, "store_damaged", "not an SQLite database"),
    ("corrupted-pages", corrupt_pages, "store_damaged", "damaged"),
    ("foreign-sqlite", foreign_sqlite, "store_damaged", "not Mneme's"),
    ("directory", directory, "store_damaged", "a directory"),
    ("symlink-dev-null", dev_null, "store_damaged", "a device or special file (a link to /dev/null)"),
    ("zero-bytes-with-a-key", zero_bytes, "store_missing", "empty (0 bytes)"),
    ("missing-with-a-key", missing, "store_missing", "is missing"),
    ("newer-schema", newer_schema, "store_too_new", "newer Mneme"),
]


@pytest.mark.parametrize(("name", "damage", "code", "says"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_store_refuses_to_start_with_one_line(
    pristine: Path, tmp_path: Path, name: str, damage: Callable[[Path], None], code: str, says: str
) -> None:
    # Given a home whose store was damaged (its keys are there)
    home = tmp_path / "home"
    shutil.copytree(pristine, home, symlinks=True)
    damage(home)
    # When `mneme serve` starts on it
    result = serve(home)
    # Then it refuses, with one line that says what and what to do, and writes nothing
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert code in lines[0] and says in lines[0], lines[0]
    assert "serving on" not in result.stdout


def test_a_read_only_store_refuses_to_start(pristine: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        shutil.copytree(pristine, disk / "home")
        if subprocess.run(["mount", "-o", "remount,ro", str(disk)]).returncode != 0:
            pytest.skip("cannot remount the tmpfs read-only")
        result = serve(disk / "home")
        assert result.returncode != 0
        assert "store_read_only" in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_new_home_still_starts_as_a_new_store(tmp_path: Path) -> None:
    checks.check_store(tmp_path / "home" / "mneme.db", tmp_path / "home")  # no key, no store: fine


# -- the index: rebuilt in the background, reported, covered from records ---------------------------------


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda index: index.unlink(), "is missing"),
        (lambda index: index.write_bytes(os.urandom(8192)), "not an SQLite database"),
        (lambda index: index.write_bytes(b""), "is empty"),
    ],
    ids=["removed", "random-bytes", "empty"],
)
def test_a_missing_or_damaged_index_is_found(pristine: Path, tmp_path: Path, damage: Callable, says: str) -> None:
    home = tmp_path / "home"
    shutil.copytree(pristine, home)
    for suffix in ("-wal", "-shm"):
        (home / f"index.db{suffix}").unlink(missing_ok=True)
    damage(home / "index.db")
    problem = checks.index_problem(home / "index.db", home / "mneme.db")
    assert problem is not None and says in problem


def test_a_stale_index_is_found(pristine: Path, tmp_path: Path) -> None:
    from mneme.adapters.sqlite.index import SqliteSearchIndex

    home = tmp_path / "home"
    shutil.copytree(pristine, home)
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (home / name).unlink(missing_ok=True)
    SqliteSearchIndex(home / "index.db").count("default")  # an index with its tables and no documents
    problem = checks.index_problem(home / "index.db", home / "mneme.db")
    assert problem is not None and "stale" in problem
    assert checks.index_problem(pristine / "index.db", pristine / "mneme.db") is None


def test_while_the_index_is_rebuilt_health_is_degraded_and_recall_reads_records(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mneme.local.server import make_server

    # Given a home whose index was removed, served in this process
    home = tmp_path / "home"
    shutil.copytree(pristine, home)
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (home / name).unlink(missing_ok=True)
    monkeypatch.setenv("MNEME_HOME", str(home))
    bootstrap.reset()
    services = bootstrap.build(Settings(home=home), embedder=HashEmbedder(), background=False)  # type: ignore[call-arg]
    httpd = make_server("127.0.0.1", 0, services=lambda: services)  # its routes run on these (the test's embedder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    headers = {"Authorization": f"Bearer {(home / 'admin.key').read_text().strip()}"}
    release = threading.Event()
    try:
        # When the rebuild starts (and is held before it writes anything)
        problem = checks.index_problem(home / "index.db", home / "mneme.db")
        assert problem == "index.db is missing"

        def rebuild() -> None:
            release.wait(30)
            for tenant in checks.tenants(home / "mneme.db"):
                services.indexer.rebuild(tenant)

        worker = checks.start_rebuild(home / "index.db", problem, rebuild)
        # Then health says degraded and why
        health = requests.get(base + "/v1/health", timeout=10).json()
        assert health["status"] == "degraded" and health["index"] == "rebuilding: index.db is missing"
        # And recall finds the episodes from their records meanwhile
        found = requests.post(base + "/v1/recall", json={"query": "kiln degrees", "scope": "root.studio"},
                              headers=headers, timeout=30).json()  # fmt: skip
        assert any("kiln" in (r.get("content") or "") for r in found["results"]), found
        # When the rebuild ends, health is ok and the index holds every episode again
        release.set()
        worker.join(30)
        assert requests.get(base + "/v1/health", timeout=10).json()["status"] == "ok"
        assert checks.index_problem(home / "index.db", home / "mneme.db") is None
        assert services.index.count("default") >= len(EPISODES)
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()
        bootstrap.reset()
