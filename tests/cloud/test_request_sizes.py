"""Request sizes through the deployed shape: API Gateway takes up to 10 MB, Lambda's synchronous invoke up
to 6 MB of event, in which the body is a JSON string (each quote and backslash escaped once more). Every
body remember admits must fit in that event, or the caller gets the gateway's 5xx instead of an answer."""

from __future__ import annotations

import json

from mneme.http.routes import ROUTES
from tests.cloud.conftest import Cloud

QUOTES = '"' * 32 * 1024  # an episode's content at its 32 KiB limit, every byte escaped in JSON


def test_the_largest_body_remember_admits_reaches_the_function_however_it_is_escaped(cloud: Cloud, admin: str) -> None:
    limit = next(r.max_body for r in ROUTES if r.path == "/v1/remember")
    item = json.dumps({"scope": "root", "content": QUOTES})
    count = (limit - len('{"items": []}')) // (len(item) + 2)
    body = json.dumps({"items": [json.loads(item)] * count})
    assert limit - len(item) < len(body) <= limit  # at the limit, and every second byte a backslash
    response = cloud.gateway.request("POST", "/v1/remember", body=body, key=admin)
    assert response.status == 201 and response.function == "remember", str(response)
    assert len(response.json()["episode_ids"]) == count


def test_bodies_past_lambda_and_api_gateway_get_the_gateways_answers(cloud: Cloud, admin: str) -> None:
    seven = json.dumps({"items": [{"scope": "root", "content": "x" * 70 * 1024}] * 100})
    response = cloud.gateway.request("POST", "/v1/remember", body=seven, key=admin)
    assert response.status == 500 and response.function is None, str(response)  # Lambda never ran
    assert response.error_code == "internal_error"
    eleven = json.dumps({"items": [{"scope": "root", "content": "x" * 110 * 1024}] * 100})
    response = cloud.gateway.request("POST", "/v1/remember", body=eleven, key=admin)
    assert response.status == 413 and response.error_code == "payload_too_large", str(response)
