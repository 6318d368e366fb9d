"""The MCP `recall` tool's `metadata` filter and `strictness` (the relevance floor), through the official `mcp`
client on an in-process `mneme mcp` server whose SDK client talks to the local server over loopback."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from mneme import cli
from mneme.mcp.server import build_server
from mneme_sdk import Client as MnemeClient
from tests.integration.test_mcp import structured, text

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def test_recall_takes_the_apis_metadata_filter_and_strictness(server: str, home: Path) -> None:
    key_file, _ = cli.ensure_first_run()
    mneme = MnemeClient(server, key_file.read_text().strip())
    said = {
        "ines": mneme.remember("root.users", "Ines: I am vegetarian.", metadata={"user": "ines"}, create_scope=True),
        "omar": mneme.remember("root.users", "Omar: I am vegetarian too.", metadata={"user": "omar"}),
        "kai": mneme.remember("root.users", "Kai: the garden shed needs a new roof.", metadata={"user": "kai"}),
    }
    ids = {name: done.episode_id for name, done in said.items()}

    async def session() -> None:
        async with Client(build_server(mneme, scope="root.users")) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            properties = tools["recall"].input_schema["properties"]
            assert "metadata" in properties and "strictness" in properties
            assert "precision" in str(properties["strictness"])

            async def hits(**arguments: object) -> list[str]:
                answer = await client.call_tool("recall", {"query": "who is vegetarian?", **arguments})
                return [r["id"] for r in structured(answer)["results"]]

            # metadata: one value, or a list for any of several
            assert await hits(metadata={"user": "ines"}) == [ids["ines"]]
            assert set(await hits(metadata={"user": ["ines", "omar"]})) == {ids["ines"], ids["omar"]}
            # strictness: precision admits only what shares meaningful words with the query; recall the most
            precise = await hits(strictness="precision")
            loose = await hits(strictness="recall")
            assert ids["kai"] not in precise and set(precise) == {ids["ines"], ids["omar"]}
            assert ids["kai"] in loose
            # strict types: a nested value or an unknown strictness is refused, never sent on
            for bad in ({"metadata": {"user": {"name": "ines"}}}, {"strictness": "loose"}):
                refused = await client.call_tool("recall", {"query": "vegetarian", **bad})
                assert refused.is_error, text(refused)

    anyio.run(session)
