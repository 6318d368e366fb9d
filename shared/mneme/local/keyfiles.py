"""The secrets the embedded engine keeps in MNEME_HOME (`cursor.key`, `admin.key`): written atomically
(a temporary file, synced, then linked into place: a full disk or a crash leaves no empty or partial key),
created once even when several processes race, and refused when empty or short instead of used."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from mneme.errors import MnemeError

CURSOR_KEY_BYTES = 32  # a generated cursor.key: 64 hex characters


class KeyFileDamaged(MnemeError):
    code = "key_file_damaged"
    status = 503


def create_once(path: Path, text: str) -> bool:
    """Write `text` to `path` (mode 600) unless it exists; True when this call created it. The file
    appears whole or not at all: on a full disk the OSError is raised and nothing is left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        try:
            os.link(temporary, path)  # create-only: a file another process linked first wins
        except FileExistsError:
            return False
        _sync_directory(path.parent)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


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


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be opened for fsync
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
