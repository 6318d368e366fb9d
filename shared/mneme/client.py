"""A typed, synchronous client for the Mneme HTTP API, on the standard library only.

    from mneme.client import MnemeClient

    client = MnemeClient("http://127.0.0.1:8080", api_key)
    client.remember("root.acme", "Acme moved its year end to 31 March.", create_scope=True)
    hits = client.recall("when is Acme's year end?", scope="root.acme")
    print(hits.context)

Requests and responses use the API's own pydantic models where it has them (`RememberItem`,
`Remembered`, `RecallRequest`, `RecallResponse`, `Bundle`); the rest come back as the small views
defined here. Failures raise `mneme.errors` classes built from the API's error body
(`{"error": {"code", "message", "details"?}}`): `e.code`, `e.message`, `e.details`, `e.status`.

Retries: a 429 and a 503 are retried for every call, honouring `Retry-After`; other 5xx answers and
connection failures only for calls that are safe to repeat (reads, `remember` which is idempotent by
design, `PUT /v1/layers`). Writes that are not idempotent (creating a memory, a scope, a key or a
consolidation run) are not resent after the request may have reached the server.

The change feed is read page by page with `iter_change_pages` (persist each page's `next_cursor`
to resume without gaps or repeats) or record by record with `iter_changes`.

`MnemeClient.embedded(principal)` gives the same client over the local store in this process: it
invokes the same handlers as `mneme serve`, with the same validation, roles and error shapes.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from mneme import __version__
from mneme.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    MemoryNotFound,
    MethodNotAllowed,
    MnemeError,
    NotFound,
    PayloadTooLarge,
    ScopeNotFound,
    StoreUnavailable,
    Throttled,
    Unauthorized,
    UnsupportedMediaType,
)
from mneme.http.schemas import CorrectFactRequest, CreateMemoryRequest, EditMemoryRequest, MemoryView
from mneme.http.views import (
    Change,
    ChangesPage,
    CreatedKey,
    DraftView,
    EpisodePage,
    EpisodeRecord,
    Erasure,
    FactPage,
    FactRecord,
    Forgot,
    Health,
    KeyView,
    MemoryHistory,
    MemoryRecord,
    Reviews,
    RunStarted,
    RunView,
    ScopeView,
    SttpValidation,
)
from mneme.services.recall import RecallRequest, RecallResponse
from mneme.services.remember import MAX_BATCH, Conversation, Message, Remembered, RememberItem
from mneme.services.retrieval import Bundle

if TYPE_CHECKING:
    from mneme.models import Principal

__all__ = [
    "ApiRequest",
    "ApiResponse",
    "Bundle",
    "Change",
    "ChangesPage",
    "Conversation",
    "CreatedKey",
    "DraftView",
    "EmbeddedTransport",
    "EpisodePage",
    "EpisodeRecord",
    "Erasure",
    "FactPage",
    "FactRecord",
    "Forgot",
    "Health",
    "HttpTransport",
    "KeyView",
    "MemoryHistory",
    "MemoryRecord",
    "MemoryView",
    "Message",
    "MnemeClient",
    "MnemeConnectionError",
    "RecallRequest",
    "RecallResponse",
    "RememberItem",
    "Remembered",
    "Reviews",
    "RunStarted",
    "RunView",
    "ScopeView",
    "SttpValidation",
    "error_from_response",
    "invalid_input",
]

log = logging.getLogger("mneme.client")
M = TypeVar("M", bound=BaseModel)

#: Statuses retried for every call: the server refused the request before doing any work.
RETRY_ALWAYS = frozenset({429, 503})
#: Statuses retried only for calls that are safe to repeat.
RETRY_IDEMPOTENT = frozenset({500, 502, 504})


# -- errors ------------------------------------------------------------------------------------


class MnemeConnectionError(StoreUnavailable):
    """The API could not be reached (refused, reset, timed out) after the retries."""

    code = "connection_failed"


_BY_CODE: dict[str, type[MnemeError]] = {
    cls.code: cls
    for cls in (
        InvalidInput,
        Unauthorized,
        Forbidden,
        NotFound,
        ScopeNotFound,
        MemoryNotFound,
        MethodNotAllowed,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        Throttled,
        StoreUnavailable,
    )
}
_BY_STATUS: dict[int, type[MnemeError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: Throttled,
    503: StoreUnavailable,
}


def error_from_response(response: ApiResponse) -> MnemeError:
    """The `mneme.errors` instance for an error answer; `status` is the HTTP status received.

    The class is chosen by the error code when one matches (e.g. `scope_not_found` → ScopeNotFound),
    else by the status; an answer without the error shape (a proxy's HTML page) keeps its status and
    gets the code `http_<status>`.
    """
    code, message, details = f"http_{response.status}", "", None
    try:
        error = response.json()["error"]
        code, message, details = str(error["code"]), str(error["message"]), error.get("details")
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()
        message = f"HTTP {response.status}" + (f": {text[:300]}" if text else "")
    by_code = _BY_CODE.get(code)
    cls = by_code if by_code is not None and by_code.status == response.status else None
    cls = cls or _BY_STATUS.get(response.status) or MnemeError
    exc = cls(message, code=code, details=details)
    exc.status = response.status
    return exc


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


# -- transports -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str  # e.g. /v1/recall, already quoted
    body: bytes | None = None
    query: Mapping[str, str | Sequence[str]] = field(default_factory=dict)  # a sequence: the name repeated
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiResponse:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class TransportError(Exception):
    """A request that got no HTTP answer. `sent` is False when it certainly never reached the server."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Transport(Protocol):
    def send(self, request: ApiRequest) -> ApiResponse: ...


class HttpTransport:
    """HTTP(S) with `urllib.request`. `opener` customises proxies, TLS or extra handlers."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 10.0,
        opener: urllib.request.OpenerDirector | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.opener = opener or urllib.request.build_opener()

    def send(self, request: ApiRequest) -> ApiResponse:
        url = self.base_url + request.path
        if request.query:
            url += "?" + urllib.parse.urlencode(request.query, doseq=True)
        headers = {"User-Agent": f"mneme-client/{__version__}", **request.headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        raw = urllib.request.Request(url, data=request.body, headers=headers, method=request.method)
        try:
            with self.opener.open(raw, timeout=self.timeout) as answer:
                return ApiResponse(answer.status, _lower(answer.headers.items()), answer.read())
        except urllib.error.HTTPError as e:
            with e:
                return ApiResponse(e.code, _lower(e.headers.items() if e.headers else []), e.read())
        except urllib.error.URLError as e:
            reason = e.reason
            sent = not isinstance(reason, ConnectionRefusedError | socket.gaierror)
            raise TransportError(f"cannot reach {self.base_url}: {reason}", sent=sent) from e
        except (TimeoutError, ConnectionError, OSError) as e:  # timeouts and resets while reading
            raise TransportError(f"request to {self.base_url} failed: {e or type(e).__name__}", sent=True) from e


def _lower(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value for name, value in items}


class EmbeddedTransport:
    """The local store in this process, through the same handlers as `mneme serve`.

    The caller is `principal` (no API key): the route table's roles, request validation and the
    error shape apply exactly as over HTTP. Calls are serialised: the handlers' resolvers keep the
    current event on a module-level object.
    """

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self._lock = threading.Lock()

    def send(self, request: ApiRequest) -> ApiResponse:
        from mneme import routes
        from mneme.local import gateway, runtime
        from mneme.local.events import proxy_event

        path = urllib.parse.urlsplit(request.path).path
        try:
            route, params = routes.resolve(request.method, path)
        except MnemeError as error:
            return ApiResponse(error.status, {"content-type": "application/json"}, json.dumps(error.to_body()).encode())
        authorizer = None
        if route.role is not None:
            authorizer = {
                "tenant": self.principal.tenant,
                "principal": self.principal.principal,
                "roles": ",".join(sorted(role.value for role in self.principal.roles)),
                "principalId": f"{self.principal.tenant}/{self.principal.principal}",
            }
        body = request.body.decode() if request.body is not None else None
        query = urllib.parse.urlencode(request.query, doseq=True)
        event = proxy_event(route, request.method, path, query, dict(request.headers), body, params, authorizer)
        runtime.configure()
        with self._lock:
            answer = gateway.invoke(route, event)
        headers = _lower((answer.get("headers") or {}).items())
        for name, values in (answer.get("multiValueHeaders") or {}).items():
            headers.setdefault(name.lower(), values[-1])
        return ApiResponse(int(answer["statusCode"]), headers, (answer.get("body") or "").encode())


# -- the client -----------------------------------------------------------------------------------


class MnemeClient:
    """Every route of the v1 API as a typed method. Thread-safe when its transport is."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        session: urllib.request.OpenerDirector | None = None,
        transport: Transport | None = None,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`session` is a urllib opener (proxies, TLS, handlers); `transport` replaces HTTP entirely.

        Backoff doubles from `backoff` seconds up to `max_backoff`, with jitter; a `Retry-After`
        longer than `max_retry_after` seconds is not waited for: the Throttled error is raised.
        """
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url
        self.transport: Transport = transport or HttpTransport(base_url, api_key, timeout=timeout, opener=session)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self._sleep = sleep

    @classmethod
    def embedded(cls, principal: Principal, *, max_retries: int = 1) -> MnemeClient:
        """A client over the local store (MNEME_HOME) acting as `principal`."""
        return cls("embedded:", None, transport=EmbeddedTransport(principal), max_retries=max_retries)

    def __repr__(self) -> str:
        return f"MnemeClient({self.base_url!r})"

    # -- plumbing ---------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str | Sequence[str]] | None = None,
        accept: str = "application/json",
        idempotent: bool = True,
    ) -> ApiResponse:
        """Send one call with retries; returns a 2xx answer or raises a `mneme.errors` class."""
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        request = ApiRequest(method, path, data, dict(query or {}), headers)
        attempt = 0
        while True:
            try:
                response = self.transport.send(request)
            except TransportError as e:
                if attempt < self.max_retries and (idempotent or not e.sent):
                    delay = self._backoff(attempt)
                    log.info("retrying %s %s in %.2fs: %s", method, path, delay, e)
                    self._sleep(delay)
                    attempt += 1
                    continue
                raise MnemeConnectionError(str(e), details={"attempts": attempt + 1}) from e
            if response.status < 400:
                return response
            error = error_from_response(response)
            retryable = response.status in RETRY_ALWAYS or (idempotent and response.status in RETRY_IDEMPOTENT)
            if not retryable or attempt >= self.max_retries:
                raise error
            retry_after = _retry_after(response.headers.get("retry-after"))
            if retry_after is not None and retry_after > self.max_retry_after:
                raise error
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            log.info("retrying %s %s in %.2fs after %s %s", method, path, delay, response.status, error.code)
            self._sleep(delay)
            attempt += 1

    def _json(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request(method, path, body, **kw).json()

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.max_backoff, self.backoff * 2**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    # -- health and retrieve ----------------------------------------------------------------------

    def health(self) -> Health:
        """`{"status": "ok", "version": …}`; needs no key."""
        return Health.model_validate(self._json("GET", "/v1/health"))

    def retrieve(self, path: str) -> str:
        """The Markdown bundle of the scope's curated guidance (what an agent reads first)."""
        return self.request("POST", "/v1/retrieve", {"path": path}, accept="text/markdown").text

    def retrieve_json(self, path: str) -> Bundle:
        """The same bundle as blocks (kind, target, priority, key, memory_id, pending, body) and Markdown."""
        return Bundle.model_validate(self._json("POST", "/v1/retrieve", {"path": path}))

    # -- remember and recall ----------------------------------------------------------------------

    def remember(self, scope: str, content: str, **fields: Any) -> Remembered:
        """Store one observation. `fields`: occurred_at, session_id, tier, metadata, idempotency_key,
        create_scope, format (see `RememberItem`). A retry returns the first result (`created` False)."""
        item = _model(RememberItem, {"scope": scope, "content": content, **fields})
        return Remembered.model_validate(self._json("POST", "/v1/remember", _dump(item)))

    def remember_messages(
        self, scope: str, messages: Sequence[Message | Mapping[str, Any]], **fields: Any
    ) -> list[Remembered]:
        """Store a conversation: one episode a message (`role` or `name`, `content`, optional
        `occurred_at`), in order, in one session. `fields`: session_id, occurred_at (for messages without
        one), metadata, idempotency_key, create_scope (see `Conversation`). A retried call writes nothing
        twice; results are in the order of `messages`."""
        conversation = _model(Conversation, {"scope": scope, "messages": list(messages), **fields})
        answer = self._json("POST", "/v1/remember", _dump(conversation))
        return [Remembered.model_validate(result) for result in answer["items"]]

    def remember_batch(self, items: Sequence[RememberItem | Mapping[str, Any]]) -> list[Remembered]:
        """Store up to 100 observations all-or-nothing; results are in the order of `items`."""
        if not 1 <= len(items) <= MAX_BATCH:
            raise InvalidInput(f"a batch holds 1 to {MAX_BATCH} items", code="invalid_batch")
        body = {"items": [_dump(_model(RememberItem, item)) for item in items]}
        answer = self._json("POST", "/v1/remember", body)
        return [Remembered.model_validate(result) for result in answer["items"]]

    def remember_many(
        self,
        items: Iterable[RememberItem | Mapping[str, Any]],
        *,
        batch_size: int = MAX_BATCH,
        on_batch: Callable[[list[Remembered]], None] | None = None,
    ) -> list[Remembered]:
        """Any number of observations, sent in batches of `batch_size`. Each batch is atomic; a failure
        stops at that batch (earlier batches stay stored, and re-sending them writes nothing twice)."""
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be 1..{MAX_BATCH}")
        results: list[Remembered] = []
        batch: list[RememberItem | Mapping[str, Any]] = []
        for item in items:
            batch.append(item)
            if len(batch) == batch_size:
                results.extend(self._send_batch(batch, on_batch))
                batch = []
        if batch:
            results.extend(self._send_batch(batch, on_batch))
        return results

    def _send_batch(
        self, batch: list[RememberItem | Mapping[str, Any]], on_batch: Callable[[list[Remembered]], None] | None
    ) -> list[Remembered]:
        done = self.remember_batch(batch)
        if on_batch is not None:
            on_batch(done)
        return done

    def recall(
        self, query: str | None = None, *, request: RecallRequest | None = None, **fields: Any
    ) -> RecallResponse:
        """Ranked search under a scope: `client.recall("year end", scope="root.acme", limit=5)`, or pass
        a whole `RecallRequest`. `metadata={"user": "alice", "topic": ["diet", "health"]}` keeps what holds
        those top-level metadata values (inside the search). `ids=[…]` fetches the full bodies of cards from
        an earlier answer. `budget_tokens=` and `expand_top=` are the request's `disclosure` fields, by the
        same names."""
        shortcuts = {name: fields.pop(name) for name in ("budget_tokens", "expand_top") if name in fields}
        if shortcuts:
            fields["disclosure"] = {**fields.get("disclosure", {}), **shortcuts}
        if request is None:
            request = _model(RecallRequest, {"query": query, **fields} if query is not None else fields)
        return RecallResponse.model_validate(self._json("POST", "/v1/recall", _dump(request)))

    # -- episodes and facts as records -------------------------------------------------------------

    def get_episode(self, episode_id: str) -> EpisodeRecord:
        """One episode and the facts drawn from it. A forgotten one raises NotFound `episode_forgotten` whose
        details say who forgot it, when and why."""
        return EpisodeRecord.model_validate(self._json("GET", f"/v1/episodes/{_segment(episode_id)}"))

    def list_episodes(self, scope: str = "root", **filters: Any) -> EpisodePage:
        """One page of a scope's episodes (its subtree), newest remembered first. `filters`: session_id, since,
        until (datetimes or ISO text with a zone), metadata ({"key": value or [values]}), cursor (the
        previous page's `next_cursor`), limit (1..200, default 50)."""
        return EpisodePage.model_validate(self._json("GET", "/v1/episodes", query=_listing(scope, filters)))

    def forget_episode(self, episode_id: str, *, reason: str | None = None) -> Forgot:
        """Forget one episode for good (writer): gone from search at once, a tombstone in the change feed, who,
        when and `reason` kept; facts drawn from it are settled (`settled`: retracted, regrounded, stale or
        rebuilt). Not resent after it may have arrived: a second call is a 404 `episode_forgotten`."""
        query = {"reason": reason} if reason else {}
        path = f"/v1/episodes/{_segment(episode_id)}"
        return Forgot.model_validate(self._json("DELETE", path, query=query, idempotent=False))

    def get_fact(self, fact_id: str) -> FactRecord:
        """One fact with its source episodes, the ids of sources forgotten since, and its corrections."""
        return FactRecord.model_validate(self._json("GET", f"/v1/facts/{_segment(fact_id)}"))

    def list_facts(self, scope: str = "root", **filters: Any) -> FactPage:
        """One page of a scope's facts (its subtree, any status), newest first. `filters`: since, until (valid
        from), metadata (matched against the metadata of each fact's source episodes), cursor, limit."""
        return FactPage.model_validate(self._json("GET", "/v1/facts", query=_listing(scope, filters)))

    def forget_fact(self, fact_id: str, *, reason: str | None = None) -> Forgot:
        """Forget one fact for good (approver); its source episodes stay."""
        query = {"reason": reason} if reason else {}
        path = f"/v1/facts/{_segment(fact_id)}"
        return Forgot.model_validate(self._json("DELETE", path, query=query, idempotent=False))

    def correct_fact(self, fact_id: str, version: int, *, reason: str | None = None, **changes: Any) -> FactRecord:
        """Correct a fact at `version` (approver): `changes` among summary, entity, property, value, confidence,
        valid_until. Conflict `stale_version` when it changed since; the history keeps each correction."""
        fields = {"version": version, **changes, **({"reason": reason} if reason else {})}
        body = _dump(_model(CorrectFactRequest, fields))
        path = f"/v1/facts/{_segment(fact_id)}"
        return FactRecord.model_validate(self._json("PATCH", path, body, idempotent=False))

    # -- consolidation ----------------------------------------------------------------------------

    def consolidate(self, scopes: Sequence[str] | None = None) -> RunStarted:
        """Start a run over the dirty scopes (all, or those under `scopes`); returns at once (202)."""
        body = {"scopes": list(scopes)} if scopes else {}
        return RunStarted.model_validate(self._json("POST", "/v1/consolidate", body, idempotent=False))

    def get_run(self, run_id: str) -> RunView:
        return RunView.model_validate(self._json("GET", f"/v1/consolidations/{_segment(run_id)}"))

    def wait_run(
        self,
        run_id: str,
        *,
        timeout: float = 600.0,
        interval: float = 0.5,
        max_interval: float = 5.0,
        on_update: Callable[[RunView], None] | None = None,
    ) -> RunView:
        """Poll until the run leaves `running`; raises TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id)
            if on_update is not None:
                on_update(run)
            if run.finished:
                return run
            if time.monotonic() >= deadline:
                raise TimeoutError(f"run {run_id} still running after {timeout:.0f}s")
            self._sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 1.5, max_interval)

    # -- scopes and layers ------------------------------------------------------------------------

    def list_scopes(self, path: str = "root") -> list[ScopeView]:
        """The scope and its descendants, depth-first, with canonical paths."""
        answer = self._json("GET", "/v1/scopes", query={"path": path})
        return [ScopeView.model_validate(scope) for scope in answer["scopes"]]

    def create_scope(self, path: str, *, parents: bool = False) -> ScopeView:
        """Create a scope (admin); `parents=True` creates missing ancestors."""
        body = {"path": path, "parents": parents}
        return ScopeView.model_validate(self._json("POST", "/v1/scopes", body, idempotent=False))

    def rename_scope(self, path: str, new_path: str) -> ScopeView:
        """Rename the last segment (admin); the old path stays as an alias (`alias` in the answer)."""
        body = {"path": path, "new_path": new_path}
        return ScopeView.model_validate(self._json("POST", "/v1/scopes/rename", body, idempotent=False))

    def get_layers(self) -> dict[int, str]:
        return {int(depth): name for depth, name in self._json("GET", "/v1/layers")["layers"].items()}

    def put_layers(self, layers: Mapping[int, str]) -> dict[int, str]:
        """Replace the layer names (admin), e.g. `{1: "clients", 2: "services"}`."""
        body = {"layers": {str(depth): name for depth, name in layers.items()}}
        return {int(depth): name for depth, name in self._json("PUT", "/v1/layers", body)["layers"].items()}

    # -- curated memories -------------------------------------------------------------------------

    def create_memory(
        self, key: str, body: str, *, scope: str | None = None, tag: str | None = None, **fields: Any
    ) -> MemoryRecord:
        """A scoped (`scope`) or tagged (`tag="layer=value"` / `"layer=*"`) memory. A writer's is
        pending until an approver publishes it; an approver's is published at once."""
        given = {"key": key, "body": body, "scope": scope, "tag": tag, **fields}
        request = _model(CreateMemoryRequest, {k: v for k, v in given.items() if v is not None})
        answer = self._json("POST", "/v1/memories", _dump(request), idempotent=False)
        return MemoryRecord.model_validate(answer)

    def edit_memory(self, memory_id: str, *, version: int | None = None, **changes: Any) -> MemoryRecord:
        """Change fields; `version` (optimistic lock) must match the stored version, else 409."""
        request = _model(EditMemoryRequest, {**changes, **({"version": version} if version is not None else {})})
        answer = self._json("PATCH", f"/v1/memories/{_segment(memory_id)}", _dump(request), idempotent=False)
        return MemoryRecord.model_validate(answer)

    def archive_memory(self, memory_id: str) -> MemoryView:
        """Archive by id; the answer names the memory (key, target, status) without its body."""
        answer = self._json("POST", f"/v1/memories/{_segment(memory_id)}/archive", idempotent=False)
        return MemoryView.model_validate(answer)

    # -- review (approvers) -----------------------------------------------------------------------

    def approve_memory(self, memory_id: str, *, author: str | None = None) -> MemoryRecord:
        """Publish a pending memory or its pending revision (`author` picks whose, when several)."""
        body = {"author": author} if author else None
        answer = self._json("POST", f"/v1/memories/{_segment(memory_id)}/approve", body, idempotent=False)
        return MemoryRecord.model_validate(answer)

    def reject_memory(self, memory_id: str, reason: str, *, author: str | None = None) -> MemoryRecord:
        body = {"reason": reason, **({"author": author} if author else {})}
        answer = self._json("POST", f"/v1/memories/{_segment(memory_id)}/reject", body, idempotent=False)
        return MemoryRecord.model_validate(answer)

    def memory_history(self, memory_id: str) -> MemoryHistory:
        return MemoryHistory.model_validate(self._json("GET", f"/v1/memories/{_segment(memory_id)}/history"))

    def reviews(self, path: str | None = None, *, mine: bool = False) -> Reviews:
        """Approvers: the review queue (under `path`). Everyone, or `mine=True`: their own submissions."""
        query = {**({"path": path} if path else {}), **({"mine": "true"} if mine else {})}
        return Reviews.model_validate(self._json("GET", "/v1/reviews", query=query))

    # -- structure drafts (approvers) -------------------------------------------------------------

    def create_draft(self, operations: Sequence[Mapping[str, Any]]) -> DraftView:
        """A structural change (move, merge, delete, layers) with the preview of everything it affects."""
        answer = self._json("POST", "/v1/structure/drafts", {"operations": list(operations)}, idempotent=False)
        return DraftView.model_validate(answer)

    def get_draft(self, draft_id: str) -> DraftView:
        return DraftView.model_validate(self._json("GET", f"/v1/structure/drafts/{_segment(draft_id)}"))

    def publish_draft(self, draft_id: str, fingerprint: str) -> DraftView:
        """Apply exactly what the preview said; `fingerprint` (from the preview) guards against drift."""
        path = f"/v1/structure/drafts/{_segment(draft_id)}/publish"
        return DraftView.model_validate(self._json("POST", path, {"fingerprint": fingerprint}, idempotent=False))

    # -- erasure (admin) and STTP -----------------------------------------------------------------

    def erase_scope(self, path: str, *, dry_run: bool = True) -> Erasure:
        """Right to erasure: a dry run (the default) counts; `dry_run=False` deletes the subtree for good."""
        query = {"path": path, "dry_run": "true" if dry_run else "false"}
        return Erasure.model_validate(self._json("DELETE", "/v1/scopes", query=query, idempotent=dry_run))

    def validate_sttp(self, text: str, profile: str = "strict") -> SttpValidation:
        """Diagnostics for an STTP node and, when recoverable, its canonical strict-valid form."""
        return SttpValidation.model_validate(
            self._json("POST", "/v1/sttp/validate", {"text": text, "profile": profile})
        )

    # -- API keys (admin) -------------------------------------------------------------------------

    def create_key(self, principal: str, roles: Sequence[str]) -> CreatedKey:
        """A key for the caller's tenant; `api_key` is the secret, shown only in this answer."""
        body = {"principal": principal, "roles": list(roles)}
        return CreatedKey.model_validate(self._json("POST", "/v1/keys", body, idempotent=False))

    def list_keys(self) -> list[KeyView]:
        return [KeyView.model_validate(key) for key in self._json("GET", "/v1/keys")["keys"]]

    def revoke_key(self, key_id: str) -> None:
        self._json("POST", f"/v1/keys/{_segment(key_id)}/revoke")

    # -- change feed ---------------------------------------------------------------------------------

    def changes(self, cursor: str | None = None, limit: int = 100) -> ChangesPage:
        """One page of records changed after `cursor` (None: from the beginning), in a total order."""
        query = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        return ChangesPage.model_validate(self._json("GET", "/v1/changes", query=query))

    def iter_change_pages(self, cursor: str | None = None, *, page_size: int = 100) -> Iterator[ChangesPage]:
        """Pages until the feed is drained. Persist `page.next_cursor` once a page is processed: resuming
        from it after a crash neither skips nor repeats a record."""
        while True:
            page = self.changes(cursor, page_size)
            yield page
            if not page.has_more:
                return
            cursor = page.next_cursor

    def iter_changes(self, cursor: str | None = None, *, page_size: int = 100) -> Iterator[Change]:
        """Every change after `cursor`, page by page (see `iter_change_pages` to keep the cursor)."""
        for page in self.iter_change_pages(cursor, page_size=page_size):
            yield from page.changes


def _listing(scope: str, filters: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """The query of a list call: datetimes as ISO text, each metadata key as `metadata.<key>` (repeated for a
    list of values)."""
    unknown = set(filters) - {"session_id", "since", "until", "metadata", "cursor", "limit"}
    if unknown:
        raise InvalidInput(f"unknown filter {sorted(unknown)[0]!r}", code="invalid_filter")
    query: dict[str, str | list[str]] = {"scope": scope}
    for name, value in filters.items():
        if value is None or name == "metadata":
            continue
        query[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    for key, value in (filters.get("metadata") or {}).items():
        values = value if isinstance(value, list | tuple) else [value]
        query[f"metadata.{key}"] = [json.dumps(v) if isinstance(v, bool) else str(v) for v in values]
    return query


def _model(model: type[M], value: M | Mapping[str, Any]) -> M:
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise invalid_input(e) from None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
