"""records: episodes and facts addressed one at a time: get, list (filters, cursor), forget; correct a fact."""

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body

from mneme import bootstrap
from mneme.errors import InvalidInput
from mneme.http.api import build_resolver, caller
from mneme.http.lambda_entry import lambda_handler
from mneme.http.params import query
from mneme.http.schemas import CorrectFactRequest, ForgetQuery, ListingQuery, NoBody, QueryLimit, query_metadata
from mneme.services.records import Listing

app = build_resolver()

# Declared by `ListingQuery` and `ForgetQuery` (bounds, descriptions; the defaults below are checked against them
# by tests/unit/test_openapi.py).
Scope = Annotated[str, query(ListingQuery, "scope")]
SessionId = Annotated[str | None, query(ListingQuery, "session_id")]
Cursor = Annotated[str | None, query(ListingQuery, "cursor")]
Limit = Annotated[QueryLimit, query(ListingQuery, "limit", bounds=False)]  # QueryLimit: digits only, its own schema
Reason = Annotated[str | None, query(ForgetQuery, "reason")]
# ISO 8601 text with a zone; parsed here (pydantic would also take a number as epoch seconds)
Since = Annotated[str | None, query(ListingQuery, "since", max_length=64, json_schema_extra={"format": "date-time"})]
Until = Annotated[str | None, query(ListingQuery, "until", max_length=64, json_schema_extra={"format": "date-time"})]


def _time(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{name} is not an ISO 8601 time (e.g. 2026-03-01T09:00:00Z)", code="invalid_time") from None
    if value.tzinfo is None:
        raise InvalidInput(f"{name} needs a timezone (e.g. Z)", code="invalid_time")
    return value


def _listing(scope: str, since: str | None, until: str | None, **fields: Any) -> Listing:
    params = app.current_event.multi_value_query_string_parameters or {}
    return Listing(scope=scope, since=_time("since", since), until=_time("until", until),
                   metadata=query_metadata(params), **fields)  # fmt: skip


@app.get("/v1/episodes")
def list_episodes(
    scope: Scope = "root",
    session_id: SessionId = None,
    since: Since = None,
    until: Until = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Episodes under a scope (its whole subtree), newest remembered first (the turns one call gave by their
    `sequence`, the last first). Filters: `session_id`, `since` / `until` (when they occurred, half-open; `since`
    after `until` is a 400), `metadata.<key>=<value>` (repeat a key for any of several values)."""
    listing = _listing(scope, since, until, session_id=session_id, cursor=cursor, limit=limit)
    return bootstrap.current().records.list_episodes(caller(app), listing)


@app.get("/v1/episodes/<episode_id>")
def get_episode(episode_id: str) -> dict[str, Any]:
    """One episode and the facts drawn from it; a forgotten one is a 404 saying who forgot it, when and why."""
    return bootstrap.current().records.get_episode(caller(app), episode_id)


@app.delete("/v1/episodes/<episode_id>")
def forget_episode(
    episode_id: str, reason: Reason = None, _: Annotated[NoBody | None, Body()] = None
) -> dict[str, Any]:
    """Forget one episode for good: out of search at once, a tombstone in the change feed, who/when/`reason`
    kept, and the facts drawn from it settled (retracted, re-grounded, marked stale or rebuilt)."""
    return bootstrap.current().forgetting.forget_episode(caller(app), episode_id, reason)


@app.get("/v1/facts")
def list_facts(
    scope: Scope = "root",
    since: Since = None,
    until: Until = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Facts under a scope (its whole subtree, any status), newest first. Filters: `since` / `until` (valid
    from), `metadata.<key>=<value>` (a fact carries the metadata of its source episodes)."""
    listing = _listing(scope, since, until, cursor=cursor, limit=limit)
    return bootstrap.current().records.list_facts(caller(app), listing)


@app.get("/v1/facts/<fact_id>")
def get_fact(fact_id: str) -> dict[str, Any]:
    """One fact, its source episodes and its corrections."""
    return bootstrap.current().records.get_fact(caller(app), fact_id)


@app.patch("/v1/facts/<fact_id>")
def correct_fact(fact_id: str, request: Annotated[CorrectFactRequest, Body()]) -> dict[str, Any]:
    """Correct a fact at its `version` (409 when it changed since); the history keeps who, when, what and why."""
    changes = request.model_dump(exclude_unset=True, exclude={"version"})
    return bootstrap.current().forgetting.correct_fact(caller(app), fact_id, request.version, changes)


@app.delete("/v1/facts/<fact_id>")
def forget_fact(fact_id: str, reason: Reason = None, _: Annotated[NoBody | None, Body()] = None) -> dict[str, Any]:
    """Forget one fact for good (approver): out of search at once, a tombstone in the change feed, who/when/
    `reason` kept. Its source episodes stay; forget them too if what they say must go."""
    return bootstrap.current().forgetting.forget_fact(caller(app), fact_id, reason)


handler = lambda_handler(app)
