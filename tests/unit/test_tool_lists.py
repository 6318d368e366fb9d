"""One list of tools (issue 45): the README, docs/integrations.md and the MCP server's own instructions name every
tool `mneme mcp` registers, and nothing else."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from mneme.mcp.server import build_server
from mneme_sdk import Client

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"`([a-z_]+)`")


def registered() -> set[str]:
    server = build_server(Client("http://127.0.0.1:9", "mnk_unused"), scope="root.team")
    return {tool.name for tool in asyncio.run(server.list_tools())}


def named_after(text: str, marker: str) -> set[str]:
    """The backticked names of the paragraph that holds `marker`."""
    paragraph = next(p for p in text.split("\n\n") if marker in p)
    return set(NAME.findall(paragraph.split(marker, 1)[1].split(" over ", 1)[0].split("(", 1)[0]))


def test_the_server_registers_the_eleven_tools() -> None:
    assert registered() == {
        "retrieve", "remember", "remember_conversation", "recall", "consolidate", "archive_memory",
        "propose_memory", "list_scopes", "list", "forget", "correct_fact",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("doc", "marker"),
    [("README.md", "`mneme mcp` serves the tools"), ("docs/integrations.md", "`mneme mcp` is its memory server, with")],
)
def test_each_doc_names_every_registered_tool(doc: str, marker: str) -> None:
    assert named_after((ROOT / doc).read_text(), marker) == registered()


def test_the_servers_instructions_name_every_tool() -> None:
    server = build_server(Client("http://127.0.0.1:9", "mnk_unused"), scope="root.team")
    assert server.instructions is not None
    assert set(NAME.findall(server.instructions)) >= registered()
