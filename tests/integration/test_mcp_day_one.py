"""An agent's first day through MCP, in process against the local server on both stores: the working scope
does not exist yet, arguments are wrong now and then, and a chat goes in as a conversation."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult

from mneme.mcp.server import build_server
from mneme.models import Role
from mneme_sdk import Client as MnemeClient
from tests.integration.stacks import STORES, Served, served

WORKING = "root.projects.alpha"
ERROR_LINE = re.compile(r"^[a-z_]+: \S")  # `code: message`, as every API error reads


@pytest.fixture(params=STORES)
def stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with served(request.param, tmp_path, monkeypatch) as running:
        yield running


def agent(stack: Served, *roles: Role) -> MnemeClient:
    secret, _ = stack.services.keys.create("acme", "agent-1", list(roles))
    return MnemeClient(stack.admin.base, secret, max_retries=0)


def drive(client: MnemeClient, session: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(build_server(client, scope=WORKING)) as mcp:
                await session(mcp)

    anyio.run(main)


def text(result: CallToolResult) -> str:
    assert result.content and result.content[0].type == "text"
    return str(result.content[0].text)


def error_code(result: CallToolResult) -> str:
    assert result.is_error, text(result)
    assert ERROR_LINE.match(text(result)), text(result)
    assert result.structured_content is not None
    code: str = result.structured_content["error"]["code"]
    assert text(result).startswith(f"{code}: ")
    return code


def test_a_writer_on_a_fresh_store_reads_nothing_yet_and_its_first_remember_creates_the_scope(stack: Served) -> None:
    async def session(mcp: Client) -> None:
        bundle = await mcp.call_tool("retrieve", {})
        found = await mcp.call_tool("recall", {"query": "kick-off date"})
        assert not bundle.is_error and not found.is_error
        assert text(bundle) == text(found) != "" and "Nothing is remembered under root.projects.alpha yet" in text(
            found
        )
        assert found.structured_content is not None and found.structured_content["results"] == []

        stored = await mcp.call_tool("remember", {"content": "Project Alpha's kick-off is on 3 May 2027."})
        assert not stored.is_error, text(stored)

        again = await mcp.call_tool("recall", {"query": "When is the kick-off of Project Alpha?"})
        assert "3 May 2027" in text(again)
        assert "<!-- mneme bundle for root.projects.alpha" in text(await mcp.call_tool("retrieve", {}))

    drive(agent(stack, Role.writer), session)


def test_a_reader_is_told_nothing_is_remembered_yet_and_cannot_create_the_scope(stack: Served) -> None:
    async def session(mcp: Client) -> None:
        found = await mcp.call_tool("recall", {"query": "anything"})
        assert not found.is_error and "Nothing is remembered under root.projects.alpha yet" in text(found)
        assert error_code(await mcp.call_tool("remember", {"content": "A note."})) == "forbidden"
        elsewhere = await mcp.call_tool("recall", {"query": "x", "scope": "root.elsewhere"})
        assert not elsewhere.is_error and "Nothing is remembered under root.elsewhere yet" in text(elsewhere)
        assert error_code(await mcp.call_tool("retrieve", {"path": "root.elsewhere"})) == (
            "scope_not_found"  # only the working scope is expected to be missing on day one
        )

    drive(agent(stack, Role.reader), session)
    assert stack.admin.get("/v1/scopes").json()["scopes"][-1]["path"] != WORKING


@pytest.mark.parametrize(
    ("tool", "arguments", "code", "names"),
    [
        ("recall", {"query": "x", "scope": "Root.Acme"}, "invalid_input", "scope: 'Root.Acme' is not a scope path"),
        ("recall", {"query": "x", "kinds": ["facts"]}, "invalid_input", "kinds.0"),
        ("recall", {"query": "x", "budget_tokens": 10}, "invalid_input", "budget_tokens"),
        ("recall", {"query": "x", "since": "2026-03-01T10:00:00"}, "invalid_input", "since"),
        ("remember", {"content": ""}, "invalid_input", "content"),
        ("remember", {"content": "x", "occurred_at": "2026-03-01T10:00:00"}, "invalid_input", "timezone"),
        ("remember", {"content": "x", "metadata": "not an object"}, "invalid_input", "metadata"),
        ("retrieve", {"path": "root..x"}, "invalid_input", "path: 'root..x' is not a scope path"),
        ("remember_conversation", {"messages": [{"content": "who said it?"}]}, "invalid_message", "role or name"),
        ("propose_memory", {"key": "Bad Key", "body": "x"}, "invalid_key", "key"),  # the API's rule and error
        ("consolidate", {"wait": "yes"}, "invalid_input", "wait"),  # a boolean is true or false, not a word
        ("recall", {"query": "x", "delta": "no", "session_id": "s"}, "invalid_input", "delta"),
        ("remember", {"content": "x", "create_scope": "yes"}, "invalid_input", "create_scope"),
        ("recall", {"query": "x", "limit": 5.5}, "invalid_input", "limit"),
    ],
)
def test_every_bad_argument_reads_code_then_message(
    stack: Served, tool: str, arguments: dict[str, Any], code: str, names: str
) -> None:
    async def session(mcp: Client) -> None:
        result = await mcp.call_tool(tool, arguments)
        assert error_code(result) == code
        assert names in text(result)

    drive(agent(stack, Role.writer), session)


def test_the_pack_budget_has_the_apis_bounds(stack: Served) -> None:
    async def session(mcp: Client) -> None:
        await mcp.call_tool("remember", {"content": "The VAT return for Q1 is due on 7 May."})
        listing = await mcp.list_tools()
        recall = next(t for t in listing.tools if t.name == "recall")
        assert recall.input_schema["properties"]["budget_tokens"]["anyOf"][0]["maximum"] == 200_000
        big = await mcp.call_tool("recall", {"query": "VAT return", "budget_tokens": 150_000})
        assert not big.is_error and "7 May" in text(big)
        assert error_code(await mcp.call_tool("recall", {"query": "x", "budget_tokens": 200_001})) == "invalid_input"

    drive(agent(stack, Role.writer), session)


def test_a_chat_goes_in_as_a_conversation_and_comes_back_with_its_speakers(stack: Served) -> None:
    messages = [
        {"role": "user", "name": "Ines", "content": "Did you two ever agree on a colour for the camper?"},
        {"role": "assistant", "content": "Sage green, trim white."},
    ]

    async def session(mcp: Client) -> None:
        stored = await mcp.call_tool("remember_conversation", {"messages": messages, "session_id": "van-1"})
        assert not stored.is_error, text(stored)
        assert stored.structured_content is not None and len(stored.structured_content["episode_ids"]) == 2
        retried = await mcp.call_tool("remember_conversation", {"messages": messages, "session_id": "van-1"})
        assert "0 stored, 2 already there" in text(retried)

        found = await mcp.call_tool("recall", {"query": "What colour is the camper?", "kinds": ["episode"]})
        assert found.structured_content is not None
        speakers = {r["metadata"].get("speaker") for r in found.structured_content["results"]}
        assert {"Ines", "assistant"} <= speakers

    drive(agent(stack, Role.writer), session)
