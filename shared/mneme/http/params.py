"""A route's query parameter as a request model declares it: its bounds and description, from the model's JSON
schema, so `GET /v1/episodes?limit=` and the MCP `list` tool read one declaration (`schemas.ListingQuery`)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel

BOUNDS = {"minLength": "min_length", "maxLength": "max_length", "minimum": "ge", "maximum": "le"}


def query(model: type[BaseModel], name: str, *, bounds: bool = True, **extra: Any) -> Any:
    """`Query(...)` for `model`'s field `name`: its description and (unless the parameter's type holds its own,
    `bounds=False`) its bounds; `extra` adds what the query string needs besides (a time's `max_length`)."""
    schema = model.model_json_schema()["properties"][name]
    value = next((b for b in schema.get("anyOf", []) if b.get("type") != "null"), schema)
    given = {BOUNDS[key]: value[key] for key in BOUNDS if bounds and key in value}
    return Query(description=schema.get("description"), **given, **extra)
