"""Request and response bodies of the HTTP API. Unknown fields are refused."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mneme.errors import InvalidInput
from mneme.models import Role, convertible_to_utc, not_a_number
from mneme.search_models import MetadataFilter, as_filter
from mneme.services.curation.memories import KEY_PATTERN, TAG_PATTERN
from mneme.services.remember import Conversation, RememberItem
from mneme.structure_models import Operation

Path_ = Annotated[str, StringConstraints(min_length=4, max_length=600)]
Key = Annotated[str, StringConstraints(min_length=1, max_length=128)]
ShortList = Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=128)]], Field(max_length=32)]


AwareTimestamp = Annotated[AwareDatetime, BeforeValidator(not_a_number), AfterValidator(convertible_to_utc)]
MEMORY_BODY_BYTES = 16 * 1024


def _within_memory_limit(value: str) -> str:
    if len(value.encode(errors="surrogatepass")) > MEMORY_BODY_BYTES:
        raise PydanticCustomError("body_too_large", "body exceeds {limit} bytes", {"limit": MEMORY_BODY_BYTES})
    return value


def _within_search_text_limit(value: str) -> str:
    if len(value.encode(errors="surrogatepass")) > MEMORY_BODY_BYTES:
        raise PydanticCustomError("body_too_large", "search_text exceeds {limit} bytes", {"limit": MEMORY_BODY_BYTES})
    return value


# A size limit on content is a 413 (DESIGN: too large), like an oversized episode; the schema still says it.
MemoryBody = Annotated[
    str,
    StringConstraints(min_length=1),
    AfterValidator(_within_memory_limit),
    Field(json_schema_extra={"maxLength": MEMORY_BODY_BYTES}),
]
# What recall searches a memory by, instead of its key, summary, tags, triggers and body; "" keeps it out of search.
SearchText = Annotated[
    str, AfterValidator(_within_search_text_limit), Field(json_schema_extra={"maxLength": MEMORY_BODY_BYTES})
]


def _whole_number(value: object) -> object:
    """A query-string integer is digits only: `limit=5.0` or `limit=5e1` is a 400, not 5 or 50."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in digits, such as 50")
    return value


MAX_PAGE = 200
# A page size in the query string: digits only, 1..200. Its schema is written out: for a type with a validator
# of its own, Powertools puts pydantic's `ge` / `le` in the document, which JSON Schema does not know.
QueryLimit = Annotated[
    int,
    BeforeValidator(_whole_number),
    Field(ge=1, le=MAX_PAGE),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_PAGE}),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrieveRequest(Strict):
    path: Path_ = Field(description="the scope whose guidance to return, from root down to it")


class CreateScopeRequest(Strict):
    path: Path_
    parents: StrictBool = False


class RenameScopeRequest(Strict):
    path: Path_
    new_path: Path_
    dry_run: StrictBool = False  # answer with the preview a structure draft of this rename would show


class LayersRequest(Strict):
    layers: dict[int, Annotated[str, StringConstraints(min_length=1, max_length=63)]] = Field(max_length=8)


class MemoryFields(Strict):
    summary: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        None, description="one line shown on cards"
    )
    tags: ShortList | None = Field(None, description="labels recall searches it by")
    triggers: ShortList | None = None
    confidence: Annotated[StrictFloat, Field(ge=0, le=1)] | None = None
    # With a timezone: a naive time cannot be compared with the clock (it used to fail retrieve with a 500).
    valid_until: AwareTimestamp | None = Field(None, description="left out of bundles after this time")
    review_due: AwareTimestamp | None = None
    depends_on: ShortList | None = None
    search_text: SearchText | None = None


class CreateMemoryRequest(MemoryFields):
    # The key's and the tag's grammar is checked by the service (its errors `invalid_key`, `invalid_tag`); the
    # schema still says it.
    key: Key = Field(
        description="names it, unique per target, e.g. 'vat-policy'", json_schema_extra={"pattern": KEY_PATTERN}
    )
    body: MemoryBody = Field(description="the guidance, in Markdown")
    scope: Path_ | None = Field(None, description="attach it to this scope (give scope or tag)")
    tag: Annotated[str, StringConstraints(min_length=3, max_length=130)] | None = Field(
        None,
        description="attach it to a layer instead: 'layer=value', or 'layer=*' for every scope at that layer",
        json_schema_extra={"pattern": TAG_PATTERN},
    )


class EditMemoryRequest(MemoryFields):
    body: MemoryBody | None = None
    version: Annotated[StrictInt, Field(ge=1)] | None = None


