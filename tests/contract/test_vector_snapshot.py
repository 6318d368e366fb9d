"""Saved vector caches of the SQLite index (`mneme.adapters.sqlite.vector_snapshot`) and the change log
that keeps caches of several processes (or a snapshot and the file) in step.

The property under test: a snapshot is only ever a shortcut. Whatever happened to it (the process
was killed before it saved, a file is torn, it belongs to another index file, the log no longer
covers it), a search answers exactly what a fresh index loading every row from SQLite answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mneme.adapters.sqlite import index as sqlite_index_module
from mneme.adapters.sqlite import vector_cache, vector_snapshot
from mneme.adapters.sqlite import vectors as sqlite_vectors
from mneme.adapters.sqlite.index import SqliteSearchIndex
from tests.contract.test_search_index import DIM, MODEL, doc, flt

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_index_module, "SNAPSHOT_MIN_ROWS", 10)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Counts full loads from SQLite (the path a usable snapshot avoids)."""
    calls: list[str] = []
    original = sqlite_vectors.load

    def counted(conn: object, tenant: str, model_id: str, gen: int) -> vector_cache.VectorCache:
        if not _QUIET:
            calls.append(tenant)
        return original(conn, tenant, model_id, gen)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_vectors, "load", counted)
    yield calls


def corpus(count: int = 60, seed: int = 1, prefix: str = "d") -> list:
    rng = np.random.default_rng(seed)
    return [
        doc(f"{prefix}{i:03d}", path=("root", f"s{i % 3}"), vector=rng.standard_normal(DIM).tolist())
        for i in range(count)
    ]


QUERIES = np.random.default_rng(99).standard_normal((6, DIM)).astype(np.float32)


def answers(index: SqliteSearchIndex) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        for f in (flt(), flt("s1")):
            out.append([(h.doc_id, round(h.score, 9)) for h in index.search_vector(f, q, MODEL, 15)])
    return out


_QUIET: list[bool] = []  # set while `truth` loads (not counted)


def truth(path: Path) -> list[list[tuple[str, float]]]:
    """What an index that reads every row answers (no snapshot)."""
    fresh = SqliteSearchIndex(path, snapshots=False)
    _QUIET.append(True)
    try:
        return answers(fresh)
    finally:
        _QUIET.pop()
        fresh.close()


def snapshot_root(path: Path) -> Path:
    return vector_snapshot.directory(str(path), "t1", MODEL)


def current_version(path: Path) -> Path:
    root = snapshot_root(path)
    return root / (root / "CURRENT").read_text()


def saved_index(path: Path) -> None:
    """An index with a snapshot at its current generation."""
    index = SqliteSearchIndex(path)
    index.upsert(corpus())
    answers(index)  # loads every row, and saves
    index.close()


def test_first_search_of_a_new_process_reads_the_snapshot(tmp_path: Path, loads: list[str]) -> None:
    path = tmp_path / "i.db"
    saved_index(path)
    assert loads == ["t1"] and (snapshot_root(path) / "CURRENT").exists()
    again = SqliteSearchIndex(path)
    got = answers(again)
    assert loads == ["t1"]  # no second full load
    assert got == truth(path)
    again.close()


def test_snapshot_behind_the_file_catches_up_from_the_log(tmp_path: Path, loads: list[str]) -> None:
    """Writes after the save (a process killed before it could save again) are replayed, not lost."""
    path = tmp_path / "i.db"
    saved_index(path)
    writer = SqliteSearchIndex(path, snapshots=False)  # never saves: like a process killed after its writes
    writer.upsert(corpus(5, seed=2, prefix="n"))
    writer.upsert([doc("d001", path=("root", "s1"), vector=QUERIES[0].tolist())])  # replaced
    writer.delete("t1", ["d002", "d010"])
    writer.update_ancestors("t1", "s2", ["root", "s1", "s2"])
    reader = SqliteSearchIndex(path)
    got = answers(reader)
    assert loads == ["t1"]  # caught up, not reloaded
    assert got == truth(path)
    assert got[0][0][0] == "d001"
    generation = reader._caches.get("t1", MODEL).generation  # type: ignore[union-attr]
    reader.close()  # saves the caught-up cache
    assert current_version(path).name.startswith(f"v{generation}-")
    writer.close()


