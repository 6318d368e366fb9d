"""The OpenAI Agents SDK (`openai-agents`) with `mneme mcp` as its MCP server (stdio, embedded mode), no LLM; and its
example run in embedded mode, with no server (test_integrations_doc.py runs every example against `mneme serve`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agents.mcp import MCPServerStdio, MCPServerStdioParams

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"retrieve", "remember", "remember_conversation", "recall", "consolidate", "archive_memory", "propose_memory"}
TOOLS |= {"list_scopes", "list", "forget", "correct_fact"}

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def test_the_agents_sdk_lists_mnemes_tools_and_calls_them(tmp_path: Path) -> None:
    env = {**os.environ, "MNEME_HOME": str(tmp_path / "store"), "MNEME_SCOPE": "root.team"}
    params: MCPServerStdioParams = {"command": sys.executable, "args": ["-m", "mneme.cli", "mcp"], "env": env}

    async def agent() -> tuple[set[str], str, str, bool]:
        async with MCPServerStdio(name="mneme", params=params, client_session_timeout_seconds=120) as mneme:
            names = {tool.name for tool in await mneme.list_tools()}
            args = {"content": "The release train leaves on Thursdays.", "create_scope": True}
            stored = await mneme.call_tool("remember", args)
            found = await mneme.call_tool("recall", {"query": "when does the release train leave?"})
            refused = await mneme.call_tool("retrieve", {"path": "root.elsewhere"})
            return names, stored.content[0].text, found.content[0].text, bool(refused.is_error)  # type: ignore[union-attr]

    names, stored, found, refused = asyncio.run(agent())
    assert names == TOOLS
    assert stored.startswith("remembered in root.team: episode_id ep_")
    assert "The release train leaves on Thursdays." in found
    assert refused  # an API error comes back as an MCP tool error


def test_the_openai_agents_example_runs_as_documented(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_mcp.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=without("MNEME_HOME", "MNEME_URL", "MNEME_API_KEY"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Mneme's tools: retrieve, remember, remember_conversation, recall, consolidate" in done.stdout
    assert "Mneme recalled:" in done.stdout and "Pennine Joinery is on the flat-rate VAT scheme." in done.stdout
    assert (tmp_path / ".mneme").is_dir()  # embedded mode: the store in the working folder


def without(*names: str) -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in names}
