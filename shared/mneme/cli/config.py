"""Where the CLI's settings come from: flags, then environment, then a TOML file, then defaults.

The file is `$MNEME_CONFIG`, else `$XDG_CONFIG_HOME/mneme/config.toml` (default
`~/.config/mneme/config.toml`); `--config PATH` names another one. Keys:

    url = "https://mneme.example.com"      # remote mode when set (MNEME_URL, --url)
    api_key = "mnk_…"                      # or api_key_file = "~/.mneme/admin.key" (MNEME_API_KEY, --api-key)
    tenant = "default"                     # embedded mode only (MNEME_TENANT, --tenant)
    principal = "alice"                    # embedded mode identity (MNEME_PRINCIPAL)
    roles = ["admin"]                      # embedded mode roles (MNEME_ROLES="reader,writer")
    home = "~/.mneme"                      # embedded store folder (MNEME_HOME, --home)
    scope = "root.acme"                    # the MCP server's working scope (MNEME_SCOPE, --scope)
    timeout = 10                           # seconds per HTTP request (MNEME_TIMEOUT, --timeout)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mneme.errors import InvalidInput

DEFAULT_TENANT = "default"
KEYS = ("url", "api_key", "api_key_file", "tenant", "principal", "roles", "home", "scope", "timeout")
ENV = {
    "url": "MNEME_URL",
    "api_key": "MNEME_API_KEY",
    "api_key_file": "MNEME_API_KEY_FILE",
    "tenant": "MNEME_TENANT",
    "principal": "MNEME_PRINCIPAL",
    "roles": "MNEME_ROLES",
    "home": "MNEME_HOME",
    "scope": "MNEME_SCOPE",
    "timeout": "MNEME_TIMEOUT",
}


class ConfigError(InvalidInput):
    code = "invalid_config"


def default_config_path(env: Mapping[str, str]) -> Path:
    if env.get("MNEME_CONFIG"):
        return Path(env["MNEME_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "mneme" / "config.toml"


@dataclass(frozen=True)
class Config:
    """The effective settings and, for `mneme config`, where each one came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    file: Path | None = None

    def get(self, key: str, default: Any = None) -> Any:
        value = self.values.get(key)
        return default if value is None else value

    @property
    def url(self) -> str | None:
        url: str | None = self.get("url")
        return url.rstrip("/") if url else None

    @property
    def remote(self) -> bool:
        return self.url is not None

    @property
    def api_key(self) -> str | None:
        if self.get("api_key"):
            return str(self.values["api_key"]).strip()
        key_file = self.get("api_key_file")
        if key_file:
            path = Path(key_file).expanduser()
            try:
                return path.read_text().strip()
            except OSError as e:
                raise ConfigError(f"cannot read api_key_file {path}: {e.strerror}") from None
        return None

    @property
    def tenant(self) -> str:
        return str(self.get("tenant", DEFAULT_TENANT))

    @property
    def timeout(self) -> float:
        try:
            return float(self.get("timeout", 10.0))
        except (TypeError, ValueError):
            raise ConfigError(f"timeout must be a number of seconds, not {self.values['timeout']!r}") from None

    def roles(self, default: list[str]) -> list[str]:
        roles = self.get("roles")
        if roles is None:
            return default
        if isinstance(roles, str):
            roles = [role.strip() for role in roles.split(",") if role.strip()]
        return [str(role) for role in roles]

    def principal(self, default: str) -> str:
        return str(self.get("principal", default))


def load(flags: Mapping[str, Any], env: Mapping[str, str] | None = None, path: str | None = None) -> Config:
    """Merge flags (non-None values), environment and the config file, in that order of precedence."""
    env = os.environ if env is None else env
    explicit = path is not None
    file = Path(path).expanduser() if path else default_config_path(env)
    from_file = _read(file, required=explicit or bool(env.get("MNEME_CONFIG")))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        if flags.get(key) is not None:
            values[key], sources[key] = flags[key], "flag --" + key.replace("_", "-")
        elif env.get(ENV[key]):
            values[key], sources[key] = env[ENV[key]], f"env {ENV[key]}"
        elif key in from_file:
            values[key], sources[key] = from_file[key], f"file {file}"
    # A key given at a higher level wins over a key file given lower down, and vice versa.
    if "api_key" in values and "api_key_file" in values:
        rank = ("flag", "env", "file")
        winner = min(("api_key", "api_key_file"), key=lambda k: rank.index(sources[k].split()[0]))
        loser = "api_key_file" if winner == "api_key" else "api_key"
        values.pop(loser)
        sources.pop(loser)
    return Config(values, sources, file if from_file else None)


def _read(path: Path, *, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise ConfigError(f"config file {path} does not exist")
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown keys in {path}: {', '.join(unknown)} (known: {', '.join(KEYS)})")
    return data
