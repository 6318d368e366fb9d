"""The parser, the shared options and `main`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mneme.cli.config import Config, ConfigError, load
from mneme.errors import MnemeError
from mneme_sdk.errors import MnemeError as ApiError

if TYPE_CHECKING:
    from mneme.models import Principal
    from mneme_sdk import Client

Handler = Callable[["Context"], int]

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


@dataclass
class Context:
    """What a command gets: its parsed arguments, the effective config and a client on demand."""

    args: argparse.Namespace
    config: Config
    _clients: dict[tuple[str, ...], Client] = field(default_factory=dict)

    def embedded_only(self, name: str) -> None:
        if self.config.remote:
            raise ConfigError(f"`mneme {name}` works on the local store only; unset --url / MNEME_URL")

    @property
    def quiet(self) -> bool:
        return bool(getattr(self.args, "quiet", False))

    def principal(self, *, principal: str = "cli", roles: tuple[str, ...] = ("admin",)) -> Principal:
        """The embedded-mode caller: tenant, principal and roles from flags, env or the file."""
        from mneme.models import Principal, Role

        names = self.config.roles(list(roles))
        try:
            parsed = frozenset(Role(name) for name in names)
        except ValueError:
            raise ConfigError(f"roles must be among reader, writer, approver, admin; not {names}") from None
        if not parsed:
            raise ConfigError("give at least one role")
        return Principal(tenant=self.config.tenant, principal=self.config.principal(principal), roles=parsed)

    def client(self, *, principal: str = "cli", roles: tuple[str, ...] = ("admin",), need_key: bool = True) -> Client:
        """Remote (the SDK's client over HTTP) when a URL is configured, else embedded over the local store.

        Embedded mode acts as the local operator: principal `cli` with the admin role by default
        (MNEME_PRINCIPAL / MNEME_ROLES or the config file change it).
        """
        from mneme_sdk import Client

        cache_key = (principal, *roles)
        if cache_key in self._clients:
            return self._clients[cache_key]
        if self.config.remote:
            assert self.config.url is not None
            api_key = self.config.api_key
            if need_key and not api_key:
                raise ConfigError(
                    "remote mode needs an API key: --api-key, MNEME_API_KEY or api_key in the config file"
                )
            client = Client(self.config.url, api_key, timeout=self.config.timeout)
        else:
            from mneme.cli.output import quiet_runtime
            from mneme.local.embedded import embedded_client

            quiet_runtime()
            client = embedded_client(self.principal(principal=principal, roles=roles))
        self._clients[cache_key] = client
        return client


def common_options() -> argparse.ArgumentParser:
    """Options every command accepts, before or after its name (`mneme --url U recall …` or
    `mneme recall … --url U`). Defaults are suppressed so a later position never resets an earlier one."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("settings (flags > environment > config file)")
    add = group.add_argument
    add("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file (env MNEME_CONFIG)")
    add("--url", default=argparse.SUPPRESS, help="remote mode: the API's base URL (env MNEME_URL)")
    add("--api-key", default=argparse.SUPPRESS, help="remote mode: an API key (env MNEME_API_KEY)")
    add("--home", default=argparse.SUPPRESS, help="embedded mode: the store folder (env MNEME_HOME, default ./.mneme)")
    add("--tenant", default=argparse.SUPPRESS, help="embedded mode: the tenant (env MNEME_TENANT, default 'default')")
    add("--timeout", type=float, default=argparse.SUPPRESS, help="remote mode: seconds per request (default 10)")
    add("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress lines on stderr")
    return common


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=100)


def command(
    sub: Any, name: str, handler: Handler, common: argparse.ArgumentParser, *, help: str, examples: str
) -> argparse.ArgumentParser:
    """A leaf command with the shared options, a description and an `examples:` epilog."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog="examples:\n" + "\n".join("  " + line for line in examples.strip().splitlines()),
        parents=[common],
        formatter_class=Formatter,
    )
    parser.set_defaults(func=handler)
    return parser


def group(sub: Any, name: str, help: str, examples: str) -> Any:
    """A command with actions (`mneme scopes list`); each action is a `command` with its own options."""
    parser = sub.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog="examples:\n" + "\n".join("  " + line for line in examples.strip().splitlines()),
        formatter_class=Formatter,
    )
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")


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
