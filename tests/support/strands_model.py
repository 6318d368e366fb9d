"""A Strands Agents model with no network, for tests: it implements Strands' `Model` interface (`stream`
yields the provider-neutral stream events the agent loop consumes) and plays a script, one step a call.
Strands ships no test model in its package, so this is the stand-in: every call's input is kept
(`inputs`) so a test can read exactly what the agent loop put in front of the model."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any

from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent


@dataclass
class CallTool:
    name: str
    input: dict[str, Any]


Step = CallTool | str | Callable[[Messages], str]  # a tool call, a fixed answer, or an answer from the input


@dataclass
class ScriptedModel(Model):
    script: list[Step]
    inputs: list[Messages] = field(default_factory=list)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError("the scripted model gives no structured output")

    async def stream(self, messages: Messages, *args: Any, **kwargs: Any) -> AsyncIterable[StreamEvent]:
        self.inputs.append(messages)
        step = self.script.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, CallTool):
            tool_use_id = f"call-{len(self.inputs)}"
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id, "name": step.name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(step.input)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        yield {"contentBlockDelta": {"delta": {"text": step if isinstance(step, str) else step(messages)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def last_user_text(messages: Messages) -> str:
    """Every text block of the input's latest user message (what the user said, then anything folded in)."""
    user = next(m for m in reversed(messages) if m["role"] == "user")
    return "\n".join(block["text"] for block in user["content"] if "text" in block)


def tool_text(messages: Messages) -> str:
    """The text of the latest tool result in the input."""
    for message in reversed(messages):
        for block in message["content"]:
            if "toolResult" in block:
                return "".join(part.get("text", "") for part in block["toolResult"]["content"])
    raise AssertionError("no tool result in the model's input")
