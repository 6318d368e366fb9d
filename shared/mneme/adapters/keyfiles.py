"""The secrets the embedded engine keeps in MNEME_HOME (`cursor.key`, `admin.key`): written atomically
(a temporary file, synced, then linked into place: a full disk or a crash leaves no empty or partial key),
created once even when several processes race, and refused when empty or short instead of used. A full or
read-only disk is the domain's storage error (`StorageFull`, `StoreReadOnly`), as for the store."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from mneme.adapters.sqlite.base import translated
from mneme.errors import MnemeError

ADMIN_KEY_MINIMUM = 32  # characters: a key Mneme creates is 47 (`keys.KEY_PREFIX` + 43)
CURSOR_KEY_MINIMUM = 64  # characters: the generated cursor.key is 64 hex (`bootstrap.CURSOR_KEY_BYTES`)
MINIMUMS = {"admin.key": ADMIN_KEY_MINIMUM, "cursor.key": CURSOR_KEY_MINIMUM}  # the keys a home keeps


class KeyFileDamaged(MnemeError):
    code = "key_file_damaged"
    status = 503


def create_once(path: Path, text: str) -> bool:
    """Write `text` to `path` (mode 600) unless it exists; True when this call created it. The file
    appears whole or not at all: on a full disk `StorageFull` is raised and nothing is left behind."""
    with translated():
        temporary = _synced_beside(path, text)
        try:
            try:
                os.link(temporary, path)  # create-only: a file another process linked first wins
            except FileExistsError:
                return False
            sync_directory(path.parent)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def replace_whole(path: Path, text: str) -> None:
    """Write `text` to `path` (mode 600) over what it held: the old text or the new, never a part."""
    with translated():
        temporary = _synced_beside(path, text)
        try:
            os.replace(temporary, path)
            sync_directory(path.parent)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def _synced_beside(path: Path, text: str) -> str:
    """A temporary file beside `path` holding `text`, on disk (mode 600), for the caller to link or rename;
    nothing is left behind when it cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary


def read_key(path: Path, minimum: int) -> str:
    """The key in `path`, refused (KeyFileDamaged, one clear line) when it is shorter than `minimum`, not
    UTF-8 text, or not a file that can be read (a directory, a permission)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise _damaged(path, "is not UTF-8 text: it was damaged or overwritten") from None
    except OSError as e:
        what = "is a directory" if isinstance(e, IsADirectoryError) else f"cannot be read ({e.strerror})"
        raise _damaged(path, f"{what}, not the key file Mneme writes") from None
    if len(text) < minimum:
        raise KeyFileDamaged(
            f"{path} holds {'no key' if not text else f'a {len(text)}-character key'} (at least {minimum} "
            "expected): it was cut short; restore it from a backup, or remove it to have a new one created",
            details={"path": str(path)},
        )
    return text


def key_problem(path: Path, minimum: int) -> str | None:
    """Why the key in `path` cannot be used (what `/v1/health` reports), or None: fine, or not created yet."""
    if not os.path.lexists(path):
        return None
    try:
        read_key(path, minimum)
    except KeyFileDamaged as e:
        return e.message
    return None


def _damaged(path: Path, what: str) -> KeyFileDamaged:
    return KeyFileDamaged(
        f"{path} {what}; restore it from a backup, or remove it to have a new one created", details={"path": str(path)}
    )


def sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be opened for fsync
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
