"""Serving commands: `serve` (the local HTTP API) and `mcp` (the MCP server), and the first-run admin key."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from mneme.cli.app import Context, command
from mneme.cli.config import DEFAULT_TENANT
from mneme.errors import MnemeError

ADMIN_KEY_MINIMUM = 32  # characters: a key Mneme creates is 47 (`keys.KEY_PREFIX` + 43)


def _admin_key_file() -> Path:
    from mneme import bootstrap

    return bootstrap.current_settings().home / "admin.key"


def ensure_first_run() -> tuple[Path, bool]:
    """Create the store and, once, an admin key for the default tenant. Returns (key file, created)."""
    from mneme import bootstrap
    from mneme.local.keyfiles import create_once, read_key

    key_file = _admin_key_file()
    services = bootstrap.current()
    if key_file.exists():
        read_key(key_file, minimum=ADMIN_KEY_MINIMUM)  # an empty or cut key stops here, not as a 401 later
        return key_file, False
    secret, _ = services.keys.create(DEFAULT_TENANT, "local-admin", ["admin"])
    created = create_once(key_file, secret + "\n")
    services.scopes.root(DEFAULT_TENANT)
    return key_file, created


def check_home() -> str | None:
    """The embedded store's start-up check (`local.checks`): raises on a store that must not be opened;
    returns why the index must be rebuilt, or None."""
    from mneme import bootstrap
    from mneme.local import checks
    from mneme.settings import SqliteIndex, SqliteStore

    settings = bootstrap.current_settings()
    if not isinstance(settings.store, SqliteStore):
        return None
    checks.check_store(settings.sqlite_path, settings.home)
    if not isinstance(settings.index, SqliteIndex):
        return None
    return checks.index_problem(settings.index_path, settings.sqlite_path)


def rebuild_index(reason: str) -> None:
    """Rebuild every tenant's index from records in the background; recall reads records meanwhile."""
    from mneme import bootstrap
    from mneme.local import checks

    settings = bootstrap.current_settings()
    indexer = bootstrap.current().indexer
    print(f"the search index is rebuilt in the background: {reason}", file=sys.stderr)

    def rebuild() -> None:
        for tenant in checks.tenants(settings.sqlite_path):
            indexer.rebuild(tenant)

    checks.start_rebuild(settings.index_path, reason, rebuild)


# -- serve and mcp -----------------------------------------------------------------------------------


def cmd_serve(ctx: Context) -> int:
    from mneme import bootstrap
    from mneme.local.server import make_server, start_sweeper
    from mneme.local.workers import Workers, worker_count

    ctx.embedded_only("serve")
    args = ctx.args
    if args.listen_fd is not None:  # one of the processes `serve --workers N` started
        return _serve_worker(args.host, args.port, args.listen_fd)
    count = worker_count(args.workers)
    reindex = check_home()  # a damaged or foreign store stops here, with one line
    if reindex is not None:
        rebuild_index(reindex)  # before any process opens the index
    key_file, created = ensure_first_run()
    try:
        server = make_server(args.host, args.port)
    except OSError as e:  # the port is taken, or the address is not this machine's
        raise MnemeError(
            f"cannot listen on {args.host}:{args.port}: {e.strerror or e} (choose another port with --port N; "
            "with make: make serve PORT=N)",
            code="address_unavailable",
        ) from None
    home = bootstrap.current_settings().home.resolve()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    workers = None
    if count > 1:
        bootstrap.cursor_secret(bootstrap.current_settings())()  # created once here, not raced by the workers
        server.share()
        argv = ["serve", "--home", str(home), "--host", host, "--port", str(port)]
        workers = Workers(server.socket.fileno(), argv, count - 1)
    for sig in (signal.SIGTERM, signal.SIGINT):  # `kill PID` stops the server (and its workers) like Ctrl-C
        signal.signal(sig, lambda *_: server.stop())
    start_sweeper(bootstrap.current().indexer, interval=30.0)
    try:
        pids = [os.getpid()]
        if workers is not None:
            workers.start()
            pids += workers.pids()
        _warm()
        processes = f"{count} process{'es' if count > 1 else ''} (pid {', '.join(map(str, pids))})"
        print(f"mneme serving on http://{host}:{port} (store: {home}; {processes}; see --workers)")
        print(
            f"{'created' if created else 'admin'} API key for tenant {DEFAULT_TENANT!r}: {key_file} "
            "(use: export MNEME_API_KEY=$(cat " + str(key_file) + "))",
            flush=True,
        )
        server.serve_forever()
        print("\nshutting down", file=sys.stderr)
    except KeyboardInterrupt:
        print("\nshutting down", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM does not cut the shutdown short
        server.server_close()
        if workers is not None:
            workers.stop()
    return 0


def _serve_worker(host: str, port: int, fd: int) -> int:
    """A worker process: serve the inherited socket until SIGTERM (from the parent) or the parent is gone.
    Ctrl-C in a terminal reaches the whole process group: the parent alone acts on it, and stops us."""
    from mneme.local.server import make_server, stop_when_orphaned

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)  # until it serves: then the server finishes what it holds
    server = make_server(host, port, listen_fd=fd)
    stop_when_orphaned(server, os.getppid())
    try:
        _warm()
        signal.signal(signal.SIGTERM, lambda *_: server.stop())
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()  # requests in progress finish before the interpreter exits
    return 0


def _warm() -> None:
    """Before a process takes connections: build its engine (once: concurrent first requests would each
    build one), import every route's function and load a local embedding model, so that no request of
    a fresh process waits for them (a remote embedder is left alone)."""
    from mneme import bootstrap, routes
    from mneme.local import gateway
    from mneme.settings import BedrockEmbedderSettings

    services = bootstrap.current()
    services.build_all()
    for route in routes.ROUTES:
        gateway.function(route.function)
    if not isinstance(bootstrap.current_settings().embedder, BedrockEmbedderSettings):
        try:
            services.embedder.embed(["warm up"])
        except Exception as exc:  # serve anyway: requests that need the model answer with the error
            print(f"warning: the embedding model did not load: {exc}", file=sys.stderr)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


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
        examples="mneme serve\nmneme serve --port 9000 --home /var/lib/mneme\nmneme serve --workers 1",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers",
        default="auto",
        metavar="N|auto",
        help="processes serving the port (default auto: one per usable CPU, at most 4; each has its own engine,"
        " ~400 MB with the embedding model, over the same SQLite files; 1 for a single process)",
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
