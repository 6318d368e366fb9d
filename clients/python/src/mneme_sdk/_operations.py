"""Every route of the v1 API as a flow (see `_flow.py`): the one place that builds requests and reads answers.

`Client` and `AsyncClient` expose each function here as a method of the same name and signature.
A new route is a flow here, one line in each client (`name = _sync(op.name)`, `name = _async(op.name)`)
and its request/answer models in `models.py` (a test fails while `docs/openapi.json` has a schema the
models lack).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from mneme_sdk._flow import Call, Emit, Flow, Sleep
from mneme_sdk.errors import InvalidInput
from mneme_sdk.models import (
    Bundle,
    Caller,
    ChangesPage,
    Conversation,
    CorrectFactRequest,
    CreatedKey,
    CreateMemoryRequest,
    DraftRequest,
    DraftView,
    EditMemoryRequest,
    EpisodePage,
    EpisodeRecord,
    Erasure,
    FactPage,
    FactRecord,
    Forgot,
    Health,
    KeyList,
    KeyView,
    LayerNames,
    MemoryHistory,
    MemoryPage,
    MemoryRecord,
    MemoryView,
    Message,
    RecallRequest,
    RecallResponse,
    Remembered,
    RememberedBatch,
    RememberItem,
    Reviews,
    Revoked,
    RunList,
    RunStarted,
    RunView,
    ScopeList,
    ScopeView,
    SttpValidation,
)

M = TypeVar("M", bound=BaseModel)

#: Most items one remember call takes (the API's limit).
MAX_BATCH = 100


def invalid_input(error: ValidationError) -> InvalidInput:
    """A pydantic validation failure of a request built here, as the API would report it (400)."""
    details = [
        {
            "loc": [str(part) for part in item["loc"]],
            "message": item["msg"].removeprefix("Value error, "),
            "type": item["type"],
        }
        for item in error.errors()
    ]
    first = details[0]
    where = ".".join(first["loc"]) or "request"
    return InvalidInput(f"{where}: {first['message']}", details=details)


def model(cls: type[M], value: M | Mapping[str, Any]) -> M:
    """`value` as a `cls` request, or the API's `invalid_input` error before anything is sent."""
    if isinstance(value, cls):
        return value
    try:
        return cls.model_validate(value)
    except ValidationError as e:
        raise invalid_input(e) from None


