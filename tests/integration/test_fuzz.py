"""Property-based fuzzing of the local server from docs/openapi.json with schemathesis.

For every operation, in positive (schema-valid) and negative (schema-violating) generation, a bounded
number of examples is sent with an admin key, and every answer must:
- never be a 5xx;
- conform to the response schema the document declares (schemathesis `response_schema_conformance`);
- on success, parse as the typed model the Python client uses for that route;
- on failure, use the error shape `{"error": {"code", "message", "details"?}}` with a documented status.

Deterministic: hypothesis runs derandomized (the examples derive from the test, not from a random seed)
and without its example database; MNEME_FUZZ_SEED=<int> explores other examples instead. Bounded:
MNEME_FUZZ_EXAMPLES examples per operation and mode (default 25, about 45 s here), no shrinking.
Every failing example is collected and reported with method, path, query and body.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from pydantic import BaseModel, TypeAdapter, ValidationError
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup

from mneme import cli
from mneme.http.views import RenamePreview
from mneme_sdk import Client as MnemeClient
from mneme_sdk.models import (
    Bundle,
    ChangesPage,
    CreatedKey,
    KeyView,
    MemoryRecord,
    MemoryView,
    RecallResponse,
    Remembered,
    RunStarted,
    RunView,
    ScopeView,
)

pytestmark = pytest.mark.filterwarnings("ignore")

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
# Every check schemathesis has (status code, content type, headers and response schema conformance,
# positive/negative data, missing headers, ignored auth, unsupported methods, ...). A valid body can still
# break a rule the schema cannot state (a scope path that does not exist, a key already taken): those
# documented refusals count as accepting the data.
# Schema-violating data must be refused with a 4xx (413 for content over its limit; never a 5xx).
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "409", "413"]},
            "negative_data_rejection": {"expected-statuses": ["400", "401", "403", "404", "405", "409", "413", "415"]},
        }
    }
)
SCHEMA = schemathesis.openapi.from_path(str(DOCUMENT), config=CONFIG)
OPERATIONS = sorted(
    (method.upper(), path)
    for path, operations in json.loads(DOCUMENT.read_text())["paths"].items()
    for method in operations
)
EXAMPLES = int(os.environ.get("MNEME_FUZZ_EXAMPLES", "25"))
SEED = int(os.environ["MNEME_FUZZ_SEED"]) if os.environ.get("MNEME_FUZZ_SEED") else None  # explore beyond CI
ERROR_STATUSES = {400, 401, 403, 404, 405, 409, 413, 415, 429}


class Batch(BaseModel):
    episode_ids: list[str]
    items: list[Remembered]


class Scopes(BaseModel):
    scopes: list[ScopeView]


class Keys(BaseModel):
    keys: list[KeyView]


class Layers(BaseModel):
    layers: dict[int, str]


def _remember(body: Any) -> None:
    (Batch if isinstance(body, dict) and "items" in body else Remembered).model_validate(body)


# The typed model of a route's success answer, where the client has one (the document declares `{"title": "Return"}`)
SUCCESS: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("GET", "/v1/changes"): ChangesPage.model_validate,
    ("GET", "/v1/health"): TypeAdapter(dict[str, str]).validate_python,
    ("POST", "/v1/retrieve"): Bundle.model_validate,  # only for JSON answers (Accept: application/json)
    ("POST", "/v1/remember"): _remember,
    ("POST", "/v1/recall"): RecallResponse.model_validate,
    ("POST", "/v1/consolidate"): RunStarted.model_validate,
    ("GET", "/v1/consolidations/{run_id}"): RunView.model_validate,
    ("GET", "/v1/scopes"): Scopes.model_validate,
    ("POST", "/v1/scopes"): ScopeView.model_validate,
    ("POST", "/v1/scopes/rename"): TypeAdapter(ScopeView | RenamePreview).validate_python,
    ("GET", "/v1/layers"): Layers.model_validate,
    ("PUT", "/v1/layers"): Layers.model_validate,
    ("POST", "/v1/memories"): MemoryRecord.model_validate,
    ("PATCH", "/v1/memories/{memory_id}"): MemoryRecord.model_validate,
    ("POST", "/v1/memories/{memory_id}/archive"): MemoryView.model_validate,
    ("POST", "/v1/keys"): CreatedKey.model_validate,
    ("GET", "/v1/keys"): Keys.model_validate,
    ("POST", "/v1/keys/{key_id}/revoke"): TypeAdapter(dict[str, Any]).validate_python,
}


def test_every_route_the_client_types_is_documented() -> None:
    assert set(SUCCESS) <= set(OPERATIONS)


@pytest.fixture
def target(server: str, home: Path) -> tuple[str, dict[str, str]]:
    """The local server with a small tree, layers, a memory and an episode; and an admin's headers."""
    key_file, _ = cli.ensure_first_run()
    key = key_file.read_text().strip()
    admin = MnemeClient(server, key)
    admin.put_layers({1: "clients", 2: "services"})
    admin.create_scope("root.acme.vat", parents=True)
    admin.create_memory("vat-policy", "Flat rate.", scope="root.acme.vat")
    admin.remember("root.acme", "Acme's year end is 31 March.")
    return server, {"Authorization": f"Bearer {key}"}


