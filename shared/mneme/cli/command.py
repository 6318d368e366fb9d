"""What a command is made of: the `Context` it gets, the options every command shares, and `command` / `group`
that declare one. Command modules import this; `cli/app` (the parser and `main`) imports them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mneme.cli.config import Config, ConfigError

if TYPE_CHECKING:
    from mneme.bootstrap import Services
    from mneme.models import Principal
    from mneme_sdk import Client

Handler = Callable[["Context"], int]


@dataclass
class Context:
    """What a command gets: its parsed arguments, the effective config, a client on demand and, in embedded
    mode, the services the composition root hands it (`provide`: `bootstrap.current` unless given)."""

    args: argparse.Namespace
    config: Config
    provide: Callable[[], Services] | None = None
    _clients: dict[tuple[str, ...], Client] = field(default_factory=dict)

    @property
    def services(self) -> Services:
        """The embedded store's services (built on first use: a remote command never loads them)."""
        if self.provide is None:
            from mneme import bootstrap

            self.provide = bootstrap.current
        return self.provide()

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
            client = embedded_client(self.principal(principal=principal, roles=roles), services=lambda: self.services)
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