class NoBody(Strict):
    """The body of a route that takes none: absent or `{}`; any field (e.g. `tenant`) is refused."""


class DecisionRequest(Strict):
    author: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = None  # kept in the history


class RejectRequest(DecisionRequest):
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class DraftRequest(Strict):
    operations: Annotated[list[Operation], Field(min_length=1, max_length=50)]


class PublishRequest(Strict):
    fingerprint: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class CreateKeyRequest(Strict):
    principal: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    roles: Annotated[list[Role], Field(min_length=1, max_length=4)]


class CorrectFactRequest(Strict):
    """A correction of a fact at `version` (a stale version is a 409); at least one field besides `reason`."""

    version: Annotated[StrictInt, Field(ge=1)] = Field(description="the version you read")
    summary: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, description="the fact as a sentence"
    )
    entity: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = Field(
        None, description="what the fact is about"
    )
    property: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = Field(
        None, description="what it states of the entity"
    )
    value: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = Field(
        None, description="the right value"
    )
    confidence: Annotated[StrictFloat, Field(ge=0, le=1)] | None = None
    valid_until: AwareTimestamp | None = None
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        None, description="why: kept in the history"
    )

    @model_validator(mode="after")
    def _changes_something(self) -> CorrectFactRequest:
        if not self.model_fields_set - {"version", "reason"}:
            raise ValueError("give a field to correct: summary, entity, property, value, confidence or valid_until")
        return self


class ConsolidateRequest(Strict):
    scopes: list[Path_] | None = Field(
        None, max_length=100, description="only the scopes under these paths (default: every scope with new episodes)"
    )


class ListingQuery(Strict):
    """The query of `GET /v1/episodes` and `GET /v1/facts` (besides `metadata.<key>=<value>`): the declaration
    their handlers, the MCP `list` tool and the CLI's `list` read; the service takes it as a `Listing`."""

    scope: Path_ = Field("root", description="list this scope and everything below it")
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        None, description="episodes of this session only"
    )
    since: AwareTimestamp | None = Field(
        None, description="only what occurred (a fact: was valid from) at or after this time"
    )
    until: AwareTimestamp | None = Field(
        None, description="only what occurred (a fact: was valid from) before this time"
    )
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = Field(
        None, description="the previous page's next_cursor"
    )
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_PAGE)] = Field(50, description="records per page")


class ForgetQuery(Strict):
    """The query of `DELETE /v1/episodes/{id}` and `/v1/facts/{id}`. The reason rides in the query string, and a
    request target is at most 8,192 bytes (413/414 beyond): 500 characters of any script fit, percent-encoded."""

    reason: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = Field(
        None, description="why it is forgotten: kept with who forgot it and when"
    )


def query_metadata(params: Mapping[str, Sequence[str]]) -> dict[str, list[Any]] | None:
    """`metadata.<key>=<value>` query parameters as a metadata filter: a key given several times accepts any of
    its values. A value is the string as given and, when it reads as a JSON number or boolean, that too."""
    given = {name[len("metadata.") :]: values for name, values in params.items() if name.startswith("metadata.")}
    if not given:
        return None
    accepted: dict[str, list[Any]] = {}
    for key, values in given.items():
        accepted[key] = []
        for value in values:
            accepted[key].append(value)
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, bool | int | float):
                accepted[key].append(parsed)
    try:
        checked = TypeAdapter(MetadataFilter).validate_python(accepted)
    except ValidationError as e:
        message = e.errors()[0].get("msg", "invalid metadata filter").removeprefix("Value error, ")
        raise InvalidInput(message, code="invalid_filter") from None
    return as_filter(checked)


class MemoryView(BaseModel):
    memory_id: str
    kind: str
    target: str
    key: str
    status: str
    version: int
    author: str
    created_at: datetime
    updated_at: datetime


class RememberBatch(Strict):
    items: Annotated[list[RememberItem], Field(min_length=1, max_length=100)]


def _remember_shape(value: object) -> str:
    if isinstance(value, dict) and "messages" in value:
        return "conversation"
    return "batch" if isinstance(value, dict) and "items" in value else "item"


# One item, `{"items": [...]}` or a conversation's `{"messages": [...]}`: chosen by shape, so a bad batch gets
# the batch's error, not a union of all three.
RememberBody = Annotated[
    Annotated[RememberItem, Tag("item")]
    | Annotated[RememberBatch, Tag("batch")]
    | Annotated[Conversation, Tag("conversation")],
    Discriminator(_remember_shape),
]
