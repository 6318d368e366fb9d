"""Vector caches saved next to the SQLite index, so a process's first search does not read every row.

One directory per (tenant, model_id) under `<index file>.vectors/`, named by a hash of the pair:

    CURRENT              the name of the version to read (replaced atomically: write, fsync, rename)
    LOCK                 flock'd: exclusive while saving (saves of any process take turns, and never
                         remove the version CURRENT names), shared while a version is read
    v<gen>-<pid>-<rand>/ one version: the cache's arrays as .npy files (memory-mapped copy-on-write
                         when read, so a load costs page faults, not a copy), doc_ids (NUL-separated),
                         ann.faiss (the 8-bit copy of the rows, memory-mapped read-only) and meta.json,
                         written last, holding the sizes of every file and a CRC-32 of the small ones.

A snapshot is a cache, never the truth: the SQLite file is. It is used only when its file epoch
(a random id the index file gets when it is created) matches, every file has the size meta.json
records, the small files' checksums match, and the caller can bring it up to the file's current
generation from the index's change log and then finds it agreeing with the file (row count, and a
sample of rows byte for byte). Anything else (a torn or missing file, another file's snapshot, a
generation the log no longer covers) makes the caller rebuild from SQLite and write a new snapshot.
A crash while writing leaves an unreferenced version directory, removed by a later save. A save never
replaces a newer generation of the same file with an older one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import secrets
import shutil
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from mneme.adapters.sqlite.vector_cache import Ann, SavedIds, VectorCache

State = tuple[dict[str, Any], list[str], dict[str, Any]]  # `VectorCache.state()`

log = logging.getLogger(__name__)

FORMAT = 2  # 2: the approximate index is an 8-bit scalar-quantized copy (1: an inverted-file index)
ARRAYS = ("matrix", "alive", "occ", "kind", "tier", "session", "visible", "anc")
_BIG = {"matrix.npy", "ann.faiss"}  # sizes checked; checked against SQLite rows instead of a checksum
_ORPHAN_AGE = 300.0  # seconds before an unreferenced version directory counts as a crashed save


def directory(index_path: str, tenant: str, model_id: str) -> Path:
    key = hashlib.sha256(f"{tenant}\0{model_id}".encode()).hexdigest()[:24]
    return Path(f"{index_path}.vectors") / key


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _locked(root: Path, *, exclusive: bool) -> Iterator[None]:
    """The directory's file lock: exclusive while a version is written, CURRENT switched and old versions
    removed; shared while one is read. So no save removes a version another process points CURRENT at
    or is reading, and saves of one cache (from any process or thread) take turns."""
    fd = os.open(root / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


def save(root: Path, state: State, ann: Any | None, *, epoch: str, tenant: str, model_id: str) -> Path | None:
    """Write a cache's `state` (`VectorCache.state`, a consistent copy) and its approximate index as a
    new version and point CURRENT at it; None when CURRENT already holds a newer generation of this
    file (another process saved later rows first: replacing them would only make the next start catch
    up further)."""
    arrays, doc_ids, meta = state
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, exclusive=True):
        current = _current_generation(root, epoch)
        if current is not None and current > int(meta["generation"]):
            return None
        version = root / f"v{meta['generation']}-{os.getpid()}-{secrets.token_hex(4)}"
        version.mkdir()
        try:
            files: dict[str, int] = {}
            crcs: dict[str, int] = {}
            for name in ARRAYS:
                np.save(version / f"{name}.npy", np.ascontiguousarray(arrays[name]), allow_pickle=False)
            (version / "doc_ids").write_bytes("\0".join(doc_ids).encode())
            if ann is not None:
                import faiss

                faiss.write_index(ann, str(version / "ann.faiss"))
            for path in sorted(version.iterdir()):
                files[path.name] = path.stat().st_size
                if path.name not in _BIG:
                    crcs[path.name] = zlib.crc32(path.read_bytes())
                _fsync(path)
            meta = {**meta, "format": FORMAT, "epoch": epoch, "tenant": tenant, "model_id": model_id,
                    "files": files, "crc32": crcs}  # fmt: skip
            (version / "meta.json").write_text(json.dumps(meta))
            _fsync(version / "meta.json")
            _fsync(version)
            pointer = root / f"CURRENT.{os.getpid()}-{secrets.token_hex(4)}"
            pointer.write_text(version.name)
            _fsync(pointer)
            os.replace(pointer, root / "CURRENT")
            _fsync(root)
        except BaseException:
            shutil.rmtree(version, ignore_errors=True)
            raise
        _prune(root)
    return version


def _current_generation(root: Path, epoch: str) -> int | None:
    """The generation CURRENT's version holds, when it is this file's and readable."""
    try:
        meta = json.loads((root / (root / "CURRENT").read_text().strip() / "meta.json").read_text())
        return int(meta["generation"]) if meta.get("epoch") == epoch else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prune(root: Path) -> None:
    """Remove the versions CURRENT does not name, and stray files of crashed saves once they are old
    enough. Runs under the exclusive lock, so CURRENT names the version just written."""
    keep = (root / "CURRENT").read_text().strip()
    now = time.time()
    for path in root.iterdir():
        if path.name in (keep, "CURRENT", "LOCK"):
            continue
        with suppress(OSError):
            if path.name.startswith("v") and path.is_dir() and (path / "meta.json").exists():
                shutil.rmtree(path)  # a finished older version (another process may still map it: fine on POSIX)
            elif now - path.stat().st_mtime > _ORPHAN_AGE:
                shutil.rmtree(path) if path.is_dir() else path.unlink()


def load(root: Path, *, epoch: str, tenant: str, model_id: str) -> VectorCache | None:
    """The saved cache, or None when there is none or it fails a check (the reason is logged)."""
    if not (root / "CURRENT").exists():
        return None
    with _locked(root, exclusive=False):  # the version is opened (and mapped) before any save can remove it
        try:
            version = root / (root / "CURRENT").read_text().strip()
        except OSError:
            return None
        try:
            return _read(version, epoch=epoch, tenant=tenant, model_id=model_id)
        except _Rejected as exc:
            log.warning("vector snapshot %s not used: %s", version, exc)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            log.warning("vector snapshot %s unreadable: %s", version, exc)
    return None


class _Rejected(Exception):
    pass


def _read(version: Path, *, epoch: str, tenant: str, model_id: str) -> VectorCache:
    meta: dict[str, Any] = json.loads((version / "meta.json").read_text())
    if meta.get("format") != FORMAT:
        raise _Rejected(f"format {meta.get('format')}")
    if (meta["epoch"], meta["tenant"], meta["model_id"]) != (epoch, tenant, model_id):
        raise _Rejected("written for another index file, tenant or model")
    for name, size in meta["files"].items():
        path = version / name
        if path.stat().st_size != size:
            raise _Rejected(f"{name} has {path.stat().st_size} bytes, not {size} (torn)")
        if name in meta["crc32"] and zlib.crc32(path.read_bytes()) != meta["crc32"][name]:
            raise _Rejected(f"{name} fails its checksum")
    # plain ndarray views of the maps (no copy): numpy's memmap subclass costs ~20 % per search at 10k rows
    arrays = {name: np.asarray(np.load(version / f"{name}.npy", mmap_mode="c", allow_pickle=False)) for name in ARRAYS}
    n = int(meta["n"])
    if any(len(arrays[name]) != n for name in ARRAYS if name != "anc") or arrays["anc"].shape[1:] != (n,):
        raise _Rejected("array lengths disagree")
    if n and arrays["matrix"].shape[1] != meta["dim"]:
        raise _Rejected("matrix width is not the recorded dimension")
    try:
        doc_ids = SavedIds((version / "doc_ids").read_bytes(), n)
    except ValueError as exc:
        raise _Rejected(str(exc)) from None
    ann = None
    if "ann.faiss" in meta["files"]:
        import faiss

        index = faiss.read_index(str(version / "ann.faiss"), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
        codes = faiss.ScalarQuantizer.QT_8bit_direct_signed
        if index.d != meta["dim"] or index.ntotal != n or getattr(getattr(index, "sq", None), "qtype", None) != codes:
            raise _Rejected("approximate index does not match the rows")
        ann = Ann(None, frozen=index)
    return VectorCache.from_state(arrays, doc_ids, meta, ann)
