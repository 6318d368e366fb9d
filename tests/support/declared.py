"""What a request model declares for one parameter, read from its JSON schema (what docs/openapi.json shows):
the tests of the MCP tools, the CLI options and the console's forms compare each surface with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mneme.mcp.params import model_field

REQUIRED = object()  # the default of a field that has none


def field_schema(model: type[BaseModel], dotted: str) -> tuple[dict[str, Any], bool]:
    """The JSON schema of `model`'s field `dotted` (through nested models), and whether it is required."""
    *parents, name = dotted.split(".")
    for parent in parents:
        annotation = model.model_fields[parent].annotation
        model = next(a for a in (annotation, *getattr(annotation, "__args__", ())) if isinstance(a, type))
    model_field(model, name)  # the field exists
    schema = model.model_json_schema()
    return schema["properties"][name], name in schema.get("required", [])


@dataclass(frozen=True)
class Declared:
    """One parameter as its request model declares it."""

    type: str  # the JSON type of the value (of each item, for a list): integer, number, boolean, string, object
    many: bool  # a list
    choices: frozenset[Any] | None  # a Literal's values
    default: Any  # REQUIRED when there is none
    minimum: float | None
    maximum: float | None
    max_length: int | None
    nullable: bool

    @property
    def bounds(self) -> str | None:
        """How a help text states the bounds: `1..200`."""
        if self.minimum is None or self.maximum is None:
            return None
        return f"{self.minimum:g}..{self.maximum:g}"


def declared(model: type[BaseModel], dotted: str) -> Declared:
    prop, required = field_schema(model, dotted)
    # no "default" in the schema: a default factory (metadata: {}), filled by the API when left out
    default = REQUIRED if required else prop.get("default")
    value, nullable = prop, False
    if "anyOf" in prop:
        branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
        nullable = len(branches) < len(prop["anyOf"])
        value = {**branches[0], **{k: v for k, v in prop.items() if k not in ("anyOf", "default")}}
    many = value.get("type") == "array"
    item = value.get("items", {}) if many else value
    return Declared(
        type=item.get("type", "object" if "$ref" in item else "string"),
        many=many,
        choices=frozenset(item["enum"]) if "enum" in item else None,
        default=default,
        minimum=item.get("minimum"),
        maximum=item.get("maximum"),
        max_length=item.get("maxLength"),
        nullable=nullable,
    )
