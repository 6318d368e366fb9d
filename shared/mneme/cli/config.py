"""Where the CLI's settings come from: flags, then environment, then a TOML file, then defaults.

The environment and the file are read by pydantic-settings' own sources (`EnvSettingsSource`,
`TomlConfigSettingsSource`) into one model, `CliSettings`; this module only merges them by precedence
and remembers where each value came from (for `mneme config`).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict, TomlConfigSettingsSource

from mneme.errors import InvalidInput

DEFAULT_TENANT = "default"


class CliSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEME_", env_ignore_empty=True, extra="forbid")

    url: str | None = None
    api_key: str | None = None
    api_key_file: str | None = None
    tenant: str | None = None
    principal: str | None = None
    roles: Annotated[list[str] | None, NoDecode] = None  # MNEME_ROLES="reader,writer" or a TOML list
    home: str | None = None
    scope: str | None = None
    timeout: float | None = None

    @field_validator("roles", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return [role.strip() for role in value.split(",") if role.strip()] if isinstance(value, str) else value


KEYS = tuple(CliSettings.model_fields)
# What each key is when nothing sets it (`mneme config` shows these too). The CLI's commands act as principal
# `cli` with role admin on the embedded store; `mneme mcp` as `mcp-agent`, a writer.
DEFAULTS: dict[str, Any] = {
    "url": None,
    "api_key": None,
    "api_key_file": None,
    "tenant": DEFAULT_TENANT,
    "principal": "cli (mneme mcp: mcp-agent)",
    "roles": "admin (mneme mcp: writer)",
    "home": ".mneme",
    "scope": "root",
    "timeout": 10.0,
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


def load(flags: Mapping[str, Any], path: str | None = None) -> Config:
    """Merge flags (non-None values), environment and the config file, in that order of precedence."""
    explicit = path is not None
    file = Path(path).expanduser() if path else default_config_path(os.environ)
    from_file = _read(file, required=explicit or bool(os.environ.get("MNEME_CONFIG")))
    layers: list[tuple[Mapping[str, Any], Callable[[str], str]]] = [
        ({k: v for k, v in flags.items() if v is not None and k in KEYS}, lambda k: "flag --" + k.replace("_", "-")),
        (EnvSettingsSource(CliSettings)(), lambda k: f"env MNEME_{k.upper()}"),
        (from_file, lambda k: f"file {file}"),
    ]
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        for layer, label in layers:
            if layer.get(key) is not None:
                values[key], sources[key] = layer[key], label(key)
                break
    # A key given at a higher level wins over a key file given lower down, and vice versa.
    if "api_key" in values and "api_key_file" in values:
        rank = ("flag", "env", "file")
        winner = min(("api_key", "api_key_file"), key=lambda k: rank.index(sources[k].split()[0]))
        loser = "api_key_file" if winner == "api_key" else "api_key"
        values.pop(loser)
        sources.pop(loser)
    try:
        checked = CliSettings.model_validate(values).model_dump(exclude_none=True)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"invalid settings: {problems}") from None
    return Config(checked, sources, file if from_file else None)


def _read(path: Path, *, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise ConfigError(f"config file {path} does not exist")
        return {}
    try:
        data = TomlConfigSettingsSource(CliSettings, toml_file=path)()
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown keys in {path}: {', '.join(unknown)} (known: {', '.join(KEYS)})")
    return data
