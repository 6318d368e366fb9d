"""Store maintenance commands: consolidate (`cli/consolidate`), export and import (`cli/portability`), backup
and restore (`cli/backup`), reindex and status (`cli/status`), config and openapi (here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mneme.cli import backup, consolidate, portability, status
from mneme.cli.command import Context, command
from mneme.cli.config import DEFAULTS, KEYS
from mneme.cli.output import emit_json


def cmd_config(ctx: Context) -> int:
    config = ctx.config
    shown: dict[str, Any] = {}
    for key in KEYS:
        value, source = (
            (config.values[key], config.sources[key]) if key in config.values else (DEFAULTS[key], "default")
        )
        if key == "api_key" and value:
            value = str(value)[:8] + "…"
        shown[key] = {"value": value, "source": source}
    if ctx.args.json:
        emit_json({"file": str(config.file) if config.file else None, "mode": _mode(ctx), "settings": shown})
        return 0
    print(f"mode: {_mode(ctx)}")
    print(f"config file: {config.file or 'none'}")
    for key, item in shown.items():
        print(f"  {key} = {item['value']!r}  ({item['source']})")
    return 0


def _mode(ctx: Context) -> str:
    return f"remote {ctx.config.url}" if ctx.config.remote else f"embedded (tenant {ctx.config.tenant})"


def cmd_openapi(ctx: Context) -> int:
    from mneme.http.openapi import render

    text = render()
    if ctx.args.output:
        Path(ctx.args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def register_maintenance(sub: Any, common: argparse.ArgumentParser) -> None:
    consolidate.register(sub, common)
    status.register(sub, common)
    config = command(
        sub,
        "config",
        cmd_config,
        common,
        help="show the effective settings and where each one comes from",
        examples="""
mneme config
MNEME_CONFIG=./mneme.toml mneme config --json

# ~/.config/mneme/config.toml
url = "https://mneme.example.com"
api_key_file = "~/.mneme/prod.key"
timeout = 20
""",
    )
    config.add_argument("--json", action="store_true")
    portability.register(sub, common)
    backup.register(sub, common)
    openapi = command(
        sub,
        "openapi",
        cmd_openapi,
        common,
        help="print the OpenAPI document generated from the resolvers",
        examples="mneme openapi --output docs/openapi.json",
    )
    openapi.add_argument("--output", help="write to this file instead of stdout")