def test_another_process_writes_are_caught_up_without_a_reload(tmp_path: Path, loads: list[str]) -> None:
    path = tmp_path / "i.db"
    one, two = SqliteSearchIndex(path), SqliteSearchIndex(path)
    one.upsert(corpus())
    answers(one), answers(two)
    assert loads == ["t1", "t1"] or loads == ["t1"]  # the second may read the first's snapshot
    before = len(loads)
    for round_ in range(3):
        two.upsert(corpus(4, seed=10 + round_, prefix=f"r{round_}-"))
        one.upsert(corpus(3, seed=20 + round_, prefix=f"o{round_}-"))
        two.delete("t1", [f"d{round_:03d}"])
        assert answers(one) == answers(two) == truth(path)
    assert len(loads) == before
    one.close()
    two.close()


@pytest.mark.parametrize("damage", ["truncate matrix", "truncate doc_ids", "flip doc_ids", "garble meta",
                                    "missing file", "no CURRENT target"])  # fmt: skip
def test_a_torn_or_damaged_snapshot_is_rebuilt_not_trusted(tmp_path: Path, loads: list[str], damage: str) -> None:
    path = tmp_path / "i.db"
    saved_index(path)
    version = current_version(path)
    if damage == "truncate matrix":
        with open(version / "matrix.npy", "r+b") as f:
            f.truncate((version / "matrix.npy").stat().st_size - 64)
    elif damage == "truncate doc_ids":
        with open(version / "doc_ids", "r+b") as f:
            f.truncate(10)
    elif damage == "flip doc_ids":
        data = bytearray((version / "doc_ids").read_bytes())
        data[3] ^= 1
        (version / "doc_ids").write_bytes(bytes(data))
    elif damage == "garble meta":
        (version / "meta.json").write_text('{"format": 1, "n": ')
    elif damage == "missing file":
        (version / "alive.npy").unlink()
    else:
        (snapshot_root(path) / "CURRENT").write_text("v999-gone")
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert loads == ["t1", "t1"]  # the damaged snapshot was not used
    assert current_version(path) != version  # and a new one replaced it
    again.close()
    third = SqliteSearchIndex(path)
    assert answers(third) == truth(path)
    assert loads == ["t1", "t1"]
    third.close()


def test_a_matrix_that_disagrees_with_the_file_is_rebuilt(tmp_path: Path, loads: list[str]) -> None:
    """Same sizes, different bytes (a bit flipped in the big file, which has no checksum): the rows
    sampled against SQLite catch it."""
    path = tmp_path / "i.db"
    saved_index(path)
    matrix = current_version(path) / "matrix.npy"
    values = np.load(matrix)
    values[-1] = -values[-1]  # the last row is always sampled
    np.save(matrix, values)
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert loads == ["t1", "t1"]
    again.close()


def test_another_files_snapshot_is_never_used(tmp_path: Path, loads: list[str]) -> None:
    """A new file (same name, same generation count) does not inherit the old file's snapshot."""
    path = tmp_path / "i.db"
    saved_index(path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    other = SqliteSearchIndex(path)
    other.upsert(corpus(seed=5))  # as many documents, ids and writes as before: only the epoch differs
    assert answers(other) == truth(path)
    assert loads == ["t1", "t1"]
    other.close()


def test_a_rebuild_invalidates_the_snapshot(tmp_path: Path, loads: list[str]) -> None:
    """`mneme reindex` clears the tenant and writes it again: the log says "everything"."""
    path = tmp_path / "i.db"
    saved_index(path)
    writer = SqliteSearchIndex(path, snapshots=False)
    writer.clear_tenant("t1")
    writer.upsert(corpus(seed=7))
    writer.close()
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert loads == ["t1", "t1"]
    again.close()


def test_a_log_that_no_longer_covers_the_snapshot_means_a_full_load(
    tmp_path: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_index_module, "_LOG_KEEP", 3)
    path = tmp_path / "i.db"
    saved_index(path)
    writer = SqliteSearchIndex(path, snapshots=False)
    for i in range(6):
        writer.upsert([doc(f"x{i}", vector=QUERIES[i % 6].tolist())])
    writer.close()
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert loads == ["t1", "t1"]
    again.close()


def approximate_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, SqliteSearchIndex]:
    """An index file holding 400 documents, whose cache has its approximate index (from 200 rows)."""
    pytest.importorskip("faiss")
    monkeypatch.setattr(vector_cache, "ANN_MIN_ROWS", 200)
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 10)
    path = tmp_path / "i.db"
    index = SqliteSearchIndex(path)
    index.upsert(corpus(400))
    return path, index


