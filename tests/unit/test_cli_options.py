"""Every CLI command that runs an operation takes its options as the operation's request model declares them:
the same type, choices and default, and a help text that states the model's bounds and default. The models are
the one declaration (docs/architecture.md, 'Each operation declared once'); this walks the parser and fails
when an option drifts from them, or when a command is added without saying which model it follows."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest
from pydantic import BaseModel

from mneme.cli.app import parser
from mneme.http.schemas import (
    ConsolidateRequest,
    CorrectFactRequest,
    CreateKeyRequest,
    CreateMemoryRequest,
    CreateScopeRequest,
    EditMemoryRequest,
    ForgetQuery,
    ListingQuery,
    RememberBatch,
    RenameScopeRequest,
    RetrieveRequest,
)
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.support.declared import REQUIRED, Declared, declared

SETTINGS = {"help", "config", "url", "api_key", "home", "tenant", "timeout", "quiet"}  # every command's


def same(*names: str) -> dict[str, str]:
    """Options named as their fields."""
    return {name: name for name in names}


MEMORY_FIELDS = same("summary", "tags", "triggers", "confidence", "valid_until", "review_due", "depends_on")
RECALL = same("query", "scope", "limit", "kinds", "tiers", "since", "until", "as_of", "session_id", "ids", "explain")
REMEMBER = same("scope", "create_scope", "session_id", "tier", "occurred_at", "idempotency_key", "format")
LISTING = same("scope", "since", "until", "cursor", "limit")

# command -> (request model, {option dest: model field}, options that are the CLI's own)
OPERATIONS: dict[tuple[str, ...], tuple[type[BaseModel], dict[str, str], set[str]]] = {
    ("recall",): (
        RecallRequest,
        RECALL
        | {"strictness": "scoring.strictness", "fallback": "scoring.fallback"}
        | {"expand_top": "disclosure.expand_top", "budget_tokens": "disclosure.budget_tokens"},
        {"where", "context", "json"},  # --where KEY=VALUE builds `metadata`; the others shape the output
    ),
    ("remember",): (
        RememberItem,
        REMEMBER | {"text": "content"},
        {"metadata", "file", "jsonl", "batch_size", "json"},  # --metadata is JSON text
    ),
    ("retrieve",): (RetrieveRequest, {"path": "path"}, {"json"}),
    ("consolidate",): (ConsolidateRequest, {"scope": "scopes"}, {"no_wait", "wait_timeout", "json"}),
    ("episodes", "list"): (ListingQuery, LISTING | same("session_id"), {"where", "json"}),
    ("facts", "list"): (ListingQuery, LISTING, {"where", "json"}),
    ("episodes", "forget"): (ForgetQuery, {"reason": "reason"}, {"id", "json"}),
    ("facts", "forget"): (ForgetQuery, {"reason": "reason"}, {"id", "json"}),
    ("facts", "correct"): (
        CorrectFactRequest,
        same("version", "summary", "entity", "property", "value", "confidence", "reason"),
        {"id"},
    ),
    ("memories", "create"): (
        CreateMemoryRequest,
        {"body": "body", "key": "key", "scope": "scope", "tag": "tag", **MEMORY_FIELDS},
        {"file", "json"},
    ),
    ("memories", "edit"): (
        EditMemoryRequest,
        {"body": "body", "version": "version", **MEMORY_FIELDS},
        {"memory_id", "file", "json"},
    ),
    ("scopes", "create"): (CreateScopeRequest, {"path": "path", "parents": "parents"}, {"json"}),
    ("scopes", "rename"): (RenameScopeRequest, {"path": "path", "new_path": "new_path"}, {"json"}),
    ("keys", "create"): (CreateKeyRequest, {"principal": "principal", "roles": "roles"}, {"json"}),
}
# Commands that run no request model's operation: a path id, a local tool, or a reading without parameters.
NOT_OPERATIONS = {
    ("serve",), ("mcp",), ("scopes", "list"), ("layers", "get"), ("layers", "set"), ("memories", "archive"),
    ("keys", "list"), ("keys", "revoke"), ("episodes", "show"), ("facts", "show"), ("reindex",), ("status",),
    ("config",), ("export",), ("import",), ("backup",), ("restore",), ("openapi",),
}  # fmt: skip
# Lists the CLI takes as one comma-separated value (`--tags a,b`), where the model takes a JSON array.
COMMA_LISTS = {"tags", "triggers", "depends_on", "roles"}


def leaves(node: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
            for name, child in action.choices.items():
                found |= leaves(child, (*path, name))
            return found
    return {path: node}


COMMANDS = leaves(parser())


def test_every_command_is_an_operation_with_a_request_model_or_said_not_to_be() -> None:
    assert set(COMMANDS) == set(OPERATIONS) | NOT_OPERATIONS


def options(command: tuple[str, ...]) -> dict[str, argparse.Action]:
    return {a.dest: a for a in COMMANDS[command]._actions if a.dest not in SETTINGS}


@pytest.mark.parametrize("command", sorted(OPERATIONS), ids=" ".join)
def test_each_option_is_a_model_field_or_the_clis_own(command: tuple[str, ...]) -> None:
    _, fields, own = OPERATIONS[command]
    assert set(options(command)) == set(fields) | own


CASES = [(command, dest) for command, (_, fields, _) in sorted(OPERATIONS.items()) for dest in fields]


@pytest.mark.parametrize(("command", "dest"), CASES, ids=[f"{' '.join(c)}--{d}" for c, d in CASES])
def test_each_option_has_the_models_type_choices_default_and_bounds(command: tuple[str, ...], dest: str) -> None:
    model, fields, _ = OPERATIONS[command]
    action = options(command)[dest]
    field = declared(model, fields[dest])
    assert_type(action, field, fields[dest])
    if field.choices is not None:
        assert action.choices is not None and set(action.choices) == field.choices, f"choices of --{dest}"
    else:
        assert action.choices is None, f"--{dest} offers choices the model does not"
    assert_default(action, field)
    help_text = action.help or ""
    if field.bounds is not None:
        assert field.bounds in help_text, f"the help of --{dest} says {help_text!r}, not the bounds {field.bounds}"
    if field.default is not REQUIRED and (said := re.search(r"\(default ([^);]+)[);]", help_text)) is not None:
        assert said.group(1) == str(field.default), f"--{dest}: help says default {said.group(1)}"


def assert_type(action: argparse.Action, field: Declared, name: str) -> None:
    if field.type == "boolean":
        assert isinstance(action, argparse._StoreTrueAction), f"--{action.dest} is a flag"
        return
    many = action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction)
    comma = name in COMMA_LISTS and action.type is None
    assert many == field.many or comma, f"--{action.dest}: a list is {field.many}"
    expected: Any = {"integer": int, "number": float}.get(field.type)
    if expected is not None:
        assert action.type is expected, f"--{action.dest} reads {action.type}, the model takes {field.type}"
    else:
        assert action.type is None or action.type is str or callable(action.type), action.dest


def assert_default(action: argparse.Action, field: Declared) -> None:
    """Left out, an option sends nothing (the API's default applies) or the model's own default; an option for a
    required field may give the CLI's own (the scope `root`)."""
    if field.type == "boolean":
        assert action.default is False and field.default in (False, REQUIRED), action.dest
    elif field.default is not REQUIRED and action.default is not None:
        assert action.default == field.default, f"--{action.dest} defaults to {action.default}, not {field.default}"


def test_a_remember_batch_is_at_most_the_apis_batch() -> None:
    batch_size = options(("remember",))["batch_size"]
    assert batch_size.choices is not None and batch_size.default == max(batch_size.choices)
    assert max(batch_size.choices) == RememberBatch.model_json_schema()["properties"]["items"]["maxItems"]
