"""Serving commands: `serve` (the local HTTP API) and `mcp` (the MCP server), and the first-run admin key."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mneme.cli.app import Context, command
from mneme.cli.config import DEFAULT_TENANT
from mneme.errors import MnemeError

if TYPE_CHECKING:
    pass


def _admin_key_file() -> Path:
    from mneme import bootstrap

    return bootstrap.current_settings().home / "admin.key"


def ensure_first_run() -> tuple[Path, bool]:
    """Create the store and, once, an admin key for the default tenant. Returns (key file, created)."""
    from mneme import bootstrap

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


# -- serve and mcp -----------------------------------------------------------------------------------


def cmd_serve(ctx: Context) -> int:
    from mneme import bootstrap
    from mneme.local.server import make_server, spawn_workers, start_sweeper, stop_when_orphaned

    ctx.embedded_only("serve")
    args = ctx.args
    if args.listen_fd is not None:  # one of the processes `serve --workers N` started
        server = make_server(args.host, args.port, listen_fd=args.listen_fd)
        stop_when_orphaned(server, os.getppid())
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    if args.workers < 1:
        raise MnemeError("--workers must be at least 1", code="invalid_input")
    key_file, created = ensure_first_run()
    try:
        server = make_server(args.host, args.port)
    except OSError as e:  # the port is taken, or the address is not this machine's
        raise MnemeError(
            f"cannot listen on {args.host}:{args.port}: {e.strerror or e}", code="address_unavailable"
        ) from None
    children = []
    if args.workers > 1:
        bootstrap.cursor_secret(bootstrap.current_settings())()  # created once here, not raced by the workers
        children = spawn_workers(server, args.workers - 1, _worker_argv())
    start_sweeper(bootstrap.current().indexer, interval=30.0)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    processes = f", {args.workers} processes" if args.workers > 1 else ""
    print(f"mneme serving on http://{host}:{port} (store: {bootstrap.current_settings().home.resolve()}{processes})")
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
        for child in children:
            child.terminate()
        for child in children:
            child.wait(timeout=10)
    return 0


def _worker_argv() -> list[str]:
    """This command line's arguments (`mneme serve ...` or `python -m mneme.cli serve ...`), for a worker."""
    return sys.argv[1:]


def cmd_mcp(ctx: Context) -> int:
    try:
        from mneme import mcp_server
    except ImportError as e:
        message = f"`mneme mcp` needs the MCP SDK: pip install 'mneme[mcp]' ({e})"
        raise MnemeError(message, code="missing_dependency") from None

    scope = ctx.args.scope or ctx.config.get("scope") or "root"
    if ctx.config.remote:
        client = ctx.client()
        mode = f"remote {ctx.config.url}"
    else:
        client = ctx.client(principal=mcp_server.DEFAULT_PRINCIPAL, roles=mcp_server.DEFAULT_ROLES)
        caller = ctx.principal(principal=mcp_server.DEFAULT_PRINCIPAL, roles=mcp_server.DEFAULT_ROLES)
        mode = f"embedded {caller.tenant}/{caller.principal} ({','.join(sorted(caller.roles))})"
    return mcp_server.run(client, scope=scope, mode=mode)


def register_server(sub: Any, common: argparse.ArgumentParser) -> None:
    serve = command(
        sub,
        "serve",
        cmd_serve,
        common,
        help="run the local API server on the embedded engine",
        examples="mneme serve\nmneme serve --port 9000 --home /var/lib/mneme",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes serving the port (default 1; 2 or more use more than one core: each process has its own"
        " engine over the same SQLite files)",
    )
    serve.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)  # set for worker processes

    mcp = command(
        sub,
        "mcp",
        cmd_mcp,
        common,
        help="run the MCP server on stdio (for Claude Code, Claude Desktop, Cursor…)",
        examples="""
mneme mcp                                      # embedded: tenant 'default', principal mcp-agent, role writer
MNEME_SCOPE=root.acme mneme mcp                # the agent's working scope
mneme mcp --url https://mneme.example.com --api-key "$KEY"   # remote
MNEME_PRINCIPAL=claude MNEME_ROLES=writer mneme mcp
""",
    )
    mcp.add_argument(
        "--scope", help="the agent's working scope: the default of the tools' scope (env MNEME_SCOPE, default root)"
    )
