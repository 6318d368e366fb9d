"""MCP tool parameters built from the operations' request models, so each parameter is declared once.

A request model (`RecallRequest`, `RememberItem`, `CreateMemoryRequest`, …) holds every parameter's type,
bounds, default and description. A tool names the fields it takes (`"limit"`, or `"disclosure.budget_tokens"`
for a nested one) and states only where its meaning differs from the API's: a default (the working scope), a
description (recall's session is the delivery session), a check added to the model's (a scope path's grammar).
`takes` turns that into the signature the `mcp` SDK reads to build the tool's input schema and validate calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_args

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])


class _Keep:
    """The model's own default."""


KEEP: Any = _Keep()


@dataclass(frozen=True)
class Param:
    """A tool parameter drawn from a request model's field (`field` may be dotted: `scoring.strictness`).

    `default` and `description` replace the model's; a default of None makes the parameter optional (left out,
    the tool decides). `checks` are added after the model's own (validators, `Field(json_schema_extra=…)`)."""

    field: str
    default: Any = KEEP
    description: str | None = None
    checks: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return self.field.rsplit(".", 1)[-1]


def model_field(model: type[BaseModel], dotted: str) -> FieldInfo:
    """The field `dotted` of `model`, through nested models (`disclosure.budget_tokens`)."""
    *parents, name = dotted.split(".")
    for parent in parents:
        model = _model_of(model.model_fields[parent].annotation)
    return model.model_fields[name]


def _model_of(annotation: Any) -> type[BaseModel]:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"{annotation!r} is not a request model")


def parameter(model: type[BaseModel], param: Param | str) -> inspect.Parameter:
    """One keyword parameter: the model field's type and constraints, its description and its default."""
    param = Param(param) if isinstance(param, str) else param
    info = model_field(model, param.field)
    annotation: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    if param.default is not KEEP:
        default = param.default
        if default is None and not _accepts_none(info.annotation):
            annotation = annotation | None
    elif info.is_required():
        default = inspect.Parameter.empty
    elif info.default_factory is not None:
        default = info.default_factory()  # type: ignore[call-arg]
    else:
        default = info.default
    described: dict[str, Any] = {}
    if param.description or info.description:
        described["description"] = param.description or info.description
    if info.json_schema_extra is not None:
        described["json_schema_extra"] = info.json_schema_extra
    metadata = (Field(**described), *param.checks) if described else param.checks
    if metadata:
        annotation = Annotated[(annotation, *metadata)]
    return inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _accepts_none(annotation: Any) -> bool:
    return annotation is None or type(None) in get_args(annotation)


def takes(model: type[BaseModel], *params: Param | str | inspect.Parameter) -> Callable[[F], F]:
    """Give a tool function (`def tool(**arguments: Any)`) the parameters `params`: fields of `model`, or ones
    the API has no field for (`extra`: consolidate's `wait`, a path's id), required ones first; its return
    annotation stays."""

    def decorate(fn: F) -> F:
        built = [p if isinstance(p, inspect.Parameter) else parameter(model, p) for p in params]
        ordered = [p for p in built if p.default is inspect.Parameter.empty] + [
            p for p in built if p.default is not inspect.Parameter.empty
        ]
        returns = inspect.signature(fn, eval_str=True).return_annotation
        fn.__signature__ = inspect.Signature(ordered, return_annotation=returns)  # type: ignore[attr-defined]
        return fn

    return decorate


def extra(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """A tool parameter that is no request field (it shapes how the tool calls, e.g. whether to wait)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def given(arguments: Mapping[str, Any], *leave_out: str) -> dict[str, Any]:
    """The arguments a call gave (None: not given), request models as plain values for the SDK's client."""
    return {name: _plain(value) for name, value in arguments.items() if value is not None and name not in leave_out}


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
