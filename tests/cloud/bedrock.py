"""A Bedrock runtime double: Titan-shaped embeddings from the real local model, scripted Converse answers.

InvokeModel: the local all-MiniLM-L6-v2 (384 dimensions) padded with zeros to the requested `dimensions`
(zero padding keeps every cosine exact). Converse: a queue of scripted answers (`script`), else the
extractive reasoner's reading of the turns in the request, returned as the forced `record_facts` tool
call with a summary of the window, so the Bedrock reasoner's parsing and the grounding check run on a
realistic answer.
"""

from __future__ import annotations

import io
import json
import re
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
from botocore.exceptions import ClientError
from botocore.response import StreamingBody

from mneme.consolidation.reasoning import ExtractiveReasoner
from mneme.language.grounding import split_speaker
from mneme.ports import Embedder
from mneme.records import Turn

_TURN = re.compile(r"^(\d+)\. \[([0-9-]+ [0-9:]+)\] (.*)$")  # "1. [2026-03-01 09:30] Maya: text"
Answer = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] | Exception


def turns_of(request: dict[str, Any]) -> list[Turn]:
    """The turns of a Converse request built by BedrockReasoner (its user message)."""
    text = request["messages"][-1]["content"][0]["text"]
    block = text.split("Turns:\n", 1)[1].split("\n\n", 1)[0]
    turns: list[Turn] = []
    for line in block.split("\n"):
        found = _TURN.match(line)
        if found:
            speaker, said = split_speaker(found.group(3))
            at = datetime.fromisoformat(found.group(2)).replace(tzinfo=UTC)
            turns.append(Turn(number=int(found.group(1)), speaker=speaker, text=said, at=at))
    return turns


def episodes_of(request: dict[str, Any]) -> list[str]:
    """The turns' texts as said ('Maya: I moved to Berlin.')."""
    return [turn.said() for turn in turns_of(request)]


def tool_answer(fact: dict[str, Any]) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "record_facts", "input": fact}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120},
        "metrics": {"latencyMs": 10},
    }


class BedrockDouble:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.script: deque[Answer] = deque()
        # consulted before the script: the first rule that answers (not None) does, for every request
        self.rules: list[Callable[[dict[str, Any]], dict[str, Any] | None]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((operation, params))
        if operation == "InvokeModel":
            return self._embed(params)
        if operation == "Converse":
            return self._converse(params)
        raise ClientError({"Error": {"Code": "ValidationException", "Message": f"{operation} not doubled"}}, operation)

    def _embed(self, params: dict[str, Any]) -> dict[str, Any]:
        request = json.loads(params["body"])
        dimensions = int(request.get("dimensions", 1024))
        vector = self.embedder.embed([request["inputText"]])[0]
        padded = np.zeros(dimensions, dtype=np.float32)
        padded[: vector.shape[0]] = vector
        raw = json.dumps({"embedding": padded.tolist(), "inputTextTokenCount": len(request["inputText"].split())})
        data = raw.encode()
        return {
            "ResponseMetadata": {"HTTPStatusCode": 200},
            "contentType": "application/json",
            "body": StreamingBody(io.BytesIO(data), len(data)),
        }

    def _converse(self, params: dict[str, Any]) -> dict[str, Any]:
        for rule in self.rules:
            if (answer := rule(params)) is not None:
                return answer
        if self.script:
            answer = self.script.popleft()
            if isinstance(answer, Exception):
                raise answer
            return answer(params) if callable(answer) else answer
        turns = turns_of(params)
        reading = ExtractiveReasoner().propose(turns)
        speakers = sorted({t.speaker for t in turns if t.speaker})
        summary = f"{' and '.join(speakers) or 'Notes'}: {len(turns)} turns" if reading.facts else None
        answer = {"summary": summary, "facts": [p.model_dump() for p in reading.facts]}
        return tool_answer(answer)