def dump(value: BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json", exclude_unset=True)


def segment(value: str) -> str:
    """A path parameter, quoted whole (a `/` in an id stays inside the segment)."""
    return urllib.parse.quote(value, safe="")


def _json(cls: type[M], method: str, path: str, body: Any = None, **call: Any) -> Flow[M]:
    response: httpx.Response = yield Call(method, path, body, **call)
    return cls.model_validate_json(response.content)


# -- any route ------------------------------------------------------------------------------------


def request(
    method: str,
    path: str,
    body: Any = None,
    *,
    query: Mapping[str, str | Sequence[str]] | None = None,
    accept: str = "application/json",
    idempotent: bool = True,
) -> Flow[httpx.Response]:
    """One call to any route, with the client's retries: the 2xx `httpx.Response`, or a `MnemeError`."""
    response: httpx.Response = yield Call(method, path, body, dict(query or {}), accept, idempotent)
    return response


# -- health, identity and retrieve ----------------------------------------------------------------


def health() -> Flow[Health]:
    """`{"status": "ok", "version": …}`; needs no key."""
    return _json(Health, "GET", "/v1/health")


def me() -> Flow[Caller]:
    """The tenant, principal and roles the API key names."""
    return _json(Caller, "GET", "/v1/me")


def retrieve(path: str) -> Flow[str]:
    """The Markdown bundle of the scope's curated guidance (what an agent reads first)."""
    response: httpx.Response = yield Call("POST", "/v1/retrieve", {"path": path}, accept="text/markdown")
    return response.text


def retrieve_json(path: str) -> Flow[Bundle]:
    """The same bundle as blocks (kind, target, priority, key, memory_id, pending, body) and Markdown."""
    return _json(Bundle, "POST", "/v1/retrieve", {"path": path})


# -- remember and recall --------------------------------------------------------------------------


def remember(scope: str, content: str, **fields: Any) -> Flow[Remembered]:
    """Store one observation. `fields`: occurred_at, session_id, tier, metadata, idempotency_key,
    create_scope, format, profile (see `RememberItem`). A retry returns the first result (`created` False)."""
    item = model(RememberItem, {"scope": scope, "content": content, **fields})
    return _json(Remembered, "POST", "/v1/remember", dump(item))


def remember_messages(
    scope: str, messages: Sequence[Message | Mapping[str, Any]], **fields: Any
) -> Flow[list[Remembered]]:
    """Store a conversation: one episode a message (`role` or `name`, `content`, optional `occurred_at`), in
    order, in one session. `fields`: session_id, occurred_at (for messages without one), metadata,
    idempotency_key, create_scope (see `Conversation`). A retried call writes nothing twice."""
    conversation = model(Conversation, {"scope": scope, "messages": list(messages), **fields})
    batch = yield from _json(RememberedBatch, "POST", "/v1/remember", dump(conversation))
    return batch.items


def remember_batch(items: Sequence[RememberItem | Mapping[str, Any]]) -> Flow[list[Remembered]]:
    """Store up to 100 observations all-or-nothing; results are in the order of `items`."""
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidInput(f"a batch holds 1 to {MAX_BATCH} items", code="invalid_batch")
    body = {"items": [dump(model(RememberItem, item)) for item in items]}
    batch = yield from _json(RememberedBatch, "POST", "/v1/remember", body)
    return batch.items


def remember_many(
    items: Iterable[RememberItem | Mapping[str, Any]],
    *,
    batch_size: int = MAX_BATCH,
    on_batch: Callable[[list[Remembered]], None] | None = None,
) -> Flow[list[Remembered]]:
    """Any number of observations, sent in batches of `batch_size`. Each batch is atomic; a failure
    stops at that batch (earlier batches stay stored, and re-sending them writes nothing twice)."""
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be 1..{MAX_BATCH}")
    results: list[Remembered] = []
    batch: list[RememberItem | Mapping[str, Any]] = []
    for item in [*items, None]:
        if item is not None:
            batch.append(item)
        if batch and (len(batch) == batch_size or item is None):
            done = yield from remember_batch(batch)
            if on_batch is not None:
                on_batch(done)
            results.extend(done)
            batch = []
    return results


def recall(query: str | None = None, *, request: RecallRequest | None = None, **fields: Any) -> Flow[RecallResponse]:
    """Ranked search under a scope: `recall("year end", scope="root.acme", limit=5)`, or pass a whole
    `RecallRequest`. `ids=[…]` fetches the full bodies of cards from an earlier answer. `metadata={"user":
    "alice", "topic": ["diet", "health"]}` keeps what holds those top-level values (inside the search).
    `budget_tokens=` and `expand_top=` are the request's `disclosure` fields, and `strictness=` (the relevance
    floor: "precision", "balanced" or "recall") its `scoring` field, by the same names."""
    for group, names in (("disclosure", ("budget_tokens", "expand_top")), ("scoring", ("strictness",))):
        shortcuts = {name: fields.pop(name) for name in names if name in fields}
        if shortcuts:
            fields[group] = {**fields.get(group, {}), **shortcuts}
    if request is None:
        request = model(RecallRequest, {"query": query, **fields} if query is not None else fields)
    return _json(RecallResponse, "POST", "/v1/recall", dump(request))


# -- episodes and facts as records ----------------------------------------------------------------


def get_episode(episode_id: str) -> Flow[EpisodeRecord]:
    """One episode and the facts drawn from it; a forgotten one is NotFound `episode_forgotten`."""
    return _json(EpisodeRecord, "GET", f"/v1/episodes/{segment(episode_id)}")


def list_episodes(scope: str = "root", **filters: Any) -> Flow[EpisodePage]:
    """One page of a scope's episodes (its subtree), newest remembered first. `filters`: session_id, since,
    until, metadata ({"key": value or [values]}), cursor (the previous page's `next_cursor`), limit."""
    return _json(EpisodePage, "GET", "/v1/episodes", query=listing(scope, filters))


def forget_episode(episode_id: str, *, reason: str | None = None) -> Flow[Forgot]:
    """Forget one episode for good (writer): out of search at once, a tombstone in the change feed, who, when
    and `reason` kept; what derives from it is settled (`settled`). Not resent once it may have arrived."""
    query = {"reason": reason} if reason else {}
    return _json(Forgot, "DELETE", f"/v1/episodes/{segment(episode_id)}", query=query, idempotent=False)


def get_fact(fact_id: str) -> Flow[FactRecord]:
    """One fact with its source episodes, the ids of sources forgotten since, and its corrections."""
    return _json(FactRecord, "GET", f"/v1/facts/{segment(fact_id)}")


def list_facts(scope: str = "root", **filters: Any) -> Flow[FactPage]:
    """One page of a scope's facts (its subtree, any status), newest first; filters as `list_episodes`."""
    return _json(FactPage, "GET", "/v1/facts", query=listing(scope, filters))


def forget_fact(fact_id: str, *, reason: str | None = None) -> Flow[Forgot]:
    """Forget one fact for good (approver); its source episodes stay."""
    query = {"reason": reason} if reason else {}
    return _json(Forgot, "DELETE", f"/v1/facts/{segment(fact_id)}", query=query, idempotent=False)


def correct_fact(fact_id: str, version: int, *, reason: str | None = None, **changes: Any) -> Flow[FactRecord]:
    """Correct a fact at `version` (approver): `changes` among summary, entity, property, value, confidence,
    valid_until. Conflict `stale_version` when it changed since; its history keeps each correction."""
    body = dump(model(CorrectFactRequest, {"version": version, **changes, **({"reason": reason} if reason else {})}))
    return _json(FactRecord, "PATCH", f"/v1/facts/{segment(fact_id)}", body, idempotent=False)


def listing(scope: str, filters: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """The query of a list call: times as ISO text, each metadata key as `metadata.<key>` (repeated for a
    list of values)."""
    unknown = set(filters) - {"session_id", "since", "until", "metadata", "cursor", "limit"}
    if unknown:
        raise InvalidInput(f"unknown filter {sorted(unknown)[0]!r}", code="invalid_filter")
    query: dict[str, str | list[str]] = {"scope": scope}
    for name, value in filters.items():
        if value is not None and name != "metadata":
            query[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    for key, value in (filters.get("metadata") or {}).items():
        values = value if isinstance(value, list | tuple) else [value]
        query[f"metadata.{key}"] = [json.dumps(v) if isinstance(v, bool) else str(v) for v in values]
    return query


# -- consolidation --------------------------------------------------------------------------------


def consolidate(scopes: Sequence[str] | None = None) -> Flow[RunStarted]:
    """Start a run over the dirty scopes (all, or those under `scopes`); returns at once (202)."""
    body = {"scopes": list(scopes)} if scopes else {}
    return _json(RunStarted, "POST", "/v1/consolidate", body, idempotent=False)


def get_run(run_id: str) -> Flow[RunView]:
    return _json(RunView, "GET", f"/v1/consolidations/{segment(run_id)}")


def list_runs() -> Flow[list[RunView]]:
    """The most recent consolidation runs, newest first."""
    runs = yield from _json(RunList, "GET", "/v1/consolidations")
    return runs.runs


def wait_run(
    run_id: str,
    *,
    timeout: float = 600.0,
    interval: float = 0.5,
    max_interval: float = 5.0,
    on_update: Callable[[RunView], None] | None = None,
) -> Flow[RunView]:
    """Poll until the run leaves `running`; raises TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        run = yield from get_run(run_id)
        if on_update is not None:
            on_update(run)
        if run.finished:
            return run
        if time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id} still running after {timeout:.0f}s")
        yield Sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 1.5, max_interval)


# -- scopes and layers ----------------------------------------------------------------------------


def list_scopes(path: str = "root") -> Flow[list[ScopeView]]:
    """The scope and its descendants, depth-first, with canonical paths."""
    scopes = yield from _json(ScopeList, "GET", "/v1/scopes", query={"path": path})
    return scopes.scopes


def create_scope(path: str, *, parents: bool = False) -> Flow[ScopeView]:
    """Create a scope (admin); `parents=True` creates missing ancestors."""
    return _json(ScopeView, "POST", "/v1/scopes", {"path": path, "parents": parents}, idempotent=False)


def rename_scope(path: str, new_path: str) -> Flow[ScopeView]:
    """Rename the last segment (admin); the old path stays as an alias (`alias` in the answer)."""
    return _json(ScopeView, "POST", "/v1/scopes/rename", {"path": path, "new_path": new_path}, idempotent=False)


def get_layers() -> Flow[dict[int, str]]:
    names = yield from _json(LayerNames, "GET", "/v1/layers")
    return {int(depth): name for depth, name in names.layers.items()}


def put_layers(layers: Mapping[int, str]) -> Flow[dict[int, str]]:
    """Replace the layer names (admin), e.g. `{1: "clients", 2: "services"}`."""
    body = {"layers": {str(depth): name for depth, name in layers.items()}}
    names = yield from _json(LayerNames, "PUT", "/v1/layers", body)
    return {int(depth): name for depth, name in names.layers.items()}


# -- curated memories and review ------------------------------------------------------------------


def create_memory(
    key: str, body: str, *, scope: str | None = None, tag: str | None = None, **fields: Any
) -> Flow[MemoryRecord]:
    """A scoped (`scope`) or tagged (`tag="layer=value"` / `"layer=*"`) memory. A writer's is pending
    until an approver publishes it; an approver's is published at once."""
    given = {"key": key, "body": body, "scope": scope, "tag": tag, **fields}
    request = model(CreateMemoryRequest, {k: v for k, v in given.items() if v is not None})
    return _json(MemoryRecord, "POST", "/v1/memories", dump(request), idempotent=False)


def find_memory(scope: str, key: str) -> Flow[MemoryRecord]:
    """The memory keyed `key` in `scope` (one request, one read of the store), as retrieve shows it to the
    caller: its own pending draft of the key first, else the published memory, with `pending_revision` when
    the caller has an open edit of it. `MemoryNotFound` when there is none (archived, expired, another's draft)."""
    return _json(MemoryRecord, "GET", "/v1/memories", query={"scope": scope, "key": key})


def list_scope_memories(path: str, *, cursor: str | None = None, limit: int | None = None) -> Flow[MemoryPage]:
    """One page of the scoped memories of scope `path` and every scope under it, as retrieve shows them to the
    caller (published ones and its own drafts, with `pending_revision` for its open edit of one), by scope path
    (`target`), key and id; `cursor` is the previous page's `next_cursor`, `limit` 1 to 200 (100)."""
    query = {"path": path, **({"cursor": cursor} if cursor else {}), **({"limit": str(limit)} if limit else {})}
    return _json(MemoryPage, "GET", "/v1/scopes/memories", query=query)


def edit_memory(memory_id: str, *, version: int | None = None, **changes: Any) -> Flow[MemoryRecord]:
    """Change fields; `version` (optimistic lock) must match the stored version, else 409."""
    request = model(EditMemoryRequest, {**changes, **({"version": version} if version is not None else {})})
    return _json(MemoryRecord, "PATCH", f"/v1/memories/{segment(memory_id)}", dump(request), idempotent=False)


def archive_memory(memory_id: str) -> Flow[MemoryView]:
    """Archive by id; the answer names the memory (key, target, status) without its body."""
    return _json(MemoryView, "POST", f"/v1/memories/{segment(memory_id)}/archive", idempotent=False)


def approve_memory(memory_id: str, *, author: str | None = None) -> Flow[MemoryRecord]:
    """Publish a pending memory or its pending revision (`author` picks whose, when several)."""
    body = {"author": author} if author else None
    return _json(MemoryRecord, "POST", f"/v1/memories/{segment(memory_id)}/approve", body, idempotent=False)


def reject_memory(memory_id: str, reason: str, *, author: str | None = None) -> Flow[MemoryRecord]:
    body = {"reason": reason, **({"author": author} if author else {})}
    return _json(MemoryRecord, "POST", f"/v1/memories/{segment(memory_id)}/reject", body, idempotent=False)


def memory_history(memory_id: str) -> Flow[MemoryHistory]:
    return _json(MemoryHistory, "GET", f"/v1/memories/{segment(memory_id)}/history")


def reviews(path: str | None = None, *, mine: bool = False) -> Flow[Reviews]:
    """Approvers: the review queue (under `path`). Everyone, or `mine=True`: their own submissions."""
    query = {**({"path": path} if path else {}), **({"mine": "true"} if mine else {})}
    return _json(Reviews, "GET", "/v1/reviews", query=query)


# -- structure drafts (approvers) -----------------------------------------------------------------


def create_draft(operations: Sequence[Mapping[str, Any]]) -> Flow[DraftView]:
    """A structural change (move, merge, delete, layers) with the preview of everything it affects."""
    request = model(DraftRequest, {"operations": list(operations)})
    return _json(DraftView, "POST", "/v1/structure/drafts", dump(request), idempotent=False)


def get_draft(draft_id: str) -> Flow[DraftView]:
    return _json(DraftView, "GET", f"/v1/structure/drafts/{segment(draft_id)}")


def publish_draft(draft_id: str, fingerprint: str) -> Flow[DraftView]:
    """Apply exactly what the preview said; `fingerprint` (from the preview) guards against drift."""
    path = f"/v1/structure/drafts/{segment(draft_id)}/publish"
    return _json(DraftView, "POST", path, {"fingerprint": fingerprint}, idempotent=False)


def discard_draft(draft_id: str) -> Flow[DraftView]:
    return _json(DraftView, "POST", f"/v1/structure/drafts/{segment(draft_id)}/discard", idempotent=False)


# -- erasure (admin) and STTP ---------------------------------------------------------------------


def erase_scope(path: str, *, dry_run: bool = True) -> Flow[Erasure]:
    """Right to erasure: a dry run (the default) counts; `dry_run=False` deletes the subtree for good."""
    query = {"path": path, "dry_run": "true" if dry_run else "false"}
    return _json(Erasure, "DELETE", "/v1/scopes", query=query, idempotent=dry_run)


def validate_sttp(text: str, profile: str = "strict") -> Flow[SttpValidation]:
    """Diagnostics for an STTP node and, when recoverable, its canonical strict-valid form."""
    return _json(SttpValidation, "POST", "/v1/sttp/validate", {"text": text, "profile": profile})


# -- API keys (admin) -----------------------------------------------------------------------------


def create_key(principal: str, roles: Sequence[str]) -> Flow[CreatedKey]:
    """A key for the caller's tenant; `api_key` is the secret, shown only in this answer."""
    body = {"principal": principal, "roles": list(roles)}
    return _json(CreatedKey, "POST", "/v1/keys", body, idempotent=False)


def list_keys() -> Flow[list[KeyView]]:
    keys = yield from _json(KeyList, "GET", "/v1/keys")
    return keys.keys


def revoke_key(key_id: str) -> Flow[Revoked]:
    return _json(Revoked, "POST", f"/v1/keys/{segment(key_id)}/revoke")


# -- change feed ----------------------------------------------------------------------------------


def changes(cursor: str | None = None, limit: int = 100) -> Flow[ChangesPage]:
    """One page of records changed after `cursor` (None: from the beginning), in a total order."""
    query = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
    return _json(ChangesPage, "GET", "/v1/changes", query=query)


def iter_change_pages(cursor: str | None = None, *, page_size: int = 100) -> Flow[None]:
    """Pages until the feed is drained. Persist `page.next_cursor` once a page is processed: resuming
    from it after a crash neither skips nor repeats a record."""
    return _feed(cursor, page_size, lambda page: [page])


def iter_changes(cursor: str | None = None, *, page_size: int = 100) -> Flow[None]:
    """Every change after `cursor`, page by page (see `iter_change_pages` to keep the cursor)."""
    return _feed(cursor, page_size, lambda page: page.changes)


def _feed(cursor: str | None, page_size: int, items: Callable[[ChangesPage], Iterable[Any]]) -> Flow[None]:
    while True:
        page = yield from changes(cursor, page_size)
        for item in items(page):
            yield Emit(item)
        if not page.has_more:
            return
        cursor = page.next_cursor
