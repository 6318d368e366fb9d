"""The Lambda handlers, invoked with the sample API Gateway events in events/*.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mneme
from functions import authorizer
from mneme import bootstrap
from mneme.local.events import LocalContext
from mneme.models import Role
from tests.conftest import load_event

from .helpers import bundle, invoke, opening, response_header

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

WILDCARD_ARN = "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/*/*"


def api_event(name: str, body: dict[str, Any] | None = None, *, accept: str | None = None) -> dict[str, Any]:
    """A sample event, optionally with another JSON body or Accept header (caller: acme/alice, admin)."""
    event = load_event(name)
    if body is not None:
        event["body"] = json.dumps(body)
    if accept is not None:
        event["headers"] = {**event["headers"], "Accept": accept}
        event["multiValueHeaders"] = {**event["multiValueHeaders"], "Accept": [accept]}
    return event


def call(function: str, event: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = invoke(function, event)
    assert response["statusCode"] == status, response
    return response


def created(function: str, event: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(call(function, event, 201)["body"])
    return body


@pytest.fixture
def seeded(home: Path) -> dict[str, str]:
    """Layers, a 3-level scope and scoped + tagged memories, written through the curate handler."""
    # Given the sample events for layers, a scope and a scoped and a value-targeted memory
    call("curate", api_event("put_layers.json"))
    created("curate", api_event("create_scope.json"))
    created("curate", api_event("create_memory_scoped.json"))
    tagged = created("curate", api_event("create_memory_tagged.json"))
    # and a root memory and a layer-wide memory for the clients layer
    created(
        "curate",
        api_event(
            "create_memory_scoped.json",
            {"scope": "root", "key": "house-style", "body": "Write in British English.\n\n"},
        ),
    )
    layer_wide = created(
        "curate",
        api_event(
            "create_memory_tagged.json",
            {"tag": "clients=*", "key": "client-etiquette", "body": "Address clients by name."},
        ),
    )
    return {"flat-rate-rule": tagged["memory_id"], "client-etiquette": layer_wide["memory_id"]}


GOLDEN = """\
<!-- mneme bundle for root.pennine-joinery.vat: walked root → root.pennine-joinery → \
root.pennine-joinery.vat. At each depth d (root is 0) blocks are emitted scoped, then layer-wide tagged, \
then value-targeted tagged, by key; emission order carries no precedence. Priorities: layer-wide 3d+1, \
value-targeted 3d+2, scoped 3d+3. A higher priority overrides a lower one where they conflict; \
lower-priority guidance still applies elsewhere. Equal priorities that contradict are a conflict: surface \
it, do not pick a side. Blocks whose header ends in '| pending' are unapproved work visible only to their \
author. -->

<!-- scoped: root | priority: 3 | key: house-style -->
```
Write in British English.
```

<!-- tagged: clients=* | priority: 4 | key: client-etiquette | memory_id: {client-etiquette} -->
```
Address clients by name.
```

<!-- scoped: root.pennine-joinery.vat | priority: 9 | key: vat-policy -->
```
Pennine Joinery uses the flat-rate VAT scheme.
```

