"""`mneme mcp` as a subprocess on stdio, driven by the official `mcp` client, in embedded and remote mode."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from mneme import bootstrap, cli
from mneme.local.embedded import embedded_client
from mneme.models import Principal, Role
from mneme_sdk import Client as MnemeClient

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "retrieve", "remember", "remember_conversation", "recall", "consolidate", "archive_memory", "propose_memory",
    "list_scopes",
}  # fmt: skip
TOOLS |= {"list", "forget", "correct_fact"}  # records: tests/integration/test_mcp_records.py


def mcp_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}",
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),  # no user config file leaks in
        "MNEME_CONSOLIDATION__SETTLE_SECONDS": "0",
        **extra,
    }


def drive(env: dict[str, str], cwd: Path, session: Callable[[Client], Awaitable[None]], *args: str) -> None:
    """Start `python -m mneme.cli mcp ARGS` with `env` and run `session` against it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "mneme.cli", "mcp", *args], env=env, cwd=cwd)

    async def main() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                await session(client)

    anyio.run(main)


def text(result: CallToolResult) -> str:
    assert result.content and result.content[0].type == "text"
    return str(result.content[0].text)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


async def the_agent_workflow(client: Client, writer_name: str) -> dict[str, Any]:
    """list tools → remember → recall → retrieve → propose → archive; returns what the checks need."""
    listing = await client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, tool.name
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None, tool.name
    remember = tools["remember"].input_schema
    assert remember["required"] == ["content"]
    assert remember["properties"]["scope"]["pattern"].startswith("^root")
    assert remember["properties"]["occurred_at"]["anyOf"][0]["format"] == "date-time"
    assert tools["archive_memory"].input_schema["required"] == ["memory_id"]
    assert set(tools["propose_memory"].input_schema["required"]) == {"key", "body"}
    assert tools["recall"].input_schema["properties"]["limit"]["maximum"] == 200
    assert tools["retrieve"].annotations is not None and tools["retrieve"].annotations.read_only_hint
    assert tools["archive_memory"].annotations is not None and tools["archive_memory"].annotations.destructive_hint
    instructions = client.instructions or ""
    for rule in ("retrieve", "recall", "self-contained summary", "retry it once", "Never pretend to remember"):
        assert rule in instructions, rule
    assert "EQUAL priority" in instructions

    remembered = structured(
        await client.call_tool(
            "remember",
            {
                "content": "Pennine Joinery moved its VAT quarter end to March in 2026.",
                "scope": "root.pennine",
                "create_scope": True,
                "session_id": "s-1",
                "metadata": {"source": "call"},
            },
        )
    )
    assert remembered["episode_id"].startswith("ep_") and remembered["created"]

    recalled = await client.call_tool("recall", {"query": "when does the VAT quarter end?", "scope": "root.pennine"})
    hits = structured(recalled)["results"]
    assert hits[0]["id"] == remembered["episode_id"] and hits[0]["metadata"] == {"source": "call"}
    assert "moved its VAT quarter end to March" in text(recalled)  # the context pack is what the agent reads
    # session_id names the delivery session (remember in s-1, recall in s-1), and delta collapses repeats
    in_session = {"query": "VAT quarter end", "scope": "root.pennine", "session_id": "s-1"}
    first = await client.call_tool("recall", in_session)
    assert structured(first)["results"][0]["id"] == remembered["episode_id"]
    assert f"### {remembered['episode_id']}" in text(first)
    again = text(await client.call_tool("recall", in_session))
    assert f"already loaded: {remembered['episode_id']}" in again and "### ep_" not in again
    full = text(await client.call_tool("recall", {**in_session, "delta": False}))
    assert f"### {remembered['episode_id']}" in full
    for bad in (0, 201):
        over = await client.call_tool("recall", {"query": "VAT", "scope": "root.pennine", "limit": bad})
        assert over.is_error and text(over).startswith("invalid_input: ")
        assert over.structured_content is not None and over.structured_content["error"]["code"] == "invalid_input"
    assert structured(await client.call_tool("recall", {"query": "VAT", "scope": "root.pennine", "limit": 200}))

    proposed = await client.call_tool(
        "propose_memory", {"key": "vat-policy", "body": "File VAT returns quarterly.", "scope": "root.pennine"}
    )
    memory = structured(proposed)
    assert memory["status"] == "pending" and memory["author"] == writer_name
    assert "pending" in text(proposed)
    bundle = await client.call_tool("retrieve", {"path": "root.pennine"})
    assert "<!-- scoped: root.pennine | priority: 6 | key: vat-policy | pending -->" in text(bundle)
    assert structured(bundle)["blocks"][0]["memory_id"] == memory["memory_id"]

    archived_call = await client.call_tool("archive_memory", {"memory_id": memory["memory_id"]})
    archived = structured(archived_call)
    assert archived["status"] == "archived" and archived["key"] == "vat-policy"
    assert "body" not in archived and "quarterly" not in text(archived_call)  # by id, never to read it
    assert "vat-policy" not in text(await client.call_tool("retrieve", {"path": "root.pennine"}))

    scopes = structured(await client.call_tool("list_scopes", {}))
    assert [s["path"] for s in scopes["scopes"]] == ["root", "root.pennine"]
    run = structured(await client.call_tool("consolidate", {"scopes": ["root.pennine"]}))
    assert run["status"] == "succeeded" and run["stages"]["collect"]["counters"]["episodes_read"] == 1

    empty = await client.call_tool("recall", {"query": "anything", "scope": "root.nowhere"})
    assert not empty.is_error
    assert text(empty) == "Nothing is remembered under root.nowhere yet: no one has written there."
    missing = await client.call_tool("retrieve", {"path": "root.nowhere"})
    assert missing.is_error and text(missing).startswith("scope_not_found: scope 'root.nowhere' does not exist")
    assert missing.structured_content == {
        "error": {
            "code": "scope_not_found",
            "message": "scope 'root.nowhere' does not exist",
            "details": {"path": "root.nowhere"},
            "status": 404,
        }
    }
    return {"episode_id": remembered["episode_id"], "memory_id": memory["memory_id"]}


