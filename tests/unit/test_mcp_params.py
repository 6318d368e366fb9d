"""The MCP tools' input schemas are their request models' fields, read through the `mcp` package's own in-memory
client: each property has the model's type, bounds, default and description, except what a tool declares it
changes (below, with the reason in `mneme.mcp.server`). A bad value is refused before anything is sent, as the
API's `invalid_input` error naming the argument."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import Tool
from pydantic import BaseModel

from mneme.http.schemas import (
    ConsolidateRequest,
    CorrectFactRequest,
    CreateMemoryRequest,
    ForgetQuery,
    ListingQuery,
    RetrieveRequest,
)
from mneme.mcp.params import model_field
from mneme.mcp.server import build_server
from mneme.services.recall import RecallRequest
from mneme.services.remember import Conversation, RememberItem
from mneme_sdk import Client as MnemeClient
from tests.support.declared import field_schema

NOWHERE = "http://127.0.0.1:9"  # a call that reached the network would fail with `unavailable`, not `invalid_input`
WORKING = "root.projects.alpha"
SCOPE = {"default", "description", "pattern"}  # the working scope, and the path grammar checked and explained
CREATE_SCOPE = {"default", "description", "nullable"}  # left out: true in the working scope only


def same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


CORRECTION = same("version", "value", "summary", "entity", "property", "reason")
# tool -> (request model, {parameter: model field}, {parameter: what the tool changes}, the tool's own parameters)
TOOLS: dict[str, tuple[type[BaseModel] | None, dict[str, str], dict[str, set[str]], set[str]]] = {
    "retrieve": (RetrieveRequest, same("path"), {"path": SCOPE}, set()),
    "remember": (
        RememberItem,
        same("content", "scope", "session_id", "occurred_at", "metadata", "idempotency_key", "create_scope"),
        {"scope": SCOPE, "create_scope": CREATE_SCOPE},
        set(),
    ),
    "remember_conversation": (
        Conversation,
        same("messages", "session_id", "scope", "occurred_at", "metadata", "create_scope"),
        {"scope": SCOPE, "create_scope": CREATE_SCOPE},
        set(),
    ),
    "recall": (
        RecallRequest,
        same("query", "scope", "limit", "kinds", "since", "until", "session_id", "delta", "ids", "metadata")
        | {"budget_tokens": "disclosure.budget_tokens", "strictness": "scoring.strictness"},
        # the agent's session is where delivered bodies are remembered, and collapsing them is the default
        {"scope": SCOPE, "session_id": {"description"}, "delta": {"default", "description"}},
        set(),
    ),
    "consolidate": (ConsolidateRequest, same("scopes"), {}, {"wait"}),
    "propose_memory": (
        CreateMemoryRequest,
        same("key", "body", "scope", "tag", "summary", "tags", "valid_until"),
        {"scope": {"description", "pattern"}},  # default: the working scope
        set(),
    ),
    "list": (
        ListingQuery,
        same("scope", "session_id", "since", "until", "cursor", "limit"),
        {"scope": {"default"}, "limit": {"default"}},  # an agent's page is 20, not 50
        {"kind", "metadata"},  # metadata: the listing's `metadata.<key>` query as one object
    ),
    "forget": (ForgetQuery, same("reason"), {}, {"id"}),
    "correct_fact": (CorrectFactRequest, CORRECTION, {}, {"id"}),
    "archive_memory": (None, {}, {}, {"memory_id"}),  # a path id
    "list_scopes": (None, {}, {}, {"path"}),  # `GET /v1/scopes?path=`, no request model
}


def listed_tools() -> dict[str, Tool]:
    found: dict[str, Tool] = {}

    async def main() -> None:
        async with Client(build_server(MnemeClient(NOWHERE, "key", max_retries=0), scope=WORKING)) as mcp:
            found.update({tool.name: tool for tool in (await mcp.list_tools()).tools})

    anyio.run(main)
    return found


LISTED = listed_tools()


def flat(prop: dict[str, Any]) -> dict[str, Any]:
    """A property without its title, an optional value's `anyOf [X, null]` as X and `nullable`."""
    prop = {k: v for k, v in prop.items() if k != "title"}
    if "anyOf" in prop:
        branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
        if len(branches) == 1 and len(branches) < len(prop.pop("anyOf")):
            prop = {**branches[0], **prop, "nullable": True}
    return prop


def test_every_tool_is_declared() -> None:
    assert set(LISTED) == set(TOOLS)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_each_parameter_is_a_model_field_or_the_tools_own(tool: str) -> None:
    _, fields, _, own = TOOLS[tool]
    assert set(LISTED[tool].input_schema["properties"]) == set(fields) | own


CASES = [(tool, name) for tool, (_, fields, _, _) in sorted(TOOLS.items()) for name in fields]


@pytest.mark.parametrize(("tool", "name"), CASES, ids=[f"{t}.{n}" for t, n in CASES])
def test_each_parameter_has_the_models_type_bounds_default_and_description(tool: str, name: str) -> None:
    model, fields, changed, _ = TOOLS[tool]
    assert model is not None
    prop, required = field_schema(model, fields[name])
    schema = LISTED[tool].input_schema
    ours, theirs = flat(schema["properties"][name]), flat(prop)
    if (factory := model_field(model, fields[name]).default_factory) is not None:
        theirs["default"] = factory()  # type: ignore[call-arg]  # a schema shows no factory; the tool its value
    for key in changed.get(name, set()):
        ours.pop(key, None)
        theirs.pop(key, None)
    assert ours == theirs
    if "default" not in changed.get(name, set()):
        assert (name in schema.get("required", [])) == required
    if "description" not in changed.get(name, set()):
        assert ours.get("description"), f"{tool}.{name} has no description: give its model field one"


def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str, dict[str, Any] | None]:
    result: list[Any] = []

    async def main() -> None:
        async with Client(build_server(MnemeClient(NOWHERE, "key", max_retries=0), scope=WORKING)) as mcp:
            result.append(await mcp.call_tool(tool, arguments))

    anyio.run(main)
    answer = result[0]
    return answer.is_error, answer.content[0].text, answer.structured_content


@pytest.mark.parametrize(
    ("tool", "arguments", "names"),
    [
        ("recall", {"query": "x", "limit": 0}, "limit: Input should be greater than or equal to 1"),
        ("recall", {"query": "x", "limit": 201}, "limit: Input should be less than or equal to 200"),
        ("recall", {"query": "x", "strictness": "loose"}, "strictness: Input should be 'precision', 'balanced'"),
        ("list", {"limit": 500}, "limit: Input should be less than or equal to 200"),
        ("consolidate", {"wait": "yes"}, "wait: Input should be a valid boolean"),
        ("consolidate", {"scopes": ["root"] * 101}, "scopes: List should have at most 100 items"),
        ("correct_fact", {"id": "fa_1234", "version": 0}, "version: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_value_is_refused_before_anything_is_sent_naming_the_argument(
    tool: str, arguments: dict[str, Any], names: str
) -> None:
    is_error, text, body = call(tool, arguments)
    assert is_error and text.startswith(f"invalid_input: {names}"), text
    assert body is not None and body["error"]["code"] == "invalid_input" and body["error"]["status"] == 400
