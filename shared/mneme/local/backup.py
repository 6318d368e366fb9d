"""`mneme backup` and `mneme restore`: a home copied while it serves, and put back only once it checks out.

A backup is a folder laid out as a home, with a manifest:
- `mneme.db`: the store as of one moment, by SQLite's online backup API (`SqliteBase.backup`: one read
  transaction, so writers of every process go on meanwhile), in rollback-journal mode: one file that any
  SQLite reader opens as it is;
- `admin.key`, `cursor.key`: the home's secrets as they are (mode 600), those it has;
- `backup.json`: what it is (`FORMAT`, `VERSION`), when and from where, each file's size and SHA-256, the
  store's schema version and its rows per tenant.
The search index (`index.db`, its vector snapshots) is derived from the store and left out; a restore
rebuilds it. The folder is written under a temporary name beside DEST, checked as `mneme serve` checks a
home at start, then renamed into place: a backup exists whole or not at all. The home remembers its last
backup (`last-backup.json`, shown by `mneme status`).

A restore refuses what is not a Mneme backup (no manifest, another format, a file it does not know), what
is damaged (a size or SHA-256 that differs from the manifest, a store that fails the start checks, a key
cut short) and a home that holds anything unless `force`, which moves its files into `replaced-<time>/`
(never deletes them). It holds the home alone (`home.held_for_restore`), copies and checks the files in a
folder inside the home, then moves them into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mneme.adapters.keyfiles import MINIMUMS, create_once, read_key, replace_whole, sync_directory
from mneme.adapters.sqlite.base import SqliteBase
from mneme.adapters.sqlite.store import row_counts
from mneme.errors import MnemeError
from mneme.local import checks, home

FORMAT = "mneme-backup"
VERSION = 1
MANIFEST = "backup.json"
STORE = "mneme.db"
LAST_BACKUP = "last-backup.json"
LEFT_OUT = "index.db: derived from the store; `mneme restore` rebuilds it (or `mneme reindex`, tenant by tenant)"


class BackupRefused(MnemeError):
    code = "backup_refused"
    status = 400


@dataclass
class BackedUp:
    dest: Path
    manifest: dict[str, Any]
    seconds: float  # the whole backup
    copy_seconds: float  # the store's copy alone (the read transaction writers never wait for)

    @property
    def bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.manifest["files"].values())


def backup(source: Path, store: SqliteBase, dest: Path) -> BackedUp:
    """Copy the home `source` (whose store is `store`, open in this process) into the new folder `dest`."""
    dest = dest.absolute()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupRefused(f"{dest} already exists and is not an empty folder: back up into a new one")
    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    try:
        store.backup(staging / STORE)
        copied = time.monotonic() - started
        for name, minimum in MINIMUMS.items():
            if (source / name).exists():
                read_key(source / name, minimum)  # a key cut short is refused as the server would
                create_once(staging / name, (source / name).read_text())
        checks.check_store(staging / STORE, staging)
        manifest = _manifest(source, staging)
        create_once(staging / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.rename(staging, dest)
        sync_directory(dest.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    done = BackedUp(dest, manifest, time.monotonic() - started, copied)
    record = {"at": manifest["created_at"], "dest": str(dest), "bytes": done.bytes, "seconds": round(done.seconds, 3)}
    replace_whole(source / LAST_BACKUP, json.dumps(record) + "\n")
    return done


def last_backup(source: Path) -> dict[str, Any] | None:
    """The home's last backup ({at, dest, bytes, seconds}), or None when it has none on record."""
    try:
        found = json.loads((source / LAST_BACKUP).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and "at" in found else None


@dataclass
class Restored:
    manifest: dict[str, Any]
    moved_aside: Path | None  # where the home's earlier files went (with `force`)


def restore(src: Path, target: Path, *, force: bool, rebuild: Callable[[], None]) -> Restored:
    """Put the backup `src` in place as the home `target`, then call `rebuild` (the index) while servers are
    still kept out but other processes may open the store again."""
    manifest = read_manifest(src)
    target = target.absolute()
    with home.held_for_restore(target, target / STORE) as reopen:
        present = _contents(target)
        if present and not force:
            shown = ", ".join(p.name for p in present[:4]) + (" …" if len(present) > 4 else "")
            raise BackupRefused(
                f"{target} is not empty ({shown}): pass --force to move its files into "
                f"{target}/replaced-<time>/ and restore in their place"
            )
        for stale in target.glob(".restore-*"):  # left by a restore that was killed: the home is ours alone
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=target, prefix=".restore-"))
        try:
            _stage(src, manifest, staging)
            aside = _move_aside(target, present) if present else None
            for name in manifest["files"]:
                os.replace(staging / name, target / name)
            checks.marker(target / "index.db").write_text(json.dumps({"reason": "restored from a backup"}))
            sync_directory(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        reopen()
        rebuild()
    return Restored(manifest, aside)


def read_manifest(src: Path) -> dict[str, Any]:
    """The backup's manifest, refused unless it is a Mneme backup this code reads."""
    path = src / MANIFEST
    if not src.is_dir():
        raise BackupRefused(f"{src} is not a folder: give the folder `mneme backup` wrote")
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BackupRefused(
            f"{src} is not a Mneme backup (no {MANIFEST}): give the folder `mneme backup` wrote"
        ) from None
    except (OSError, ValueError) as e:
        raise BackupRefused(f"{path} is damaged ({e}): restore another backup") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupRefused(f"{src} is not a Mneme backup ({MANIFEST} does not say {FORMAT!r})")
    if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
        raise BackupRefused(f"{src} was written by a newer Mneme (backup format {manifest.get('version')!r}): upgrade")
    files = manifest.get("files")
    if not isinstance(files, dict) or STORE not in files or not set(files) <= {STORE, *MINIMUMS}:
        raise BackupRefused(f"{path} is damaged: it must list {STORE} and may list only {', '.join(MINIMUMS)}")
    return manifest


def _stage(src: Path, manifest: dict[str, Any], staging: Path) -> None:
    """Copy the backup's files into `staging` and check them there: each against the manifest, the store with
    the checks `mneme serve` runs at start, each key as the server reads it."""
    for name, expected in manifest["files"].items():
        try:
            shutil.copyfile(src / name, staging / name)
        except OSError as e:
            raise BackupRefused(f"{src / name} cannot be read ({e.strerror or e}): the backup is incomplete") from None
        if name in MINIMUMS:
            os.chmod(staging / name, 0o600)
        found = _describe(staging / name)
        if found != {"bytes": expected.get("bytes"), "sha256": expected.get("sha256")}:
            raise BackupRefused(
                f"{src / name} is damaged: {found['bytes']:,} bytes with another SHA-256 than the "
                f"{expected.get('bytes')!r} bytes backed up; restore another backup"
            )
    try:
        checks.check_store(staging / STORE, staging)
        for name in set(manifest["files"]) & set(MINIMUMS):
            read_key(staging / name, MINIMUMS[name])
    except MnemeError as e:
        raise BackupRefused(f"the backup in {src} is refused: {e.message}") from None


def _manifest(source: Path, staging: Path) -> dict[str, Any]:
    names = [STORE, *(name for name in MINIMUMS if (staging / name).exists())]
    with contextlib.closing(sqlite3.connect(f"file:{staging / STORE}?mode=ro", uri=True)) as db:
        schema = int(db.execute("PRAGMA user_version").fetchone()[0])
        counts = row_counts(db)
    return {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "source": str(source.absolute()),
        "store_schema": schema,
        "files": {name: _describe(staging / name) for name in names},
        "rows": counts,
        "left_out": LEFT_OUT,
    }


def _describe(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _contents(target: Path) -> list[Path]:
    """What the home holds besides its (empty) lock files and earlier restores' leftovers."""
    if not target.exists():
        return []
    skip = set(home.LOCK_FILES)
    return sorted(
        p for p in target.iterdir()
        if p.name not in skip and not p.name.startswith(("replaced-", ".restore-"))
    )  # fmt: skip


def _move_aside(target: Path, present: list[Path]) -> Path:
    aside = target / f"replaced-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    aside.mkdir()
    for path in present:
        os.replace(path, aside / path.name)
    return aside
