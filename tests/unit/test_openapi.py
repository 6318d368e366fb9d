from pathlib import Path

from mneme import routes
from mneme.http import openapi

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