def test_embedded_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "store"
    seen: dict[str, Any] = {}

    async def session(client: Client) -> None:
        seen.update(await the_agent_workflow(client, "mcp-agent"))
        unknown = await client.call_tool("propose_memory", {"key": "x", "body": "y", "tag": "clients=*"})
        assert unknown.is_error and text(unknown).startswith("unknown_layer: unknown layer 'clients'")

    drive(mcp_env(tmp_path, MNEME_HOME=str(home)), tmp_path, session)
    # The subprocess wrote to the store under MNEME_HOME, as tenant default
    monkeypatch.setenv("MNEME_HOME", str(home))
    bootstrap.reset()
    try:
        admin = embedded_client(Principal(tenant="default", principal="auditor", roles=frozenset({Role.admin})))
        assert admin.recall(ids=[seen["episode_id"]]).results[0].metadata == {"source": "call"}
    finally:
        monkeypatch.undo()
        bootstrap.reset()


def test_embedded_identity_and_working_scope_from_the_environment(tmp_path: Path) -> None:
    env = mcp_env(
        tmp_path,
        MNEME_HOME=str(tmp_path / "store"),
        MNEME_TENANT="acme",
        MNEME_PRINCIPAL="claude",
        MNEME_ROLES="approver",
        MNEME_SCOPE="root.projects",
    )

    async def session(client: Client) -> None:
        assert "You work in scope root.projects" in (client.instructions or "")
        listing = await client.list_tools()
        recall = next(t for t in listing.tools if t.name == "recall")
        assert recall.input_schema["properties"]["scope"]["default"] == "root.projects"
        done = structured(await client.call_tool("remember", {"content": "Kick-off on 3 May.", "create_scope": True}))
        assert done["created"]
        proposed = structured(await client.call_tool("propose_memory", {"key": "tone", "body": "Be brief."}))
        assert (proposed["status"], proposed["author"], proposed["target"]) == ("published", "claude", "root.projects")

    drive(env, tmp_path, session)


def test_remote_mode_against_the_local_server(
    server: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEME_CONSOLIDATION__SETTLE_SECONDS", "0")  # the server consolidates fresh episodes
    bootstrap.reset()
    key_file, _ = cli.ensure_first_run()
    admin = MnemeClient(server, key_file.read_text().strip())
    writer = admin.create_key("remote-agent", ["writer"])
    admin.put_layers({1: "clients"})
    published = admin.create_memory("etiquette", "Use company names.", tag="clients=*")
    unused_home = tmp_path / "not-used"
    env = mcp_env(tmp_path, MNEME_URL=server, MNEME_API_KEY=writer.api_key, MNEME_HOME=str(unused_home))
    seen: dict[str, Any] = {}

    async def session(client: Client) -> None:
        seen.update(await the_agent_workflow(client, "remote-agent"))
        denied = await client.call_tool("archive_memory", {"memory_id": published.memory_id})
        assert denied.is_error and text(denied).startswith("forbidden: only an approver")
        assert denied.structured_content is not None and denied.structured_content["error"]["status"] == 403

    drive(env, tmp_path, session)
    # Everything landed on the server, under the key's tenant and principal; nothing was stored locally
    assert admin.recall(ids=[seen["episode_id"]]).results[0].scope == "root.pennine"
    assert not unused_home.exists()


def test_a_bad_api_key_is_an_mcp_tool_error(server: str, home: Path, tmp_path: Path) -> None:
    env = mcp_env(tmp_path, MNEME_URL=server, MNEME_API_KEY="mnk_wrong")

    async def session(client: Client) -> None:
        result = await client.call_tool("list_scopes", {})
        assert result.is_error and text(result).startswith("unauthorized: missing or unknown API key")

    drive(env, tmp_path, session)
