"""The `mneme` command line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mneme import bootstrap
from mneme.consolidation.stages import Batch
from mneme.errors import MnemeError

DEFAULT_TENANT = "default"


def _admin_key_file() -> Path:
    return bootstrap.current_settings().home / "admin.key"


def ensure_first_run() -> tuple[Path, bool]:
    """Create the store and, once, an admin key for the default tenant. Returns (key file, created)."""
    key_file = _admin_key_file()
    services = bootstrap.current()
    if key_file.exists():
        return key_file, False
    secret, _ = services.keys.create(DEFAULT_TENANT, "local-admin", ["admin"])
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key_file.write_text(secret + "\n")
    key_file.chmod(0o600)
    services.scopes.root(DEFAULT_TENANT)
    return key_file, True


def cmd_serve(args: argparse.Namespace) -> int:
    from mneme.local.server import make_server, start_sweeper

    key_file, created = ensure_first_run()
    server = make_server(args.host, args.port)
    start_sweeper(bootstrap.current().indexer, interval=30.0)
    host, port = server.server_address[:2]
    print(f"mneme serving on http://{host}:{port} (store: {bootstrap.current_settings().home.resolve()})")
    print(
        f"{'created' if created else 'admin'} API key for tenant {DEFAULT_TENANT!r}: {key_file} "
        "(use: export MNEME_API_KEY=$(cat " + str(key_file) + "))",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nshutting down", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def _progress(label: str) -> Callable[[int], None]:
    start = time.monotonic()

    def report(done: int) -> None:
        rate = done / max(time.monotonic() - start, 1e-6)
        print(f"\r{label}: {done} documents ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)

    return report


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild a tenant's index from records, or retry episodes whose index write failed."""
    indexer = bootstrap.current().indexer
    try:
        if args.pending:
            done = indexer.sweep(progress=_progress("indexing pending"))
            left = len(bootstrap.current().store.list_unindexed(1))
            print(f"\nindexed {done} pending episodes" + (" (the index still fails; retry later)" if left else ""))
            return 1 if left else 0
        done = indexer.rebuild(args.tenant, progress=_progress(f"rebuilding {args.tenant}"))
        print(f"\nrebuilt {done} documents for tenant {args.tenant!r}")
    except KeyboardInterrupt:
        print("\ninterrupted: records are untouched; run the same command again to finish", file=sys.stderr)
        return 130
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Run consolidation in this process, batch by batch, with a progress line per stage."""
    from mneme.consolidation.models import Run
    from mneme.models import Principal, Role

    services = bootstrap.current()
    caller = Principal(tenant=args.tenant, principal="cli", roles=frozenset({Role.admin}))
    service = services.consolidation
    targets = service.targets(args.tenant, args.scope or None)
    run = Run(
        tenant=args.tenant,
        run_id=f"run_cli_{int(time.time())}",
        started_at=services.clock.now(),
        requested_by=caller.principal,
        scopes=[services.scopes.chain_of(args.tenant, t).path for t in targets],
    )
    services.store.put_run(run)
    print(f"consolidating {len(targets)} scope(s) with the {service.deps.reasoner.name} reasoner", file=sys.stderr)
    start, read = time.monotonic(), 0

    def progress(stage: str, batch: Batch) -> None:
        nonlocal read
        if stage == "collect":
            read += len(batch.episode_ids)
        rate = read / max(time.monotonic() - start, 1e-6) * 60
        path = services.scopes.chain_of(args.tenant, batch.scope_id).path
        print(f"\r{path}: {stage:<10} {read} episodes ({rate:,.0f}/min)", end="", file=sys.stderr, flush=True)

    try:
        run = service.execute(run, targets, progress=progress)
    except KeyboardInterrupt:
        print(
            "\ninterrupted: the unfinished batch is replayed next time (its checkpoint did not move)", file=sys.stderr
        )
        return 130
    print(file=sys.stderr)
    for stage, report in run.stages.items():
        counters = ", ".join(f"{name} {value}" for name, value in report.counters.items())
        print(f"  {stage:<10} {counters}")
    for error in run.errors:
        print(f"  error in {error['stage']}: {error['message']}")
    print(f"run {run.run_id}: {run.status}")
    return 0 if run.status == "succeeded" else 1


def cmd_openapi(args: argparse.Namespace) -> int:
    from mneme.http.openapi import render

    text = render()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    keys = bootstrap.current().keys
    if args.action == "create":
        secret, record = keys.create(args.tenant, args.principal, args.roles.split(","))
        print(
            f"key_id {record.key_id} tenant {record.tenant} principal {record.principal} "
            f"roles {','.join(record.roles)}",
            file=sys.stderr,
        )
        print(secret)
        print("store this key now: it is not shown again", file=sys.stderr)
    elif args.action == "list":
        for key in keys.list(args.tenant):
            state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "active"
            print(f"{key.key_id}  {key.principal:<24} {','.join(key.roles):<28} {state}")
    else:
        keys.revoke(args.tenant, args.key_id)
        print(f"revoked {args.key_id}")
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="mneme", description="Long-term memory for AI agents.")
    root.add_argument("--home", help="local data folder (env MNEME_HOME, default ./.mneme)")
    sub = root.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the local API server on the embedded engine",
        epilog="example: mneme serve --port 8080",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(func=cmd_serve)

    keys = sub.add_parser(
        "keys",
        help="create, list and revoke API keys",
        epilog="example: mneme keys create --tenant acme --principal bot --roles reader,writer",
    )
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", default=DEFAULT_TENANT)
    create.add_argument("--principal", required=True)
    create.add_argument("--roles", required=True, help="comma-separated: reader,writer,approver,admin")
    listing = keys_sub.add_parser("list", help="list a tenant's keys (never the secrets)")
    listing.add_argument("--tenant", default=DEFAULT_TENANT)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("--tenant", default=DEFAULT_TENANT)
    revoke.add_argument("key_id")
    keys.set_defaults(func=cmd_keys)

    reindex = sub.add_parser(
        "reindex",
        help="rebuild the search index from records, or repair failed writes",
        epilog="examples: mneme reindex --tenant default | mneme reindex --pending",
    )
    reindex.add_argument("--tenant", default=DEFAULT_TENANT)
    reindex.add_argument("--pending", action="store_true", help="only retry episodes whose index write failed")
    reindex.set_defaults(func=cmd_reindex)

    consolidate = sub.add_parser(
        "consolidate",
        help="turn new episodes into facts now, with progress",
        epilog="examples: mneme consolidate | mneme consolidate --scope root.acme",
    )
    consolidate.add_argument("--tenant", default=DEFAULT_TENANT)
    consolidate.add_argument("--scope", action="append", help="limit to this subtree (repeatable)")
    consolidate.set_defaults(func=cmd_consolidate)

    openapi = sub.add_parser(
        "openapi",
        help="print the OpenAPI document generated from the resolvers",
        epilog="example: mneme openapi --output docs/openapi.json",
    )
    openapi.add_argument("--output", help="write to this file instead of stdout")
    openapi.set_defaults(func=cmd_openapi)
    return root


def main(argv: list[str] | None = None) -> int:
    from mneme.local.server import LOCAL_ENV

    for name, value in LOCAL_ENV.items():
        os.environ.setdefault(name, value)
    args = parser().parse_args(argv)
    if args.home:
        os.environ["MNEME_HOME"] = args.home
        bootstrap.reset()
    try:
        return int(args.func(args))
    except MnemeError as e:
        print(f"error: {e.code}: {e.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
