"""`mneme backup DEST` and `mneme restore SRC` (embedded): a home copied while it serves, and put back checked
(`mneme.local.backup`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from mneme.cli.command import Context, command
from mneme.cli.output import emit_json, err, quiet_runtime
from mneme.errors import MnemeError


def _megabytes(count: int) -> str:
    return f"{count / 1e6:,.1f} MB"


def _episodes(manifest: dict[str, Any]) -> int:
    return sum(int(rows.get("episodes", 0)) for rows in manifest.get("rows", {}).values())


def cmd_backup(ctx: Context) -> int:
    from mneme import bootstrap
    from mneme.adapters.sqlite.base import SqliteBase
    from mneme.local import backup

    ctx.embedded_only("backup")
    quiet_runtime()
    settings = bootstrap.current_settings()
    store = ctx.services.store
    if not isinstance(store, SqliteBase):
        raise MnemeError("`mneme backup` copies the embedded SQLite store; this home is configured for another")
    if not settings.sqlite_path.exists():
        raise backup.BackupRefused(
            f"{settings.home.resolve()} holds no store ({settings.sqlite_path.name}): nothing to back up"
        )
    done = backup.backup(settings.home, store, Path(ctx.args.dest))
    if ctx.args.json:
        timing = {"seconds": round(done.seconds, 3), "copy_seconds": round(done.copy_seconds, 3)}
        emit_json({"dest": str(done.dest), **timing, "bytes": done.bytes, **done.manifest})
        return 0
    files = ", ".join(done.manifest["files"])
    print(
        f"backed up {settings.home.resolve()} to {done.dest} in {done.seconds:.1f} s "
        f"({files}: {_megabytes(done.bytes)}; {_episodes(done.manifest):,} episodes)"
    )
    print("the search index is left out (derived): `mneme restore` rebuilds it from the store")
    return 0


def cmd_restore(ctx: Context) -> int:
    from mneme import bootstrap
    from mneme.cli.server import rebuild_index
    from mneme.local import backup, checks

    ctx.embedded_only("restore")
    quiet_runtime()
    settings = bootstrap.current_settings()
    started = time.monotonic()

    def rebuild() -> None:
        if not ctx.quiet:
            err("rebuilding the search index from the restored store…")
        rebuild_index("restored from a backup").join()

    done = backup.restore(Path(ctx.args.src), settings.home, force=ctx.args.force, rebuild=rebuild)
    manifest = done.manifest
    index_left = checks.rebuilding(settings.index_path)
    if ctx.args.json:
        emit_json({**manifest, "home": str(settings.home.resolve()), "moved_aside": done.moved_aside,
                   "index": "rebuilding" if index_left else "ok"})  # fmt: skip
        return 1 if index_left else 0
    if done.moved_aside is not None:
        print(f"the home's earlier files were moved to {done.moved_aside}")
    print(
        f"restored the backup of {manifest['source']} taken {manifest['created_at']} into "
        f"{settings.home.resolve()} in {time.monotonic() - started:.1f} s ({_episodes(manifest):,} episodes)"
    )
    if index_left:
        print("the search index could not be rebuilt (see the log above): `mneme serve` rebuilds it at start",
              file=sys.stderr)  # fmt: skip
        return 1
    print("its search index was rebuilt from the store: `mneme serve --home ...` serves it")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    backup = command(
        sub,
        "backup",
        cmd_backup,
        common,
        help="copy the local home (store and keys) into a new folder, also while `mneme serve` runs",
        examples="""
mneme backup /backups/mneme-$(date +%F)
mneme backup --home /var/lib/mneme /mnt/usb/mneme-weekly --json
""",
    )
    backup.add_argument("dest", help="a new (or empty) folder to write the backup into")
    backup.add_argument("--json", action="store_true")

    restore = command(
        sub,
        "restore",
        cmd_restore,
        common,
        help="put a backup in place as the local home, checked first; then rebuild its search index",
        examples="""
mneme restore /backups/mneme-2026-12-01 --home ./.mneme
mneme restore /backups/mneme-2026-12-01 --home /var/lib/mneme --force   # the old files go to replaced-<time>/
""",
    )
    restore.add_argument("src", help="a folder `mneme backup` wrote")
    restore.add_argument(
        "--force", action="store_true", help="restore into a home that is not empty (its files are moved aside)"
    )
    restore.add_argument("--json", action="store_true")
