"""The disk under the embedded engine's files, as the domain's storage errors: SQLite's result codes and
the operating system's error numbers, read once here, so nothing above the adapters decodes either.

A full disk is `StorageFull` (507), a read-only disk or file `StoreReadOnly` (503), a damaged file
`StoreDamaged` (503). SQLite rolls the transaction back in every case: nothing is half-written.
"""

from __future__ import annotations

import errno
import sqlite3

from mneme.errors import MnemeError, StorageFull, StoreDamaged, StoreReadOnly

FULL = (errno.ENOSPC, errno.EDQUOT)
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
SQLITE_FULL, SQLITE_READONLY, SQLITE_CANTOPEN = 13, 8, 14  # primary result codes (the low byte)
SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26

FULL_MESSAGE = "the disk under the store is full: nothing was written; free space and retry"
READ_ONLY_MESSAGE = "the store cannot be written (a read-only disk or file): nothing was written"
DAMAGED_MESSAGE = "the store's file is damaged: restore it from a backup (`mneme restore`)"


def storage_error(error: BaseException) -> MnemeError | None:
    """The storage error that `error` (or the error it was raised from) stands for; None for any other."""
    for cause in (error, error.__cause__, error.__context__):
        if isinstance(cause, sqlite3.Error):
            primary = (getattr(cause, "sqlite_errorcode", 0) or 0) & 0xFF
            if primary == SQLITE_FULL:
                return StorageFull(FULL_MESSAGE)
            if primary in (SQLITE_READONLY, SQLITE_CANTOPEN):
                return StoreReadOnly(READ_ONLY_MESSAGE)
            if primary in (SQLITE_CORRUPT, SQLITE_NOTADB):
                return StoreDamaged(DAMAGED_MESSAGE)
        if isinstance(cause, OSError) and cause.errno in FULL:
            return StorageFull(FULL_MESSAGE)
        if isinstance(cause, OSError) and cause.errno in READ_ONLY:
            return StoreReadOnly(READ_ONLY_MESSAGE)
    return None
