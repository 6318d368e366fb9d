"""`mneme serve` runs each function's one resolver on many threads: no request may see another's.

Powertools keeps the request on its `BaseRouter` class (shared by every resolver of the process); a
request that read it after another thread had set it served the other request's body and caller.
"""

from __future__ import annotations

import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mneme.http.api import build_resolver, caller
from mneme.observability import logger
from tests.conftest import load_event


def retrieve_event(tenant: str, path: str) -> dict[str, Any]:
    event = load_event("retrieve.json", body=json.dumps({"path": path}))
    event["requestContext"] = {
        **event["requestContext"],
        "authorizer": {"tenant": tenant, "principal": f"{tenant}-agent", "roles": "reader"},
    }
    return event


def test_concurrent_requests_on_one_resolver_each_see_their_own_event_and_caller() -> None:
    # Given one resolver whose route waits until every request is inside it
    app = build_resolver()
    inside = threading.Barrier(4, timeout=10)

    @app.post("/v1/retrieve")
    def echo() -> dict[str, Any]:
        inside.wait()  # every request has been admitted and routed before any answers
        return {"path": app.current_event.json_body["path"], "tenant": caller(app).tenant}

    # When four tenants call it at the same time
    tenants = ["acme", "globex", "initech", "umbrella"]
    with ThreadPoolExecutor(len(tenants)) as pool:
        answers = list(pool.map(lambda t: app.resolve(retrieve_event(t, f"root.{t}"), None), tenants))

    # Then each answer is its own request's body and caller
    assert [json.loads(a["body"]) for a in answers] == [{"path": f"root.{t}", "tenant": t} for t in tenants]


def test_concurrent_requests_log_their_own_tenant() -> None:
    # Given one resolver whose route logs once every request is inside it
    app = build_resolver()
    inside = threading.Barrier(4, timeout=10)

    @app.post("/v1/retrieve")
    def log_path() -> dict[str, Any]:
        inside.wait()
        logger.info("serving", extra={"path": app.current_event.json_body["path"]})
        return {}

    # When four tenants call it at the same time
    tenants = ["acme", "globex", "initech", "umbrella"]
    out, handler, level = io.StringIO(), logger.registered_handler, logger.log_level
    stream = handler.setStream(out)  # type: ignore[attr-defined]
    logger.setLevel("INFO")
    try:
        with ThreadPoolExecutor(len(tenants)) as pool:
            list(pool.map(lambda t: app.resolve(retrieve_event(t, f"root.{t}"), None), tenants))
    finally:
        handler.setStream(stream)  # type: ignore[attr-defined]
        logger.setLevel(level)

    # Then every record names the tenant whose request wrote it
    records = [json.loads(line) for line in out.getvalue().splitlines() if '"serving"' in line]
    assert sorted((r["path"], r["tenant"], r["principal"]) for r in records) == [
        (f"root.{t}", t, f"{t}-agent") for t in tenants
    ]
