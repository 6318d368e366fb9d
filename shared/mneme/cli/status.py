"""`mneme status` and `mneme reindex`: what the store holds, and rebuilding or repairing its search index."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mneme.cli.command import Context, command
from mneme.cli.output import emit_json, err, quiet_runtime

if TYPE_CHECKING:
    from mneme.bootstrap import Services
    from mneme.models import Episode


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

    ctx.embedded_only("reindex")
    quiet_runtime()
    indexer = ctx.services.indexer
    tenant = ctx.config.tenant
    try:
        if ctx.args.pending:
            done = indexer.sweep(progress=_progress("indexing pending", ctx.quiet))
            left = len(ctx.services.store.list_unindexed(1))
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


def _size(path: Path) -> str:
    if not path.exists():
        return "absent"
    size = float(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")))  # with -wal/-shm
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return ""


def _backed_up(last: dict[str, Any] | None) -> str:
    """The home's last backup, for a person: when (and how long ago), where, how big."""
    if last is None:
        return "none on record (`mneme backup DEST` copies the home, also while it serves)"
    try:
        at = datetime.strptime(str(last["at"]), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return f"{last['at']} to {last.get('dest')}"
    hours = (datetime.now(UTC) - at).total_seconds() / 3600
    ago = f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"
    size = f"{int(last.get('bytes', 0)) / 1e6:,.1f} MB"
    return f"last {at:%Y-%m-%d %H:%M} UTC ({ago} ago) to {last.get('dest')} ({size})"


def status_report(ctx: Context) -> dict[str, Any]:
    """What the embedded store holds: where it is, counts per tenant, index backlog, dirty scopes."""
    from mneme import bootstrap
    from mneme.cli.server import check_home
    from mneme.local.checks import rebuilding
    from mneme.ports import RowCounts
    from mneme.settings import SqliteIndex, SqliteStore

    quiet_runtime()
    settings = bootstrap.current_settings()
    problem = check_home()  # a damaged or foreign store stops here, with one line
    services = ctx.services
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
        from mneme.local.backup import last_backup

        report["files"] = {"records": _size(settings.sqlite_path)}
        if isinstance(settings.index, SqliteIndex):
            report["files"]["index"] = _size(settings.index_path)
        report["last_backup"] = last_backup(settings.home)
    if problem is None:
        report["index_state"] = "ok"
    elif rebuilding(settings.index_path):
        report["index_state"] = f"rebuilding: {problem} (recall reads records meanwhile)"
    else:
        report["index_state"] = f"needs a rebuild: {problem} (`mneme serve` rebuilds it, or `mneme reindex`)"
    tables = store.row_counts() if isinstance(store, RowCounts) else {}
    limit = 10_000
    backlog = store.list_unindexed(limit + 1)
    dirty = store.list_dirty(None, limit + 1)
    tenants = sorted(set(tables) | {tenant for tenant, _ in dirty} | {ctx.config.tenant})
    report["index_backlog"] = {"episodes": min(len(backlog), limit), "capped": len(backlog) > limit}
    report["tenants"] = {tenant: _tenant_report(services, tenant, tables, dirty, backlog) for tenant in tenants}
    return report


def _tenant_report(
    services: Services,
    tenant: str,
    tables: dict[str, dict[str, int]],
    dirty: list[tuple[str, str]],
    backlog: list[Episode],
) -> dict[str, Any]:
    """One tenant's counts: records, memories by status, keys, index documents, dirty scopes, backlog."""
    store = services.store
    memories = store.list_memories(tenant, archived=True)
    keys = store.list_api_keys(tenant)
    dirty_paths = []
    for t, scope_id in dirty:
        if t == tenant:
            try:
                dirty_paths.append(services.scopes.chain_of(tenant, scope_id).path)
            except Exception:  # a scope deleted since: show its id
                dirty_paths.append(scope_id)
    counted = tables.get(tenant, {})
    return {
        "scopes": counted.get("scopes"),
        "episodes": counted.get("episodes"),
        "facts": counted.get("facts"),
        "memories": {s: sum(1 for m in memories if m.status == s) for s in ("published", "pending", "archived")},
        "keys": {"active": sum(1 for k in keys if not k.revoked_at), "revoked": sum(1 for k in keys if k.revoked_at)},
        "index_documents": services.index.count(tenant),
        "dirty_scopes": sorted(dirty_paths),
        "unindexed_episodes": sum(1 for e in backlog if e.tenant == tenant),
    }


def cmd_status(ctx: Context) -> int:
    if ctx.config.remote:
        client = ctx.client(need_key=False)
        started = time.monotonic()
        health = client.health().model_dump(exclude_none=True)
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
            for part in ("index", "store", "cursor_key"):
                if part in health:
                    print(f"  {part}: {health[part]}")
            print("store details are shown by `mneme status` where the store is (embedded mode)")
        return 0
    report = status_report(ctx)
    if ctx.args.json:
        emit_json(report)
        return 0
    print(f"store     {report['home']} ({report['store']} records, {report['index']} index)")
    for name, size in (report.get("files") or {}).items():
        print(f"  {name:<8}{size}")
    if "last_backup" in report:
        print(f"backup    {_backed_up(report['last_backup'])}")
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


def register(sub: Any, common: argparse.ArgumentParser) -> None:
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
