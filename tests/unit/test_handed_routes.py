"""Routes receive their services: every function module builds its app (and consolidate its scheduled
handlers, the authorizer its key lookup) over what its caller hands in, so a test passes its own services
instead of patching a global; and `mneme serve`'s gateway serves the services it is handed."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from mneme import bootstrap
from mneme.bootstrap import Services
from mneme.http import routes
from mneme.local.events import LocalContext, proxy_event, token_event
from tests.conftest import FixedClock, embedded

CALLER = {"tenant": "acme", "principal": "alice", "roles": "reader,writer,admin", "principalId": "alice"}


def graph(home: Path) -> Services:
    home.mkdir()
    return embedded(home, FixedClock())


def call(app: Any, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    route, params = routes.resolve(method, path)
    text = json.dumps(body) if body is not None else None
    headers = {"content-type": "application/json"} if body is not None else {}
    answer = app.resolve(proxy_event(route, method, path, "", headers, text, params, CALLER), LocalContext("test"))
    return answer["statusCode"], json.loads(answer["body"])


@pytest.fixture
def untouched() -> Any:
    """The process-wide services stay unbuilt."""
    bootstrap.reset()
    yield
    assert bootstrap._built.cache_info().currsize == 0
    bootstrap.reset()


def test_each_app_serves_the_services_it_was_given(tmp_path: Path, untouched: None) -> None:
    from functions import recall, remember

    # Given two service graphs on two homes, and the remember and recall routes built over each
    first, second = graph(tmp_path / "first"), graph(tmp_path / "second")
    # When an episode is remembered through the routes given the first
    told = {"content": "the kiln fires at 1240 degrees", "scope": "root.studio", "create_scope": True}
    status, _ = call(remember.build_app(lambda: first), "POST", "/v1/remember", told)
    assert status == 201
    # Then the recall routes given the first find it, those given the second do not
    asked = {"query": "kiln degrees", "scope": "root.studio"}
    status, found = call(recall.build_app(lambda: first), "POST", "/v1/recall", asked)
    assert status == 200 and any("kiln" in (r.get("content") or "") for r in found["results"]), found
    status, missing = call(recall.build_app(lambda: second), "POST", "/v1/recall", asked)
    assert status == 404 or not missing.get("results"), missing
    first.close()
    second.close()


@pytest.mark.parametrize("name", routes.FUNCTIONS)
def test_an_app_built_over_given_services_declares_what_the_lambda_entry_point_serves(name: str) -> None:
    module = importlib.import_module(f"functions.{name}")
    given = module.build_app(bootstrap.current)
    assert given is not module.app
    assert given.get_openapi_json_schema() == module.app.get_openapi_json_schema()


def test_the_scheduled_consolidation_and_the_authorizer_take_what_they_are_given(
    tmp_path: Path, untouched: None
) -> None:
    from functions.authorizer import authorizer
    from functions.consolidate import schedule_target
    from mneme.services.keys import Authenticator
    from mneme.services.remember import RememberItem
    from tests.conftest import principal

    # Given services whose tenant acme has a dirty scope and an API key
    services = graph(tmp_path / "home")
    item = RememberItem(content="glaze cone six", scope="root.studio", create_scope=True)
    services.remember.remember(principal(), [item])
    secret, _ = services.keys.create("acme", "alice", ["reader"])
    # When the scheduled target and the authorizer run over them
    ran = schedule_target(lambda: services)({"source": "aws.scheduler"}, LocalContext("schedule"))
    route, _ = routes.resolve("GET", "/v1/keys")
    event = token_event(route, "GET", "/v1/keys", f"Bearer {secret}")
    allowed = authorizer(lambda: Authenticator(services.store), lambda: None)(event, LocalContext("authorizer"))
    # Then a run was started for acme, and acme's key is allowed as alice
    assert [run["tenant"] for run in ran["runs"]] == ["acme"]
    assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert allowed["context"]["tenant"] == "acme" and allowed["principalId"] == "acme/alice"
    services.close()


def test_the_local_gateway_authorizes_and_serves_over_the_services_it_is_handed(
    tmp_path: Path, untouched: None
) -> None:
    from mneme.errors import Unauthorized
    from mneme.local.gateway import Gateway

    # Given two service graphs, each with its own admin key, and a gateway handed the first
    first, second = graph(tmp_path / "first"), graph(tmp_path / "second")
    mine, _ = first.keys.create("acme", "alice", ["admin"])
    theirs, _ = second.keys.create("acme", "alice", ["admin"])
    gateway = Gateway(lambda: first)
    route, params = routes.resolve("POST", "/v1/remember")
    # When each key calls remember through it
    caller = gateway.authorize(route, "POST", "/v1/remember", f"Bearer {mine}")
    with pytest.raises(Unauthorized):
        gateway.authorize(route, "POST", "/v1/remember", f"Bearer {theirs}")
    told = json.dumps({"content": "the kiln fires at 1240 degrees", "scope": "root.studio", "create_scope": True})
    headers = {"content-type": "application/json"}
    event = proxy_event(route, "POST", "/v1/remember", "", headers, told, params, caller)
    answer = gateway.invoke(route, event)
    # Then only the first store's key is let in, and the episode is stored in the first store alone
    assert answer["statusCode"] == 201, answer
    assert caller is not None and caller["tenant"] == "acme"
    episode_id = json.loads(answer["body"])["episode_id"]
    assert first.store.get_episodes("acme", [episode_id]) and not second.store.get_episodes("acme", [episode_id])
    first.close()
    second.close()
