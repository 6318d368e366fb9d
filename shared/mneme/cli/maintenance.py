"""Store maintenance commands: consolidate, export, import, reindex, status, config, openapi."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mneme.cli.app import Context, command
from mneme.cli.config import DEFAULTS, KEYS
from mneme.cli.output import Progress, emit_json, err, quiet_runtime
from mneme.errors import InvalidInput

if TYPE_CHECKING:
    from mneme.consolidation.stages import Batch
    from mneme_sdk.models import RunView


# -- consolidate ---------------------------------------------------------------------------------------


def cmd_consolidate(ctx: Context) -> int:
    if ctx.config.remote:
        return _consolidate_remote(ctx)
    return _consolidate_local(ctx)


def _consolidate_local(ctx: Context) -> int:
    """Run consolidation in this process, batch by batch, with a progress line per stage."""
    from mneme import bootstrap

    quiet_runtime()
    services = bootstrap.current()
    caller = ctx.principal()
    tenant = caller.tenant
    service = services.consolidation
    run, targets = service.open(caller, ctx.args.scope or None)  # the service's ids: unique, not per second
    if not ctx.quiet:
        err(f"consolidating {len(targets)} scope(s) with the {service.deps.reasoner.name} reasoner")
    start, read = time.monotonic(), 0
    tty = sys.stderr.isatty()
    last = 0.0

    def progress(stage: str, batch: Batch) -> None:
        nonlocal read, last
        if stage == "collect":
            read += len(batch.episode_ids)
        if ctx.quiet:
            return
        now = time.monotonic()
        if not tty and now - last < 1.0 and stage != "checkpoint":
            return
        last = now
        rate = read / max(now - start, 1e-6) * 60
        path = services.scopes.chain_of(tenant, batch.scope_id).path
        line = f"{path}: {stage:<10} {read} episodes ({rate:,.0f}/min)"
        print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)

    try:
        run = service.execute(run, targets, progress=progress, settle=True)
    except KeyboardInterrupt:
        err("\ninterrupted: the unfinished batch is replayed next time (its checkpoint did not move)")
        return 130
    if tty and not ctx.quiet:
        print(file=sys.stderr)
    from mneme_sdk.models import RunView

    return _report(ctx, RunView.model_validate(run.model_dump(exclude={"tenant"})))


def _consolidate_remote(ctx: Context) -> int:
    client = ctx.client()
    started = client.consolidate(ctx.args.scope or None)
    if not ctx.quiet:
        err(f"run {started.run_id} started over {len(started.scopes)} scope(s)")
    if ctx.args.no_wait:
        if ctx.args.json:
            emit_json(started)
        else:
            print(started.run_id)
        return 0
    began = time.monotonic()
    tty = sys.stderr.isatty()

    def update(run: RunView) -> None:
        if ctx.quiet:
            return
        counters = run.stages.get("collect")
        read = counters.counters.get("episodes_read", 0) if counters else 0
        line = f"{run.run_id}: {run.status} after {time.monotonic() - began:,.0f}s, {read} episodes read"
        end = "\n" if run.finished or not tty else ""
        print(f"\r\033[K{line}" if tty else line, end=end, file=sys.stderr, flush=True)

    try:
        run = client.wait_run(started.run_id, timeout=ctx.args.wait_timeout, on_update=update)
    except KeyboardInterrupt:
        err(f"\nstopped waiting: run {started.run_id} goes on on the server")
        return 130
    except TimeoutError as e:
        err(f"\n{e}; it goes on on the server")
        return 1
    return _report(ctx, run)


def _report(ctx: Context, run: RunView) -> int:
    if ctx.args.json:
        emit_json(run)
    else:
        for stage, report in run.stages.items():
            counters = ", ".join(f"{name} {value}" for name, value in report.counters.items())
            print(f"  {stage:<10} {counters}")
        for error in run.errors:
            print(f"  error in {error.get('stage', '?')}: {error.get('message', error)}")
        for cluster in run.set_aside:
            print(f"  set aside ({cluster.get('episodes', '?')} episodes): {cluster.get('reason', cluster)}")
        print(f"run {run.run_id}: {run.status}")
    return 0 if run.status == "succeeded" else 1


# -- export and import ---------------------------------------------------------------------------------


def cmd_export(ctx: Context) -> int:
    """Write a subtree as JSON lines (or STTP nodes); to a file via FILE.partial, renamed when complete."""
    from mneme import bootstrap

    ctx.embedded_only("export")
    quiet_runtime()
    args = ctx.args
    portability = bootstrap.current().portability
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
    """Load an export into the tenant; records whose id exists are skipped, so a re-run is safe."""
    from mneme import bootstrap

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
        counts = bootstrap.current().portability.import_(
            tenant, _import_lines(source, progress.advance), progress=counts.update
        )
    except KeyboardInterrupt:
        progress.interrupted()
        err(
            "interrupted: the records written so far stay; import the same file again to finish "
            "(records already present are skipped)"
        )
        return 130
    finally:
        if source is not sys.stdin:
            source.close()
    progress.done()
    if args.json:
        emit_json(counts)
    else:
        written = ", ".join(f"{counts.get(k, 0):,} {k}" for k in ("scopes", "aliases", "memories", "episodes", "facts"))
        print(f"imported into tenant {tenant}: {written}; {counts.get('skipped', 0):,} already present")
    return 0


# -- reindex, status, config, openapi ------------------------------------------------------------------


def _progress(label: str, quiet: bool) -> Callable[[int], None]:
    start = time.monotonic()
    tty = sys.stderr.isatty()
    last = 0.0

    def report(done: int) -> None:
        nonlocal last
        now = time.monotonic()
        if quiet or (not tty and now - last < 1.0):
            return
        last = now
        line = f"{label}: {done} documents ({done / max(now - start, 1e-6):,.0f}/s)"
        print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)

    return report


def cmd_reindex(ctx: Context) -> int:
    """Rebuild a tenant's index from records, or retry episodes whose index write failed."""
    from mneme import bootstrap

    ctx.embedded_only("reindex")
    quiet_runtime()
    indexer = bootstrap.current().indexer
    tenant = ctx.config.tenant
    try:
        if ctx.args.pending:
            done = indexer.sweep(progress=_progress("indexing pending", ctx.quiet))
            left = len(bootstrap.current().store.list_unindexed(1))
            print(f"\nindexed {done} pending episodes" + (" (the index still fails; retry later)" if left else ""))
            return 1 if left else 0
        rebuilt = indexer.rebuild(tenant, progress=_progress(f"rebuilding {tenant}", ctx.quiet))
        print(f"\nrebuilt {rebuilt.documents} documents for tenant {tenant!r}")
        if rebuilt.sessions:
            print(f"added {rebuilt.sessions} episodes written before the session index to their sessions")
        if rebuilt.runs:
            print(f"listed {rebuilt.runs} older consolidation runs by start time")
    except KeyboardInterrupt:
        err("\ninterrupted: records are untouched; run the same command again to finish")
        return 130
    return 0


