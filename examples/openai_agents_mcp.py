"""Mneme as an MCP server for the OpenAI Agents SDK (`openai-agents`), with no LLM and no API key.

    .venv/bin/python examples/openai_agents_mcp.py

It starts `mneme mcp` on stdio (embedded mode: the local store in ./.mneme, working scope
root.examples.agents; with MNEME_URL and MNEME_API_KEY set, the API they name), lists its tools,
calls `remember` directly, then runs an `Agent` whose model is a scripted stand-in: it asks for the
`recall` tool, and the SDK calls Mneme through MCP and hands the answer back. With an OpenAI key,
`Agent(..., model="gpt-4.1-mini")` in place of `model=ScriptedModel()` is the same wiring.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.mcp import MCPServerStdio, MCPServerStdioParams
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

SCOPE = "root.examples.agents"


def mneme_command() -> str:
    """The `mneme` next to this Python (the repository's .venv), else the one on PATH."""
    beside = Path(sys.executable).with_name("mneme")
    return str(beside) if beside.exists() else shutil.which("mneme") or "mneme"


class ScriptedModel(Model):
    """A stand-in for an LLM: first it calls `recall`, then it answers with what the tool returned."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        outputs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outputs:
            arguments = json.dumps({"query": "which VAT scheme is Pennine Joinery on?", "scope": SCOPE, "limit": 3})
            call = ResponseFunctionToolCall(type="function_call", call_id="call-1", name="recall", arguments=arguments)
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        output = outputs[-1]["output"]  # the tool's content: text, or a list of content parts
        found = output if isinstance(output, str) else "".join(part.get("text", "") for part in output)
        text = ResponseOutputText(type="output_text", text=f"Mneme recalled:\n{found}", annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg-1", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example does not stream")


async def main() -> None:
    set_tracing_disabled(True)  # nothing to send traces to without an OpenAI key
    env = {**os.environ, "MNEME_SCOPE": SCOPE}
    params: MCPServerStdioParams = {"command": mneme_command(), "args": ["mcp"], "env": env}
    # The first call loads the embedding model: allow it more than the SDK's default 5 s
    async with MCPServerStdio(
        name="mneme", params=params, cache_tools_list=True, client_session_timeout_seconds=120
    ) as mneme:
        tools = await mneme.list_tools()
        print("Mneme's tools:", ", ".join(tool.name for tool in tools))

        stored = await mneme.call_tool(
            "remember",
            {"content": "Pennine Joinery is on the flat-rate VAT scheme.", "scope": SCOPE, "create_scope": True,
             "idempotency_key": "example-vat-scheme"},
        )  # fmt: skip
        print("remember:", stored.content[0].text)  # type: ignore[union-attr]

        agent = Agent(
            name="bookkeeper",
            instructions="Use Mneme, your long-term memory: recall before answering.",
            mcp_servers=[mneme],
            model=ScriptedModel(),
        )
        result = await Runner.run(agent, "Which VAT scheme is Pennine Joinery on?")
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
