"""A first run without a wall (issue 45): recall over a scope path nobody has written to answers 200 with no
results and a `scope_not_found` warning, over HTTP and through the SDK (sync and async); retrieve keeps its
documented 404, and a path that is not a path is still a 400. The CLI, MCP and TypeScript sides are in
test_cli.py, test_mcp.py and the TypeScript client's own tests."""

from __future__ import annotations

import asyncio

import pytest

from mneme_sdk import AsyncClient, Client, ScopeNotFound
from tests.integration.helpers import Api, assert_error

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

USER = "root.users.alice"


def test_recall_over_an_unwritten_path_is_empty_and_says_so(admin: Api) -> None:
    # Given a tenant where nobody has written about alice yet (the parent exists, alice does not)
    admin.ok("POST", "/v1/scopes", {"path": "root.users", "parents": True}, 201)
    # When an agent recalls about her, with an explain trace and a token budget
    body = {"query": "what does alice eat?", "scope": USER, "explain": True, "disclosure": {"budget_tokens": 64}}
    found = admin.ok("POST", "/v1/recall", body)
    # Then the answer is an ordinary, empty one that names the reason
    assert found["results"] == [] and found["warnings"] == ["scope_not_found"]
    assert found["context"].startswith(f"# recall: what does alice eat? (scope {USER}: nothing is remembered")
    assert found["explain"]["warnings"] == ["scope_not_found"]
    # And retrieve keeps its 404, an invalid path its 400
    assert_error(admin.post("/v1/retrieve", {"path": USER}), 404, "scope_not_found")
    assert_error(admin.post("/v1/recall", {"query": "x", "scope": "root.Users"}), 400, "invalid_path")
    # And once something is written there the warning is gone
    admin.ok("POST", "/v1/remember", {"scope": USER, "content": "Alice is vegetarian.", "create_scope": True}, 201)
    again = admin.ok("POST", "/v1/recall", {"query": "what does alice eat?", "scope": USER})
    assert again["warnings"] == [] and again["results"][0]["content"] == "Alice is vegetarian."


def test_an_existing_empty_scope_answers_without_the_warning(admin: Api) -> None:
    admin.ok("POST", "/v1/scopes", {"path": "root.users.bob", "parents": True}, 201)
    found = admin.ok("POST", "/v1/recall", {"query": "anything", "scope": "root.users.bob"})
    assert found["results"] == [] and found["warnings"] == []


def test_fetching_ids_under_an_unwritten_path_is_empty_too(admin: Api) -> None:
    found = admin.ok("POST", "/v1/recall", {"ids": ["ep_0"], "scope": USER})
    assert found["results"] == [] and found["warnings"] == ["scope_not_found"]


def test_the_sdk_per_user_loop_needs_no_try_except(admin: Api) -> None:
    # Given the SDK, sync and async, against the server
    with Client(admin.base, admin.key or "") as mneme:
        # When an agent recalls for a user nobody has written about
        hits = mneme.recall("diet", scope=USER)
        # Then it gets an empty answer with the warning, and retrieve still raises
        assert hits.results == [] and hits.warnings == ["scope_not_found"]
        with pytest.raises(ScopeNotFound):
            mneme.retrieve(USER)

    async def later() -> list[str]:
        async with AsyncClient(admin.base, admin.key or "") as mneme:
            return (await mneme.recall("diet", scope=USER)).warnings

    assert asyncio.run(later()) == ["scope_not_found"]
