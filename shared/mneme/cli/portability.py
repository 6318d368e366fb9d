"""`mneme export` and `mneme import`: a subtree as JSON lines (or STTP nodes), and back (embedded)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mneme.cli.command import Context, command
from mneme.cli.output import Progress, emit_json, err, quiet_runtime
from mneme.errors import InvalidInput

if TYPE_CHECKING:
    from mneme.services.importing import Imported


def cmd_export(ctx: Context) -> int:
    """Write a subtree as JSON lines (or STTP nodes); to a file via FILE.partial, renamed when complete."""

    ctx.embedded_only("export")
    quiet_runtime()
    args = ctx.args
    portability = ctx.services.portability
    tenant = ctx.config.tenant
    if args.format == "sttp":
        lines: Iterator[str] = portability.export_sttp(tenant, args.path)
    else:
        records = portability.export(tenant, args.path, vectors=args.vectors)
        lines = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) for record in records)
    target = Path(args.output) if args.output and args.output != "-" else None
    partial = target.with_name(target.name + ".partial") if target else None
    progress = Progress("export", unit="records", quiet=ctx.quiet)
    out = partial.open("w", encoding="utf-8") if partial else sys.stdout
    try:
        for line in lines:
            out.write(line + "\n")
            progress.advance()
    except KeyboardInterrupt:
        progress.interrupted()
        if partial:
            out.close()
            partial.unlink(missing_ok=True)
        err("interrupted: nothing was written" + (f" to {target}" if target else " after the lines above"))
        return 130
    finally:
        if partial and not out.closed:
            out.close()
    if partial and target:
        partial.replace(target)
    progress.done()
    if target:
        err(f"exported {progress.count:,} records of {args.path} (tenant {tenant}) to {target}")
    return 0


def _import_lines(source: TextIO, read: Callable[[], None]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(source, start=1):
        read()
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"line {number}: not JSON ({e.msg})", code="invalid_export") from None
        if not isinstance(record, dict):
            raise InvalidInput(f"line {number}: expected a JSON object", code="invalid_export")
        yield record


def cmd_import(ctx: Context) -> int:
    """Load an export into the tenant, all or nothing (`--continue`: record by record, each one that fails
    reported); records whose id exists are skipped, so a re-run is safe."""

    ctx.embedded_only("import")
    quiet_runtime()
    args = ctx.args
    tenant = ctx.config.tenant
    total = None
    if args.file != "-":
        try:
            with open(args.file, "rb") as f:
                total = sum(1 for line in f if line.strip())
        except OSError as e:
            raise InvalidInput(f"cannot read {args.file}: {e.strerror}", code="invalid_file") from None
    counts: dict[str, int] = {}

    def detail() -> str:
        new = sum(v for k, v in counts.items() if k != "skipped")
        return f"{new:,} written, {counts.get('skipped', 0):,} already present" if counts else ""

    progress = Progress("import", unit="lines", total=total, quiet=ctx.quiet, detail=detail)
    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
    try:
        imported = ctx.services.portability.import_(
            tenant, _import_lines(source, progress.advance), progress=counts.update, keep_going=args.keep_going
        )
    except KeyboardInterrupt:
        progress.interrupted()
        if args.keep_going:
            err("interrupted: the records written so far stay; import the same file again to finish "
                "(records already present are skipped)")  # fmt: skip
        else:
            err("interrupted: nothing was imported (an import is all or nothing)")
        return 130
    finally:
        if source is not sys.stdin:
            source.close()
    progress.done()
    return _report(tenant, imported, as_json=args.json)


def _report(tenant: str, imported: Imported, *, as_json: bool) -> int:
    """What was written (exactly), and each record that was not (`--continue`); 1 when some were not."""
    counts, failed = imported.counts, imported.failed
    if as_json:
        emit_json({**counts, "failed": failed})
    else:
        written = ", ".join(f"{counts.get(k, 0):,} {k}" for k in ("scopes", "aliases", "memories", "revisions",
                                                                   "episodes", "facts"))  # fmt: skip
        print(f"imported into tenant {tenant}: {written}; {counts.get('skipped', 0):,} already present"
              + (f"; {len(failed):,} not imported" if failed else ""))  # fmt: skip
        for record in failed:
            err(f"not imported: line {record['line']} ({record['type']} {record['id'] or ''}): "
                f"{record['code']}: {record['message']}")  # fmt: skip
    return 1 if failed else 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    export = command(
        sub,
        "export",
        cmd_export,
        common,
        help="export a subtree (scopes, memories, episodes, facts) as JSON lines, with progress (embedded)",
        examples="""
mneme export --output acme.jsonl root.acme
mneme export --tenant acme --vectors > acme.jsonl      # with embeddings: no re-embedding on import
mneme export --format sttp root.lab > lab.sttp          # episodes and roll-ups as STTP nodes
""",
    )
    export.add_argument("path", nargs="?", default="root", help="the subtree (default root)")
    export.add_argument("--output", "-o", metavar="FILE", help="write here (complete files only); default stdout")
    export.add_argument("--vectors", action="store_true", help="include embeddings")
    export.add_argument("--format", choices=["jsonl", "sttp"], default="jsonl")

    imp = command(
        sub,
        "import",
        cmd_import,
        common,
        help="import an export into a tenant, all or nothing; a second import changes nothing (embedded)",
        examples="""
mneme import acme.jsonl --tenant acme-copy
mneme --home /srv/mneme import - < acme.jsonl
mneme import acme.jsonl --continue          # write every record that can be, report each one that cannot
""",
    )
    imp.add_argument("file", help="an export file ('-': stdin)")
    imp.add_argument("--json", action="store_true", help="the counts (and the records not imported) as JSON")
    imp.add_argument(
        "--continue",
        dest="keep_going",
        action="store_true",
        help="record by record: skip a record that fails, report it (line, type, id, error) and exit 1",
    )
