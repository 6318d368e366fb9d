import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mneme.http import openapi, routes

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_openapi_document_is_current() -> None:
    assert COMMITTED.read_text() == openapi.render(), "docs/openapi.json is stale: run `make openapi`"
    served = Path(__file__).resolve().parents[2] / "shared" / "mneme" / "assets" / "openapi.json"
    assert served.read_bytes() == COMMITTED.read_bytes(), "GET /openapi.json serves a stale copy: run `make openapi`"


def test_every_route_of_the_table_is_documented_with_its_security() -> None:
    paths = openapi.document()["paths"]
    for route in routes.ROUTES:
        operation = paths[route.path][route.method.lower()]
        assert ("security" in operation) == (route.role is not None), route


def test_every_operation_declares_its_success_and_every_error_in_the_error_shape() -> None:
    document = openapi.document()
    for route in routes.ROUTES:
        responses = document["paths"][route.path][route.method.lower()]["responses"]
        success = [code for code in responses if code.startswith("2")]
        assert success == [str(openapi.SUCCESS[(route.method, route.path)][0])], route
        assert "422" not in responses
        errors = [code for code in responses if code[0] in "45"]
        assert {"400", "413", "415"} <= set(errors), route
        assert ({"401", "403"} <= set(errors)) == (route.role is not None), route
        for code in errors:
            assert responses[code]["content"] == {"application/json": {"schema": {"$ref": openapi.ERROR}}}


def test_the_bundle_is_markdown_or_json_and_201_202_are_declared() -> None:
    paths = openapi.document()["paths"]
    assert set(paths["/v1/retrieve"]["post"]["responses"]["200"]["content"]) == {"text/markdown", "application/json"}
    assert "201" in paths["/v1/remember"]["post"]["responses"]
    assert "202" in paths["/v1/consolidate"]["post"]["responses"]
    error = openapi.document()["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"]


def test_the_query_parameters_of_the_route_table_are_those_documented() -> None:
    paths = openapi.document()["paths"]
    for route in routes.ROUTES:
        parameters = paths[route.path][route.method.lower()].get("parameters", [])
        named = {name for name in route.query if not name.endswith(".")}  # `metadata.`: `metadata.<key>`, described
        assert {p["name"] for p in parameters if p["in"] == "query"} == named, route


# -- the document speaks JSON Schema: every keyword is one of its vocabulary --------------------------------

# OpenAPI 3.1's Schema Object is JSON Schema 2020-12 plus these (OpenAPI 3.1.0, "Fixed Fields" of the Schema Object).
OPENAPI_SCHEMA_WORDS = {"discriminator", "xml", "externalDocs", "example"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_ONE = {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
              "unevaluatedItems", "unevaluatedProperties", "contentSchema"}  # fmt: skip


def json_schema_vocabulary() -> set[str]:
    """Every keyword JSON Schema 2020-12 defines: the properties of its meta-schemas (as the jsonschema package
    ships them), core, applicator, validation, meta-data, format, content and unevaluated."""
    from jsonschema_specifications import REGISTRY

    words: set[str] = set()
    for uri in REGISTRY:
        if uri.startswith("https://json-schema.org/draft/2020-12/"):
            words |= set(REGISTRY.contents(uri).get("properties", {}))
    assert {"minimum", "maximum", "anyOf", "$ref"} <= words
    return words


def keywords(schema: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, keyword) for a schema and every schema inside it."""
    if not isinstance(schema, dict):
        return
    for word, value in schema.items():
        yield where, word
        if word in SCHEMA_MAPS:
            for name, inner in value.items():
                yield from keywords(inner, f"{where}/{word}/{name}")
        elif word in SCHEMA_LISTS:
            for i, inner in enumerate(value):
                yield from keywords(inner, f"{where}/{word}/{i}")
        elif word in SCHEMA_ONE:
            yield from keywords(value, f"{where}/{word}")


def schemas(document: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every schema an OpenAPI document holds: components, parameters, request and response bodies, headers."""
    for name, schema in document["components"]["schemas"].items():
        yield f"#/components/schemas/{name}", schema
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            at = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                yield f"{at} parameter {parameter['name']}", parameter["schema"]
            for media, body in (operation.get("requestBody") or {}).get("content", {}).items():
                yield f"{at} body {media}", body["schema"]
            for status, response in operation["responses"].items():
                for media, body in response.get("content", {}).items():
                    yield f"{at} {status} {media}", body["schema"]
                for name, header in response.get("headers", {}).items():
                    yield f"{at} {status} header {name}", header["schema"]


def test_every_schema_keyword_of_the_document_is_json_schemas() -> None:
    vocabulary = json_schema_vocabulary() | OPENAPI_SCHEMA_WORDS
    document = json.loads(COMMITTED.read_text())
    foreign = [f"{where}: {word}" for at, schema in schemas(document) for where, word in keywords(schema, at)
               if word not in vocabulary]  # fmt: skip
    assert foreign == [], "not JSON Schema: " + "; ".join(foreign[:10])


def test_no_request_body_is_declared_nullable_since_a_null_body_is_refused() -> None:
    document = json.loads(COMMITTED.read_text())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for body in (operation.get("requestBody") or {}).get("content", {}).values():
                alternatives = body["schema"].get("anyOf", []) + body["schema"].get("oneOf", [])
                assert {"type": "null"} not in alternatives and body["schema"].get("type") != "null", (method, path)


def test_the_listing_and_forget_query_parameters_are_their_request_models() -> None:
    """`GET /v1/episodes`, `GET /v1/facts` and the forgets take `ListingQuery` / `ForgetQuery` as the MCP `list`
    and `forget` tools and the CLI do: the same default, bounds and description."""
    from mneme.http.schemas import ForgetQuery, ListingQuery

    def facts(schema: dict[str, Any]) -> dict[str, Any]:
        value = next((b for b in schema.get("anyOf", []) if b.get("type") != "null"), schema)
        keys = ("minLength", "maxLength", "minimum", "maximum")
        return {"default": schema.get("default"), **{k: value[k] for k in keys if k in value}}

    paths = openapi.document()["paths"]
    for path, method, model in (
        ("/v1/episodes", "get", ListingQuery),
        ("/v1/facts", "get", ListingQuery),
        ("/v1/episodes/{episode_id}", "delete", ForgetQuery),
        ("/v1/facts/{fact_id}", "delete", ForgetQuery),
    ):
        declared = model.model_json_schema()["properties"]
        for parameter in paths[path][method]["parameters"]:
            if parameter["in"] != "query":
                continue
            name, documented = parameter["name"], parameter["schema"]
            assert parameter.get("description") == declared[name].get("description"), (path, name)
            if name in ("since", "until"):  # text in the query string, parsed by the handler: only the default
                assert documented.get("default") == declared[name].get("default"), (path, name)
                continue
            assert facts(documented) == facts(declared[name]), (path, name)