def test_snapshot_of_an_approximate_index_takes_new_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The approximate index is saved too and read back memory-mapped (read-only): rows written
    after that go to a second index with the same quantizer, and a later save merges them."""
    path, index = approximate_index(tmp_path, monkeypatch)
    answers(index)
    index.close()
    assert (current_version(path) / "ann.faiss").exists()
    again = SqliteSearchIndex(path)
    answers(again)
    cache = again._caches.get("t1", MODEL)
    assert cache is not None and cache.ann is not None and cache.ann.frozen is not None
    again.upsert([doc("new", vector=QUERIES[2].tolist())])
    assert again.search_vector(flt(), QUERIES[2], MODEL, 1)[0].doc_id == "new"
    again.close()  # saves: frozen + new rows merged into one index
    third = SqliteSearchIndex(path)
    assert third.search_vector(flt(), QUERIES[2], MODEL, 1)[0].doc_id == "new"
    ann = third._caches.get("t1", MODEL).ann  # type: ignore[union-attr]
    assert ann is not None and ann.frozen is not None and ann.frozen.ntotal == 401
    third.close()


def test_an_exact_index_stays_exact_over_a_snapshot_that_holds_an_approximate_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ann=False` keeps every vector search exact, also when the cache it reads back was saved (with its
    approximate index) by a process that had one: its answers are those of a full exact scan."""
    path, index = approximate_index(tmp_path, monkeypatch)
    scan = answers(SqliteSearchIndex(path, ann=False, snapshots=False))  # every row, no index
    assert answers(index) == scan
    index.close()
    monkeypatch.setattr(vector_cache.Ann, "search", lambda *args: np.empty(0, np.int64))  # an index finding nothing
    exact = SqliteSearchIndex(path, ann=False)
    assert answers(exact) == scan
    assert exact._caches.get("t1", MODEL).ann is not None  # type: ignore[union-attr]  # read from the snapshot
    exact.close()
    assert not any(answers(SqliteSearchIndex(path)))  # the approximate index is what the default searches


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from mneme.adapters.sqlite import index as m
    from tests.contract.test_search_index import doc, flt, MODEL, DIM
    m.SNAPSHOT_MIN_ROWS = 10
    index = m.SqliteSearchIndex(sys.argv[1])
    rng = np.random.default_rng(int(sys.argv[2]))
    docs = [doc(f"k{i:03d}", vector=rng.standard_normal(DIM).tolist()) for i in range(40)]
    index.upsert(docs)
    index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 3)  # loads every row and saves
    index.upsert([doc(f"late{i}", vector=rng.standard_normal(DIM).tolist()) for i in range(5)])
    index.delete("t1", ["k000", "k001"])
    if sys.argv[3] == "mid-save":  # killed while writing the next snapshot: after its files, before CURRENT
        from mneme.adapters.sqlite import vector_snapshot
        def killed(*args):
            os.kill(os.getpid(), signal.SIGKILL)
        vector_snapshot.os.replace = killed
        index.close()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("when", ["after writes", "mid-save"])
def test_a_process_killed_with_sigkill_leaves_a_usable_file(tmp_path: Path, loads: list[str], when: str) -> None:
    path = tmp_path / "i.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), "4", when], env=env, cwd=ROOT, check=False)
    assert child.returncode == -signal.SIGKILL
    again = SqliteSearchIndex(path)
    got = answers(again)
    assert got == truth(path)
    assert again.doc_ids("t1") >= {"late0", "late4"} and "k000" not in again.doc_ids("t1")
    assert loads == []  # the saved snapshot was caught up from the log
    again.close()


def test_save_snapshots_saves_only_caches_far_enough_ahead(tmp_path: Path, loads: list[str]) -> None:
    """What the server's sweeper calls: a cache more than `behind` writes past its snapshot is saved again."""
    path = tmp_path / "i.db"
    index = SqliteSearchIndex(path)
    index.upsert(corpus())
    answers(index)
    first = current_version(path)
    index.upsert([doc("late1", vector=QUERIES[1].tolist())])
    index.save_snapshots(behind=1)
    assert current_version(path) == first  # one write behind: not yet
    index.upsert([doc("late2", vector=QUERIES[2].tolist())])
    index.save_snapshots(behind=1)
    assert current_version(path) != first
    again = SqliteSearchIndex(path, snapshots=True)
    assert answers(again) == truth(path)
    assert loads == ["t1"]
    again.close()
    index.close()


SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from mneme.adapters.sqlite import index as m
    from tests.contract.test_search_index import doc, flt, MODEL, DIM
    m.SNAPSHOT_MIN_ROWS = 10
    index = m.SqliteSearchIndex(sys.argv[1])
    rng = np.random.default_rng(int(sys.argv[2]))
    for i in range(int(sys.argv[3])):
        index.upsert([doc(f"p{sys.argv[2]}-{i}", vector=rng.standard_normal(DIM).tolist())])
        index.search_vector(flt(), np.ones(DIM, np.float32), MODEL, 3)  # catches up with the other's writes
        index.save_snapshots(0)  # a new version every round, racing the other process's
    index.close()
    """
)


def test_two_processes_saving_at_once_always_leave_a_loadable_current(tmp_path: Path, loads: list[str]) -> None:
    """Two processes save the same cache's snapshot over and over while this one keeps loading it: no save
    removes the version another's CURRENT names (or one being read), so every load finds a whole snapshot."""
    path = tmp_path / "i.db"
    index = SqliteSearchIndex(path)
    index.upsert(corpus())
    answers(index)  # the first snapshot
    epoch = index._epoch
    index.close()
    root = vector_snapshot.directory(str(path), "t1", MODEL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    savers = [
        subprocess.Popen([sys.executable, "-c", SAVER, str(path), str(seed), "25"], env=env, cwd=ROOT)
        for seed in (1, 2)
    ]
    failed = tried = 0
    while any(p.poll() is None for p in savers):
        tried += 1
        failed += vector_snapshot.load(root, epoch=epoch, tenant="t1", model_id=MODEL) is None
    assert [p.wait() for p in savers] == [0, 0]
    assert tried and failed == 0, f"{failed} of {tried} loads found no whole snapshot"
    assert vector_snapshot.load(root, epoch=epoch, tenant="t1", model_id=MODEL) is not None
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert loads == ["t1"]  # only the first index read every row: the last one read the last snapshot
    again.close()


@pytest.mark.parametrize("approximate", [False, True])
def test_writes_and_searches_go_on_while_a_snapshot_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, approximate: bool
) -> None:
    """The server's sweeper saves from a copy: while the files are being written (held here until the
    write is done), a write commits and a search sees it; the snapshot holds the rows as they were when
    it started, and the next process catches up the rest from the log."""
    if approximate:
        pytest.importorskip("faiss")
        monkeypatch.setattr(vector_cache, "ANN_MIN_ROWS", 200)
        monkeypatch.setattr(vector_cache, "EXACT_MAX", 10)
    path = tmp_path / "i.db"
    index = SqliteSearchIndex(path)
    index.upsert(corpus(400 if approximate else 60))
    answers(index)
    index.upsert([doc("before", vector=QUERIES[1].tolist())])
    writing, written = threading.Event(), threading.Event()
    original = vector_snapshot.save

    def held(*args: object, **kwargs: object) -> object:
        writing.set()
        assert written.wait(60)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_snapshot, "save", held)
    saver = threading.Thread(target=index.save_snapshots)
    saver.start()
    try:
        assert writing.wait(60)
        index.upsert([doc("during", vector=QUERIES[2].tolist())])
        assert index.search_vector(flt(), QUERIES[2], MODEL, 1)[0].doc_id == "during"
        assert saver.is_alive()  # the save is still held: the write did not wait for it
    finally:
        written.set()
        saver.join()
    meta = json.loads((current_version(path) / "meta.json").read_text())
    assert meta["generation"] == index._caches.get("t1", MODEL).generation - 1  # type: ignore[union-attr]
    if approximate:
        saved = faiss_index(current_version(path))
        assert saved.ntotal == meta["n"] - meta["dead"]  # the row written meanwhile is not in it
    again = SqliteSearchIndex(path)
    assert answers(again) == truth(path)
    assert again.search_vector(flt(), QUERIES[2], MODEL, 1)[0].doc_id == "during"
    again.close()
    index.close()


def faiss_index(version: Path) -> object:
    import faiss

    return faiss.read_index(str(version / "ann.faiss"))
