"""One parameter followed from its request model to every surface that takes it: the API document, the MCP
tool's input schema (listed by the `mcp` package's in-memory client), the CLI option and the console's form field.

The model is the one declaration (docs/architecture.md, 'Each operation declared once'); the MCP tools are built
from it, the CLI and the console are checked against it (tests/unit/test_mcp_params.py, test_cli_options.py,
test_console_forms.py). This prints what each surface says, for the closing note or a reader's check.

    PYTHONPATH=shared:. python bench/declared.py                  # recall's limit
    PYTHONPATH=shared:. python bench/declared.py budget_tokens disclosure.budget_tokens
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from mneme.cli.app import parser as cli_parser
from mneme.mcp.params import model_field
from mneme.mcp.server import build_server
from mneme.services.recall import RecallRequest
from mneme_sdk import Client as MnemeClient

ROOT = Path(__file__).resolve().parents[1]
CONSOLE = ROOT / "shared" / "mneme" / "assets" / "console" / "index.html"
SCHEMA_KEYS = ("type", "anyOf", "minimum", "maximum", "maxLength", "enum", "default", "description")


def shown(schema: dict[str, Any]) -> str:
    return json.dumps({k: schema[k] for k in SCHEMA_KEYS if k in schema}, ensure_ascii=False)


def mcp_property(tool: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(MnemeClient("http://127.0.0.1:9", "key"), scope="root")) as mcp:
            listed = {t.name: t for t in (await mcp.list_tools()).tools}
            found.update(listed[tool].input_schema["properties"][name])

    anyio.run(main)
    return found


def cli_option(command: str, dest: str) -> str:
    sub = next(a for a in cli_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if a.dest == dest)
    kind = getattr(action.type, "__name__", "str")
    flags = "/".join(action.option_strings)
    return f"mneme {command} {flags}: type {kind}, default {action.default}, help {action.help!r}"


def console_field(form: str, name: str) -> str:
    html = CONSOLE.read_text(encoding="utf-8")
    body = re.search(rf'<form id="{form}".*?</form>', html, re.S)
    found = body and re.search(rf'<(input|select)[^>]*name="{name}"[^>]*>', body.group(0))
    return f"{form}: {found.group(0)}" if found else f"{form}: no field {name}"


def main() -> int:
    """`declared.py [NAME [FIELD]]`: recall's parameter NAME (default limit), the model's FIELD (default NAME)."""
    args = sys.argv[1:] or ["limit"]
    name = args[0]
    dotted = args[1] if len(args) > 1 else name
    operation = "recall"
    info = model_field(RecallRequest, dotted)
    print(f"{operation}.{name}")
    print(f"  request model  RecallRequest.{dotted}: {info.annotation}, {info.metadata}, default {info.default!r}")
    print(f"                 description {info.description!r}")
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())["components"]["schemas"]
    *parents, last = dotted.split(".")
    schema_name = {"disclosure": "Disclosure", "scoring": "Scoring"}.get(parents[0], "") if parents else "RecallRequest"
    print(f"  API document   {schema_name}.{last}: {shown(document[schema_name]['properties'][last])}")
    print(f"  MCP tool       recall.{name}: {shown(mcp_property('recall', name))}")
    print(f"  CLI            {cli_option('recall', name)}")
    print(f"  console        {console_field('recall-form', name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
