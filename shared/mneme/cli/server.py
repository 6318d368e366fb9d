"""Serving commands: `serve` (the local HTTP API) and `mcp` (the MCP server), and the first-run admin key."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mneme.cli.command import Context, command
from mneme.cli.config import DEFAULT_TENANT
from mneme.errors import MnemeError

if TYPE_CHECKING:
    from mneme.bootstrap import Services
    from mneme.local.home import ServerLock
    from mneme.local.server import LocalServer
    from mneme.local.workers import Workers
    from mneme.settings import Settings


def ensure_first_run(services: Services | None = None) -> tuple[Path, bool]:
    """Create the store and, once, an admin key for the default tenant, with `services` (default: the
    process's, `bootstrap.current`). Returns (key file, created)."""
    from mneme import bootstrap
    from mneme.adapters.keyfiles import ADMIN_KEY_MINIMUM, create_once, read_key

    services = services or bootstrap.current()
    key_file = services.settings.home / "admin.key"
    if key_file.exists():
        read_key(key_file, minimum=ADMIN_KEY_MINIMUM)  # an empty or cut key stops here, not as a 401 later
        return key_file, False
    secret, _ = services.keys.create(DEFAULT_TENANT, "local-admin", ["admin"])
    created = create_once(key_file, secret + "\n")
    services.scopes.root(DEFAULT_TENANT)
    return key_file, created


def check_home(settings: Settings) -> str | None:
    """The embedded store's start-up check (`local.checks`): raises on a store that must not be opened;
    returns why the index must be rebuilt, or None."""
    from mneme.local import checks
    from mneme.settings import SqliteIndex, SqliteStore

    if not isinstance(settings.store, SqliteStore):
        return None
    checks.check_store(settings.sqlite_path, settings.home)
    if not isinstance(settings.index, SqliteIndex):
        return None
    return checks.index_problem(settings.index_path, settings.sqlite_path)


def rebuild_index(reason: str, services: Services) -> threading.Thread:
    """Rebuild every tenant's index from records in the background, with `services`' indexer; recall reads
    records meanwhile."""
    from mneme.local import checks

    settings, indexer = services.settings, services.indexer

    def rebuild() -> None:
        for tenant in checks.tenants(settings.sqlite_path):
            indexer.rebuild(tenant)

    return checks.start_rebuild(settings.index_path, reason, rebuild)


# -- serve and mcp -----------------------------------------------------------------------------------


def cmd_serve(ctx: Context) -> int:
    from mneme.local.home import hold_server
    from mneme.local.workers import worker_count

    ctx.embedded_only("serve")
    args, services = ctx.args, ctx.services
    if args.listen_fd is not None:  # one of the processes `serve --workers N` started
        return _serve_worker(args.host, args.port, args.listen_fd, services)
    count = worker_count(args.workers)
    home = services.settings.home.resolve()
    lock = hold_server(home, "mneme serve, starting")  # a second server on this home stops here, with one line
    try:
        return _serve(args, count, home, lock, services)
    finally:
        lock.release()  # when it could not start (serving ends the process in `_shut_down`)


def _serve(args: argparse.Namespace, count: int, home: Path, lock: ServerLock, services: Services) -> int:
    from mneme import bootstrap
    from mneme.local.server import make_server, start_sweeper
    from mneme.local.workers import Workers

    reindex = check_home(services.settings)  # a damaged or foreign store stops here, with one line
    if reindex is not None:
        print(f"the search index is rebuilt in the background: {reindex}", file=sys.stderr)
        rebuild_index(reindex, services)  # before any process opens the index
    key_file, created = ensure_first_run(services)
    try:
        server = make_server(args.host, args.port, services=lambda: services)
    except OSError as e:  # the port is taken, or the address is not this machine's
        raise MnemeError(
            f"cannot listen on {args.host}:{args.port}: {e.strerror or e} (choose another port with --port N; "
            "with make: make serve PORT=N)",
            code="address_unavailable",
        ) from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    lock.describe(f"mneme serve on http://{host}:{port}")
    workers = None
    if count > 1:
        bootstrap.cursor_secret(services.settings)()  # created once here, not raced by the workers
        server.share()
        argv = ["serve", "--home", str(home), "--host", host, "--port", str(port)]
        workers = Workers(server.socket.fileno(), argv, count - 1, keep=(lock.fd,))
    for sig in (signal.SIGTERM, signal.SIGINT):  # `kill PID` stops the server (and its workers) like Ctrl-C
        signal.signal(sig, _stopper(server, services))
    start_sweeper(services.indexer, interval=30.0)
    try:
        pids = [os.getpid()]
        if workers is not None:
            workers.start()
            pids += workers.pids()
        _warm(server)
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
        _shut_down(server, workers, services)
    return 0


DRAIN = 3.0  # seconds a stopping process waits for its request threads once their connections are closed


def _stopper(server: LocalServer, services: Services) -> Callable[..., None]:
    """What SIGTERM or Ctrl-C does (safe in a signal handler): the server stops taking connections and
    finishes the requests it holds; the local model refuses the batches not yet started, so they end in
    moments (a remember in flight is stored, its embedding left to the index sweep)."""

    def stop(*_: Any) -> None:
        server.stop()
        services.interrupt()

    return stop


def _shut_down(server: LocalServer, workers: Workers | None, services: Services) -> NoReturn:
    """A clean stop's end: the request threads finish (up to DRAIN seconds), the workers stop, then every
    store and index connection closes, so at rest `mneme.db` and `index.db` alone hold everything; then the
    process ends. A request still running past DRAIN is left unanswered (nothing acknowledged is lost)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM does not cut the shutdown short
    _stopper(server, services)()
    drained = server.server_close(wait=DRAIN)
    if workers is not None:
        workers.stop()
    services.close()
    if not drained:
        print(f"mneme serve: requests still running {DRAIN:.0f} s after the stop were left", file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything this process holds is closed above (the server lock goes with the process). Skipped: the
    # interpreter's teardown (~1 s of CPU freeing the model and the module graph, measured) and the wait
    # for request threads still running.
    os._exit(0)


def _serve_worker(host: str, port: int, fd: int, services: Services) -> NoReturn:
    """A worker process: serve the inherited socket until SIGTERM (from the parent) or the parent is gone.
    Ctrl-C in a terminal reaches the whole process group: the parent alone acts on it, and stops us."""
    from mneme.local.server import make_server, stop_when_orphaned

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)  # until it serves: then the server finishes what it holds
    server = make_server(host, port, listen_fd=fd, services=lambda: services)
    stop_when_orphaned(_stopper(server, services), os.getppid())
    try:
        _warm(server)
        signal.signal(signal.SIGTERM, _stopper(server, services))
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        _shut_down(server, None, services)


def _warm(server: LocalServer) -> None:
    """Before a process takes connections: build its engine (once: concurrent first requests would each
    build one), build every route's function and load a local embedding model, so that no request of
    a fresh process waits for them (a remote embedder is left alone)."""
    from mneme.http import routes
    from mneme.settings import BedrockEmbedderSettings

    gateway = server.app.gateway
    services = gateway.services()
    services.build_all()
    for route in routes.ROUTES:
        gateway.function(route.function)
    if not isinstance(services.settings.embedder, BedrockEmbedderSettings):
        try:
            services.embedder.embed(["warm up"])
        except Exception as exc:  # serve anyway: requests that need the model answer with the error
            print(f"warning: the embedding model did not load: {exc}", file=sys.stderr)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def cmd_mcp(ctx: Context) -> int:
    try:
        from mneme.mcp import server as mcp_server
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
