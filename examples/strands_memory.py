"""A Strands Agents agent whose long-term memory is Mneme, with no LLM: memory flows from one conversation to the next.

    make serve                                   # in another shell: Mneme on http://127.0.0.1:8080
    make examples                                # once: the examples' packages (strands-agents among them)
    .venv/bin/python examples/strands_memory.py

Each conversation is a new `Agent` with a new session: it has none of the earlier messages, only what
Mneme kept. `MnemeMemoryHooks` remembers every user and assistant turn (with its session and speaker) and,
before each model call, adds what Mneme recalls about the user's message to that call's input; the
tools from `mneme_tools` (remember, recall, forget, list) let the model look things up itself. The model
is a stand-in that answers a question with the first thing Mneme put in front of it and calls the `list`
tool when asked what it remembers, so what you see is exactly what came back from Mneme. With a real
model (`Agent(model=BedrockModel(...))`, Strands' default) the wiring is the same.

MNEME_URL and MNEME_API_KEY choose another API (default: the local one and .mneme/admin.key).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterable
from pathlib import Path
from typing import Any

from strands import Agent
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent

from mneme_sdk import Client
from mneme_sdk.strands import MnemeMemoryHooks, mneme_tools

FENCED = re.compile(r"^(`{3,})\n(.*?)\n\1$", re.S | re.M)  # a body in Mneme's context pack


class MemoryEchoModel(Model):
    """A stand-in for an LLM (Strands' model interface, no network): statements get "Noted.", a question gets
    the first body Mneme put after it, and "what do you remember" a call to the `list` tool."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError("this example gives no structured output")

    async def stream(self, messages: Messages, *args: Any, **kwargs: Any) -> AsyncIterable[StreamEvent]:
        yield {"messageStart": {"role": "assistant"}}
        last = messages[-1]["content"]
        said = last[0].get("text", "")
        if "toolResult" in last[0]:
            listed = "".join(part.get("text", "") for part in last[0]["toolResult"]["content"])
            yield {"contentBlockDelta": {"delta": {"text": "(from the list tool)\n" + listed}}}
        elif said.startswith("What do you remember"):
            start = {"toolUseId": "call-1", "name": "list"}
            yield {"contentBlockStart": {"start": {"toolUse": start}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        else:
            added = "\n".join(block.get("text", "") for block in last[1:])
            found = FENCED.search(added)
            answer = "Noted." if not said.endswith("?") else "I have no memory of that."
            if said.endswith("?") and found:
                answer = f"(from memory) {found.group(2)}"
            yield {"contentBlockDelta": {"delta": {"text": answer}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def main() -> None:
    url = os.environ.get("MNEME_URL", "http://127.0.0.1:8080")
    key = os.environ.get("MNEME_API_KEY") or Path(".mneme/admin.key").read_text().strip()
    mneme = Client(url, key)
    user = f"ada-{uuid.uuid4().hex[:6]}"  # a new user each run, so the output is the same every time
    scope = f"root.examples.users.{user}"  # one scope per user: nobody else's memory reaches her agent

    conversations = {
        "chat-1": ["I am vegetarian and I live in Leeds.", "I prefer trains to planes."],
        "chat-2": ["What should I eat tonight?"],
        "chat-3": ["Should I take the train to London?", "What do you remember about me?"],
    }
    for chat, messages in conversations.items():
        hooks = MnemeMemoryHooks(mneme, scope, session_id=f"{user}-{chat}", user="ada")
        agent = Agent(model=MemoryEchoModel(), hooks=[hooks], tools=mneme_tools(mneme, scope), callback_handler=None)
        for message in messages:
            answer = str(agent(message)).strip()
            print(f"[{chat}] ada: {message}\n[{chat}] agent: {answer}")


if __name__ == "__main__":
    main()
