"""The parser (every command module registers its commands on it) and `main`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from mneme.cli.command import Context, Formatter, common_options
from mneme.cli.config import Config, load
from mneme.errors import MnemeError
from mneme_sdk.errors import MnemeError as ApiError

DESCRIPTION = """\
Long-term memory for AI agents.

Every command works on the local store in this folder (embedded mode: ./.mneme, or --home) or,
when --url / MNEME_URL is set, on a Mneme API (remote mode, with --api-key / MNEME_API_KEY).
Settings come from flags, then environment variables, then ~/.config/mneme/config.toml
(or $MNEME_CONFIG): see `mneme config --help`."""

EPILOG = """\
examples:
  mneme serve                                   # the local API on http://127.0.0.1:8080
  mneme remember "Acme's year end is 31 March." --scope root.acme --create-scope
  mneme recall "when is Acme's year end?" --scope root.acme
  mneme retrieve root.acme.vat
  mneme --url https://mneme.example.com --api-key "$KEY" recall "VAT scheme"
  mneme mcp                                     # the MCP server on stdio, for agents

`mneme COMMAND --help` shows each command's options and examples."""


def parser() -> argparse.ArgumentParser:
    from mneme.cli import curate, maintenance, memory, records, server

    common = common_options()
    root = argparse.ArgumentParser(
        prog="mneme", description=DESCRIPTION, epilog=EPILOG, parents=[common], formatter_class=Formatter
    )
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    server.register_server(sub, common)
    memory.register(sub, common)
    curate.register(sub, common)
    records.register(sub, common)
    maintenance.register_maintenance(sub, common)
    return root


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, key, None) for key in ("url", "api_key", "home", "tenant", "timeout")}


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 finished with problems, 2 error, 130 interrupted)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed by argparse
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    terminate = _interrupt_on_sigterm()
    try:
        config = load(_flags(args), path=getattr(args, "config", None))
        _apply_home(config)
        return int(args.func(Context(args, config)))
    except (MnemeError, ApiError) as e:
        print(f"error: {e.code}: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `mneme … | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        _close_store()
        if terminate is not None:
            signal.signal(signal.SIGTERM, terminate)


def _interrupt_on_sigterm() -> Any:
    """SIGTERM (an agent host ending `mneme mcp`, a service manager) stops a command as Ctrl-C does, so that
    it ends through `main` and closes the store. Returns the handler it replaced (None: left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None  # someone (a test runner, an embedding program) handles it already

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _close_store() -> None:
    """Close the embedded store and index if this command opened them: at rest `mneme.db` holds everything."""
    if "mneme.bootstrap" not in sys.modules:
        return
    from mneme import bootstrap

    try:
        bootstrap.close_current()
    except (OSError, MnemeError) as e:  # the command's own result stands; say what could not be closed
        print(f"warning: the store was not closed cleanly ({e}); it recovers on its next open", file=sys.stderr)


def _apply_home(config: Config) -> None:
    """Point the embedded services at the configured store when it did not come from MNEME_HOME."""
    home = config.get("home")
    source = config.sources.get("home", "")
    if home and not source.startswith("env"):
        os.environ["MNEME_HOME"] = str(os.path.expanduser(str(home)))
        from mneme import bootstrap

        bootstrap.reset()
