"""The MCP tools over records (`list`, `forget`, `correct_fact`) in `mneme mcp` on stdio (embedded mode): what an
agent reads in their descriptions, a writer forgetting an episode but not a fact, an approver correcting and
forgetting a fact."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.integration.test_mcp import drive, mcp_env, structured, text


def test_a_writer_lists_and_forgets_an_episode_but_not_a_fact(tmp_path: Path) -> None:
    env = mcp_env(tmp_path, MNEME_HOME=str(tmp_path / "store"), MNEME_SCOPE="root.users")

    async def session(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "forget" in (tools["forget"].description or "") and "approver" in (tools["forget"].description or "")
        assert tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint
        assert tools["list"].annotations is not None and tools["list"].annotations.read_only_hint
        assert tools["list"].input_schema["properties"]["scope"]["default"] == "root.users"
        assert tools["correct_fact"].input_schema["required"] == ["id", "version"]
        said = []
        for n in range(3):
            done = await client.call_tool("remember", {"content": f"Ines: I am vegetarian and cook lentils, note {n}.",
                                                       "create_scope": True, "metadata": {"user": "ines"}})  # fmt: skip
            said.append(structured(done)["episode_id"])
        assert structured(await client.call_tool("consolidate", {}))["status"] == "succeeded"
        listed = await client.call_tool("list", {"metadata": {"user": "ines"}, "limit": 2})
        assert [e["id"] for e in structured(listed)["episodes"]] == said[:0:-1]
        assert "More: call list again with cursor=" in text(listed)
        facts = structured(await client.call_tool("list", {"kind": "facts"}))["facts"]
        assert facts

        forgot = await client.call_tool("forget", {"id": said[0], "reason": "the user asked"})
        assert structured(forgot)["forgotten"] and text(forgot).startswith(f"Forgot episode {said[0]} for good")
        recalled = structured(await client.call_tool("recall", {"query": "vegetarian"}))["results"]
        assert said[0] not in [r["id"] for r in recalled]
        denied = await client.call_tool("forget", {"id": facts[0]["id"]})
        assert denied.is_error and text(denied).startswith("forbidden: ")
        odd = await client.call_tool("forget", {"id": "mem_123"})
        assert odd.is_error and text(odd).startswith("invalid_input: ")

    drive(env, tmp_path, session)


def test_an_approver_corrects_and_forgets_a_fact(tmp_path: Path) -> None:
    env = mcp_env(tmp_path, MNEME_HOME=str(tmp_path / "store"), MNEME_ROLES="approver", MNEME_SCOPE="root.acme")

    async def session(client: Client) -> None:
        for n in range(3):
            text_ = f"Acme's billing plan is Basic, ticket {n}."
            structured(await client.call_tool("remember", {"content": text_, "create_scope": True}))
        structured(await client.call_tool("consolidate", {}))
        [fact] = [
            f for f in structured(await client.call_tool("list", {"kind": "facts"}))["facts"] if f["tier"] == "raw"
        ]
        corrected = await client.call_tool("correct_fact", {"id": fact["id"], "version": fact["version"],
                                                            "value": "Premium", "reason": "upgraded"})  # fmt: skip
        assert structured(corrected)["value"] == "Premium" and "now version 2" in text(corrected)
        stale = await client.call_tool("correct_fact", {"id": fact["id"], "version": 1, "value": "Gold"})
        assert stale.is_error and text(stale).startswith("stale_version: ")
        assert structured(await client.call_tool("forget", {"id": fact["id"]}))["kind"] == "fact"
        facts = structured(await client.call_tool("list", {"kind": "facts"}))["facts"]
        assert fact["id"] not in [f["id"] for f in facts]

    drive(env, tmp_path, session)