def _table_counts(db: Path) -> dict[str, dict[str, int]]:
    """Rows per tenant of every table with a tenant column, read-only (no lock taken)."""
    counts: dict[str, dict[str, int]] = {}
    if not db.exists():
        return counts
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
            if "tenant" not in columns:
                continue
            for tenant, n in conn.execute(f'SELECT tenant, count(*) FROM "{table}" GROUP BY tenant'):
                counts.setdefault(tenant, {})[table] = n
    finally:
        conn.close()
    return counts


def _size(path: Path) -> str:
    if not path.exists():
        return "absent"
    size = float(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")))  # with -wal/-shm
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return ""


def status_report(ctx: Context) -> dict[str, Any]:
    """What the embedded store holds: where it is, counts per tenant, index backlog, dirty scopes."""
    from mneme import bootstrap
    from mneme.cli.server import check_home
    from mneme.local.checks import rebuilding
    from mneme.settings import SqliteIndex, SqliteStore

    quiet_runtime()
    settings = bootstrap.current_settings()
    problem = check_home()  # a damaged or foreign store stops here, with one line
    services = bootstrap.current()
    store = services.store
    report: dict[str, Any] = {
        "mode": "embedded",
        "home": str(settings.home.resolve()),
        "store": settings.store.kind,
        "index": settings.index.kind,
        "embedder": services.embedder.model_id,
        "reasoner": services.consolidation.deps.reasoner.name,
    }
    if isinstance(settings.store, SqliteStore):
        report["files"] = {"records": _size(settings.sqlite_path)}
        if isinstance(settings.index, SqliteIndex):
            report["files"]["index"] = _size(settings.index_path)
    if problem is None:
        report["index_state"] = "ok"
    elif rebuilding(settings.index_path):
        report["index_state"] = f"rebuilding: {problem} (recall reads records meanwhile)"
    else:
        report["index_state"] = f"needs a rebuild: {problem} (`mneme serve` rebuilds it, or `mneme reindex`)"
    tables = _table_counts(settings.sqlite_path) if isinstance(settings.store, SqliteStore) else {}
    limit = 10_000
    backlog = store.list_unindexed(limit + 1)
    dirty = store.list_dirty(None, limit + 1)
    tenants = sorted(set(tables) | {tenant for tenant, _ in dirty} | {ctx.config.tenant})
    report["index_backlog"] = {"episodes": min(len(backlog), limit), "capped": len(backlog) > limit}
    report["tenants"] = {}
    for tenant in tenants:
        memories = store.list_memories(tenant, archived=True)
        keys = store.list_api_keys(tenant)
        by_status = {s: sum(1 for m in memories if m.status == s) for s in ("published", "pending", "archived")}
        dirty_paths = []
        for t, scope_id in dirty:
            if t == tenant:
                try:
                    dirty_paths.append(services.scopes.chain_of(tenant, scope_id).path)
                except Exception:  # a scope deleted since: show its id
                    dirty_paths.append(scope_id)
        counted = tables.get(tenant, {})
        report["tenants"][tenant] = {
            "scopes": counted.get("scopes"),
            "episodes": counted.get("episodes"),
            "facts": counted.get("facts"),
            "memories": by_status,
            "keys": {
                "active": sum(1 for k in keys if not k.revoked_at),
                "revoked": sum(1 for k in keys if k.revoked_at),
            },
            "index_documents": services.index.count(tenant),
            "dirty_scopes": sorted(dirty_paths),
            "unindexed_episodes": sum(1 for e in backlog if e.tenant == tenant),
        }
    return report


def cmd_status(ctx: Context) -> int:
    if ctx.config.remote:
        client = ctx.client(need_key=False)
        started = time.monotonic()
        health = client.health().model_dump()
        report = {
            "mode": "remote",
            "url": ctx.config.url,
            **health,
            "latency_ms": round(1000 * (time.monotonic() - started)),
        }
        if ctx.args.json:
            emit_json(report)
        else:
            version, latency = health.get("version"), report["latency_ms"]
            print(f"remote {ctx.config.url}: {health.get('status')} (version {version}, {latency} ms)")
            print("store details are shown by `mneme status` where the store is (embedded mode)")
        return 0
    report = status_report(ctx)
    if ctx.args.json:
        emit_json(report)
        return 0
    print(f"store     {report['home']} ({report['store']} records, {report['index']} index)")
    for name, size in (report.get("files") or {}).items():
        print(f"  {name:<8}{size}")
    print(f"embedder  {report['embedder']}; reasoner {report['reasoner']}")
    backlog = report["index_backlog"]
    count = f"{backlog['episodes']:,}" + ("+" if backlog["capped"] else "")
    hint = " (run `mneme reindex --pending`)" if backlog["episodes"] else ""
    print(f"index backlog  {count} episode(s) waiting for the search index{hint}")
    print(f"index state    {report['index_state']}")
    for tenant, t in report["tenants"].items():
        m = t["memories"]

        def n(value: int | None) -> str:
            return "?" if value is None else f"{value:,}"

        print(f"\ntenant {tenant}")
        print(f"  scopes {n(t['scopes'])}, episodes {n(t['episodes'])}, facts {n(t['facts'])}")
        print(f"  memories {m['published']} published, {m['pending']} pending, {m['archived']} archived")
        keys = t["keys"]
        print(f"  keys {keys['active']} active, {keys['revoked']} revoked; index documents {t['index_documents']:,}")
        dirty = t["dirty_scopes"]
        if dirty:
            shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
            print(f"  dirty scopes {len(dirty)} ({shown}): new episodes wait for `mneme consolidate`")
        else:
            print("  dirty scopes 0")
    return 0


def cmd_config(ctx: Context) -> int:
    config = ctx.config
    shown: dict[str, Any] = {}
    for key in KEYS:
        value, source = (
            (config.values[key], config.sources[key]) if key in config.values else (DEFAULTS[key], "default")
        )
        if key == "api_key" and value:
            value = str(value)[:8] + "…"
        shown[key] = {"value": value, "source": source}
    if ctx.args.json:
        emit_json({"file": str(config.file) if config.file else None, "mode": _mode(ctx), "settings": shown})
        return 0
    print(f"mode: {_mode(ctx)}")
    print(f"config file: {config.file or 'none'}")
    for key, item in shown.items():
        print(f"  {key} = {item['value']!r}  ({item['source']})")
    return 0


def _mode(ctx: Context) -> str:
    return f"remote {ctx.config.url}" if ctx.config.remote else f"embedded (tenant {ctx.config.tenant})"


def cmd_openapi(ctx: Context) -> int:
    from mneme.http.openapi import render

    text = render()
    if ctx.args.output:
        Path(ctx.args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def register_maintenance(sub: Any, common: argparse.ArgumentParser) -> None:
    consolidate = command(
        sub,
        "consolidate",
        cmd_consolidate,
        common,
        help="turn new episodes into facts now, with progress and the run summary",
        examples="""
mneme consolidate                          # embedded: runs here, batch by batch (Ctrl-C is safe)
mneme consolidate --scope root.acme        # only that subtree
mneme --url "$MNEME_URL" consolidate       # remote: starts a run and follows it
mneme --url "$MNEME_URL" consolidate --no-wait --json
""",
    )
    consolidate.add_argument("--scope", action="append", help="limit to this subtree (repeatable)")
    consolidate.add_argument("--no-wait", action="store_true", help="remote: print the run id and return")
    consolidate.add_argument("--wait-timeout", type=float, default=3600.0, help="remote: seconds to follow the run")
    consolidate.add_argument("--json", action="store_true", help="the run record as JSON")

    reindex = command(
        sub,
        "reindex",
        cmd_reindex,
        common,
        help="rebuild the search index from records, or repair failed index writes (embedded)",
        examples="mneme reindex --tenant default\nmneme reindex --pending",
    )
    reindex.add_argument("--pending", action="store_true", help="only retry episodes whose index write failed")

    status = command(
        sub,
        "status",
        cmd_status,
        common,
        help="show the store: location, counts, index backlog and dirty scopes",
        examples="mneme status\nmneme status --json\nmneme --url https://mneme.example.com status",
    )
    status.add_argument("--json", action="store_true")

    config = command(
        sub,
        "config",
        cmd_config,
        common,
        help="show the effective settings and where each one comes from",
        examples="""
mneme config
MNEME_CONFIG=./mneme.toml mneme config --json

# ~/.config/mneme/config.toml
url = "https://mneme.example.com"
api_key_file = "~/.mneme/prod.key"
timeout = 20
""",
    )
    config.add_argument("--json", action="store_true")

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
        help="import an export into a tenant; a second import changes nothing (embedded)",
        examples="""
mneme import acme.jsonl --tenant acme-copy
mneme --home /srv/mneme import - < acme.jsonl
""",
    )
    imp.add_argument("file", help="an export file ('-': stdin)")
    imp.add_argument("--json", action="store_true", help="the counts as JSON")

    openapi = command(
        sub,
        "openapi",
        cmd_openapi,
        common,
        help="print the OpenAPI document generated from the resolvers",
        examples="mneme openapi --output docs/openapi.json",
    )
    openapi.add_argument("--output", help="write to this file instead of stdout")
