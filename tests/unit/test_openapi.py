from pathlib import Path

from mneme import routes
from mneme.http import openapi

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_openapi_document_is_current() -> None:
    assert COMMITTED.read_text() == openapi.render(), "docs/openapi.json is stale: run `make openapi`"


def test_every_route_of_the_table_is_documented_with_its_security() -> None:
    paths = openapi.document()["paths"]
    for route in routes.ROUTES:
        operation = paths[route.path][route.method.lower()]
        assert ("security" in operation) == (route.role is not None), route
