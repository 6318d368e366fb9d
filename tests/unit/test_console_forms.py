"""The console's forms ask for what the request models declare: each field that becomes a request parameter has
the model's kind of input, choices, bounds (`min`, `max`, `maxlength`), default (`value`, the first option) and
`required`. The page is read as served (shared/mneme/assets/console/index.html); a form added without saying
which model it follows fails here, as does a field that drifts from its model."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import BaseModel

from mneme.http.schemas import ConsolidateRequest, CreateMemoryRequest, ListingQuery, RetrieveRequest
from mneme.services.recall import RecallRequest
from tests.support.declared import REQUIRED, Declared, declared

PAGE = Path(__file__).resolve().parents[2] / "shared" / "mneme" / "assets" / "console" / "index.html"
Attributes = dict[str, str | None]


class Field:
    def __init__(self, tag: str, attributes: Attributes) -> None:
        self.tag, self.attributes, self.options = tag, attributes, list[str]()

    def get(self, name: str) -> str | None:
        return self.attributes.get(name)

    @property
    def required(self) -> bool:
        return "required" in self.attributes


class Forms(HTMLParser):
    """form id -> {field name -> its input, select (with its options) or textarea}."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, Field]] = {}
        self.form: str | None = None
        self.select: Field | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.form = attributes["id"]
            self.forms[str(self.form)] = {}
        elif tag in ("input", "select", "textarea") and self.form is not None:
            field = Field(tag, attributes)
            self.forms[self.form][str(attributes["name"])] = field
            self.select = field if tag == "select" else None
        elif tag == "option" and self.select is not None:
            self.select.options.append(str(attributes["value"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form = None
        elif tag == "select":
            self.select = None


def read_forms() -> dict[str, dict[str, Field]]:
    parser = Forms()
    parser.feed(PAGE.read_text(encoding="utf-8"))
    return parser.forms


FORMS = read_forms()

LISTING = {"scope": "scope", "since": "since", "until": "until"}
# form id -> (request model, {field name: model field}, fields that are the console's own)
OPERATIONS: dict[str, tuple[type[BaseModel], dict[str, str], set[str]]] = {
    "recall-form": (
        RecallRequest,
        {"query": "query", "scope": "scope", "limit": "limit", "alpha": "scoring.alpha", "beta": "scoring.beta"}
        | {"strictness": "scoring.strictness", "fallback": "scoring.fallback"}
        | {"expand_top": "disclosure.expand_top", "budget_tokens": "disclosure.budget_tokens"},
        set(),
    ),
    "memory-form": (CreateMemoryRequest, {"scope": "scope", "tag": "tag", "key": "key", "body": "body"}, set()),
    "bundle-form": (RetrieveRequest, {"path": "path"}, set()),
    "run-form": (ConsolidateRequest, {"scopes": "scopes"}, set()),  # comma-separated paths
    # `metadata` is `key=value, …` (the `metadata.<key>` query), `query` searches the records through recall
    "episodes-filter": (ListingQuery, LISTING | {"session_id": "session_id"}, {"metadata", "query"}),
    "facts-filter": (ListingQuery, LISTING, {"metadata", "query"}),
}
# Forms that send no request model: the key (kept in the page), a path id, the structure editor (a draft's
# operations are built by the page from its choices) and the review filter (`GET /v1/reviews?path&mine`).
NOT_OPERATIONS = {"signin-form", "history-form", "draft-form", "draft-open", "review-filter"}
# Required by the page though optional in the model: the playground searches (it offers no `ids` to fetch).
REQUIRED_HERE = {("recall-form", "query")}
CASES = [(form, name) for form, (_, fields, _) in OPERATIONS.items() for name in fields]


def test_every_form_sends_a_request_model_or_is_said_not_to() -> None:
    assert set(FORMS) == set(OPERATIONS) | NOT_OPERATIONS


@pytest.mark.parametrize("form", sorted(OPERATIONS))
def test_each_field_is_a_model_field_or_the_consoles_own(form: str) -> None:
    _, fields, own = OPERATIONS[form]
    assert set(FORMS[form]) == set(fields) | own


@pytest.mark.parametrize(("form", "name"), CASES, ids=[f"{form}.{name}" for form, name in CASES])
def test_each_field_has_the_models_kind_choices_bounds_and_default(form: str, name: str) -> None:
    model, fields, _ = OPERATIONS[form]
    field, wanted = FORMS[form][name], declared(model, fields[name])
    if wanted.choices is not None:
        assert field.tag == "select" and set(field.options) == wanted.choices, f"{name}: {field.options}"
        assert field.options[0] == wanted.default, f"{name}: the first option is the default, {wanted.default}"
    else:
        assert_input(field, wanted, name)
    required = wanted.default is REQUIRED or (form, name) in REQUIRED_HERE
    assert field.required == required, f"{name}: required is {required}"
    if field.get("maxlength") is not None:
        assert int(str(field.get("maxlength"))) == wanted.max_length, f"{name}: maxlength"


def assert_input(field: Field, wanted: Declared, name: str) -> None:
    numeric = wanted.type in ("integer", "number") and not wanted.many
    assert (field.get("type") == "number") == numeric, f"{name}: a number field is {numeric}"
    for attribute, bound in (("min", wanted.minimum), ("max", wanted.maximum)):
        given = field.get(attribute)
        assert (None if given is None else float(given)) == bound, f"{name}: {attribute} {given}, the model {bound}"
    value = field.get("value")
    if wanted.default in (None, REQUIRED):
        assert value is None or wanted.default is REQUIRED, f"{name}: a value the model does not default to"
    elif numeric:
        assert value is not None and float(value) == wanted.default, f"{name}: value {value}, not {wanted.default}"
    else:
        assert value == wanted.default, f"{name}: value {value}, not {wanted.default}"