<!-- tagged: services=vat | priority: 8 | key: flat-rate-rule | memory_id: {flat-rate-rule} -->
```
Check flat-rate eligibility every April.
```
"""


def golden(ids: dict[str, str]) -> str:
    text = GOLDEN
    for key, memory_id in ids.items():
        text = text.replace("{" + key + "}", memory_id)
    return text


def test_health_answers_ok_with_the_package_version(home: Path) -> None:
    # When the health event (no authorizer context) reaches the retrieve function
    response = call("retrieve", load_event("health.json"))
    # Then it answers 200 with the status and version
    assert json.loads(response["body"]) == {"status": "ok", "version": mneme.__version__}
    assert response_header(response, "Content-Type") == "application/json"


def test_retrieve_of_a_three_level_path_is_the_golden_markdown(seeded: dict[str, str]) -> None:
    # When the sample retrieve event asks for root.pennine-joinery.vat
    response = call("retrieve", load_event("retrieve.json"))
    # Then the Markdown bundle is exactly the golden text
    assert response_header(response, "Content-Type") == "text/markdown; charset=utf-8"
    assert response["body"] == golden(seeded)


def test_retrieve_with_accept_json_gives_path_blocks_and_markdown(seeded: dict[str, str]) -> None:
    # When the same request asks for JSON
    response = call("retrieve", api_event("retrieve.json", accept="application/json"))
    # Then it carries the path, canonical path, blocks in emission order and the same Markdown
    assert response_header(response, "Content-Type") == "application/json"
    body = json.loads(response["body"])
    assert set(body) == {"path", "canonical_path", "blocks", "markdown"}
    assert body["path"] == body["canonical_path"] == "root.pennine-joinery.vat"
    assert body["markdown"] == golden(seeded)
    assert [(b["kind"], b["target"], b["priority"], b["key"]) for b in body["blocks"]] == [
        ("scoped", "root", 3, "house-style"),
        ("tagged", "clients=*", 4, "client-etiquette"),
        ("scoped", "root.pennine-joinery.vat", 9, "vat-policy"),
        ("tagged", "services=vat", 8, "flat-rate-rule"),
    ]
    assert body["blocks"][3]["memory_id"] == seeded["flat-rate-rule"]
    assert not any(b["pending"] for b in body["blocks"])


def test_after_a_rename_the_old_path_retrieves_with_canonical_headers(seeded: dict[str, str]) -> None:
    # Given root.pennine-joinery renamed to root.pennine (the sample rename event)
    renamed = json.loads(call("curate", load_event("rename_scope.json"))["body"])
    assert renamed["path"] == "root.pennine" and renamed["alias"] == "root.pennine-joinery"
    # When the old path of a descendant is retrieved
    response = call("retrieve", api_event("retrieve.json", accept="application/json"))
    body = json.loads(response["body"])
    # Then it resolves, and everything shows the canonical path
    assert body["path"] == "root.pennine-joinery.vat"
    assert body["canonical_path"] == "root.pennine.vat"
    expected = golden(seeded).replace("root.pennine-joinery", "root.pennine")
    assert body["markdown"] == expected
    assert "root.pennine-joinery" not in body["markdown"]
    assert "<!-- scoped: root.pennine.vat | priority: 9 | key: vat-policy -->" in body["markdown"]
    assert body["markdown"].startswith(opening("root.pennine.vat"))


def test_an_existing_scope_with_nothing_in_it_is_an_empty_bundle(home: Path) -> None:
    # Given a scope and no memories at all
    created("curate", api_event("create_scope.json"))
    # When it is retrieved
    response = call("retrieve", load_event("retrieve.json"))
    # Then the bundle is the opening comment alone
    assert response["body"] == bundle("root.pennine-joinery.vat")


def test_retrieve_of_an_unknown_path_is_scope_not_found(home: Path) -> None:
    response = call("retrieve", load_event("retrieve.json"), 404)
    assert json.loads(response["body"])["error"]["code"] == "scope_not_found"


def test_a_memory_is_found_by_its_scope_and_key_through_the_curate_handler(seeded: dict[str, str]) -> None:
    # When find_memory.json asks for the memory create_memory_scoped.json wrote
    found = json.loads(call("curate", load_event("find_memory.json"))["body"])
    # Then it is that memory as a record, its target the scope's path
    assert (found["target"], found["key"], found["status"], found["version"]) == (
        "root.pennine-joinery.vat", "vat-policy", "published", 1,
    )  # fmt: skip
    assert found["body"] == "Pennine Joinery uses the flat-rate VAT scheme." and found["search_text"] is None
    # And a key that scope does not hold is memory_not_found; a scope that does not exist is scope_not_found
    for query, code in ((("root.pennine-joinery.vat", "nothing"), "memory_not_found"),
                        (("root.nowhere", "vat-policy"), "scope_not_found")):  # fmt: skip
        event = load_event("find_memory.json")
        event["queryStringParameters"] = dict(zip(("scope", "key"), query, strict=True))
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in event["queryStringParameters"].items()}
        assert json.loads(call("curate", event, 404)["body"])["error"]["code"] == code


def test_a_handler_event_without_authorizer_context_is_refused(home: Path) -> None:
    # Given a retrieve event that did not pass through the authorizer
    event = load_event("retrieve.json")
    event["requestContext"]["authorizer"] = None
    # Then it is a 401, not a bundle of anybody's tenant
    response = call("retrieve", event, 401)
    assert json.loads(response["body"])["error"]["code"] == "unauthorized"


# -- the authorizer --------------------------------------------------------------------------


def authorize(token: str | None) -> dict[str, Any]:
    event = load_event("authorizer_token.json", authorizationToken=token)
    result: dict[str, Any] = authorizer.handler(event, LocalContext("authorizer"))
    return result


def test_authorizer_allows_a_valid_key_with_the_caller_in_its_context(home: Path) -> None:
    # Given a key for acme/alice with writer and reader roles
    secret, _ = bootstrap.current().keys.create("acme", "alice", [Role.writer, Role.reader])
    # When the authorizer sees it
    result = authorize(f"Bearer {secret}")
    # Then it allows the whole API (a wildcard resource, so the cached policy fits every route)
    assert result["principalId"] == "acme/alice"
    assert result["policyDocument"]["Statement"] == [
        {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": WILDCARD_ARN}
    ]
    # and names tenant, principal and roles for the functions
    assert result["context"] == {"tenant": "acme", "principal": "alice", "roles": "reader,writer"}


@pytest.mark.parametrize("token", ["Bearer mnk_example", None, "", "Basic mnk_example", "Bearer "])
def test_authorizer_denies_an_unknown_or_missing_key_without_raising(home: Path, token: str | None) -> None:
    # Given a store with a real key that is not the one sent
    bootstrap.current().keys.create("acme", "alice", [Role.admin])
    # Then a Deny with the reason (the stack's ACCESS_DENIED response: 401 unauthorized), not an exception,
    # which Lambda would count as an error for the authorizer-errors alarm to page on
    result = authorize(token)
    assert result["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert result["context"] == {"reason": "unauthorized"}


def test_authorizer_denies_a_revoked_key(home: Path) -> None:
    # Given a key that was revoked
    keys = bootstrap.current().keys
    secret, record = keys.create("acme", "alice", [Role.writer])
    keys.revoke("acme", record.key_id)
    # When the authorizer sees it
    result = authorize(f"Bearer {secret}")
    # Then it is a Deny policy (the stack's ACCESS_DENIED response: 401 key_revoked) that names no tenant
    assert result["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert result["policyDocument"]["Statement"][0]["Resource"] == WILDCARD_ARN
    assert "tenant" not in result["context"]
    assert result["context"]["reason"] == "key_revoked"


def test_a_wrong_method_is_a_405_with_an_allow_header(home: Path) -> None:
    # Given the health event sent as a DELETE
    event = {**load_event("health.json"), "httpMethod": "DELETE"}
    # Then 405 in the error shape, and the Allow header names the methods the path takes
    response = call("retrieve", event, 405)
    assert json.loads(response["body"])["error"]["details"] == {"allow": ["GET"]}
    assert response_header(response, "Allow") == "GET"
