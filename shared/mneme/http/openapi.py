"""One OpenAPI document for the whole API, merged from every function's resolver."""

from __future__ import annotations

import importlib
import json
from typing import Any

from mneme import __version__, routes


def document() -> dict[str, Any]:
    merged: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Mneme", "version": __version__, "description": "Long-term memory for AI agents."},
        "paths": {},
        "components": {
            "schemas": {},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer", "description": "Mneme API key"}},
        },
    }
    for name in routes.FUNCTIONS:
        app = importlib.import_module(f"functions.{name}").app
        schema = json.loads(app.get_openapi_json_schema(title="Mneme", version=__version__))
        for path, operations in schema.get("paths", {}).items():
            merged["paths"].setdefault(path, {}).update(operations)
        merged["components"]["schemas"].update(schema.get("components", {}).get("schemas", {}))
    for route in routes.ROUTES:
        path = route.path
        operation = merged["paths"].get(path, {}).get(route.method.lower())
        if operation is not None and route.role is not None:
            operation["security"] = [{"apiKey": []}]
            operation.setdefault("description", f"Needs the {route.role.value!r} role.")
    merged["paths"] = dict(sorted(merged["paths"].items()))
    return merged


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