def _problem(response: schemathesis.Response, method: str, path: str) -> str | None:
    """What is wrong with an answer beyond schemathesis' checks, or None."""
    status = response.status_code
    content_type = (response.headers.get("content-type") or [""])[0]
    if status < 400:
        if not content_type.startswith("application/json"):
            return None if (method, path) == ("POST", "/v1/retrieve") else f"success as {content_type}"
        try:
            body = response.json()
        except ValueError:
            return "success body is not JSON"
        try:
            SUCCESS.get((method, path), lambda _: None)(body)
        except ValidationError as e:
            return f"success body does not match the client model: {str(e)[:300]}"
        return None
    if status not in ERROR_STATUSES:
        return f"undocumented error status {status}"
    try:
        body = response.json()
        error = body["error"]
        assert set(body) == {"error"}
        assert {"code", "message"} <= set(error) <= {"code", "message", "details"}
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str) and error["message"]
    except (ValueError, KeyError, TypeError, AssertionError):
        return "error answer without the error shape"
    return None


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"])
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_fuzz(target: tuple[str, dict[str, str]], method: str, path: str, mode: GenerationMode) -> None:
    base_url, headers = target
    operation = SCHEMA[path][method]
    failures: list[str] = []
    tried = 0

    def one(case: schemathesis.Case) -> None:
        nonlocal tried
        tried += 1
        if mode is GenerationMode.NEGATIVE and any(value in ([], {}) for value in (case.query or {}).values()):
            return  # an empty list or object is not sent at all: what reaches the server may be valid
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        sent = f"{case.method} {case.formatted_path} query={case.query} body={json.dumps(case.body, default=str)[:500]}"
        try:
            case.validate_response(response, headers=headers, transport_kwargs={"base_url": base_url, "timeout": 30})
        except (AssertionError, FailureGroup) as e:  # collect every failing example, not only the first
            failures.append(f"{sent} → {response.status_code} {response.text[:300]}: {str(e)[:300]}")
            return
        problem = _problem(response, method, path)
        if problem:
            failures.append(f"{sent} → {response.status_code} {response.text[:300]}: {problem}")

    fuzz = settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=SEED is None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )(given(case=operation.as_strategy(generation_mode=mode))(one))
    if SEED is not None:
        fuzz = seed(SEED)(fuzz)
    try:
        fuzz()
    except Unsatisfiable:  # nothing can violate this operation's schema (e.g. GET /v1/health)
        pytest.skip(f"no {mode.value} examples for {method} {path}")
    assert tried > 0
    print(f"fuzz {method} {path} {mode.value}: {tried} examples, {len(failures)} failing")  # `pytest -s` for counts
    assert not failures, f"{len(failures)} failing example(s) of {tried}:\n" + "\n".join(failures[:20])
