"""`Client` and `AsyncClient`: the same methods, one over `httpx.Client`, the other over `httpx.AsyncClient`.

    from mneme_sdk import Client

    with Client("http://127.0.0.1:8080", api_key) as mneme:
        mneme.remember("root.acme", "Acme moved its year end to 31 March.", create_scope=True)
        print(mneme.recall("when is Acme's year end?", scope="root.acme").context)

Each method is a flow from `_operations.py` driven here: building the request, the retry rule and
parsing the answer exist once; only sending and sleeping differ between the two clients.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import httpx

from mneme_sdk import __version__
from mneme_sdk import _operations as op
from mneme_sdk._flow import Emit, Flow, RetryPolicy, Send, Sleep, drive
from mneme_sdk.models import Change, ChangesPage

if TYPE_CHECKING:
    import asyncio

P = ParamSpec("P")
T = TypeVar("T")
E = TypeVar("E")


class _Base:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        max_retry_after: float,
        headers: dict[str, str] | None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.retry = RetryPolicy(max_retries, backoff, max_backoff, max_retry_after)
        self._options: dict[str, Any] = {
            "base_url": self.base_url,
            "timeout": httpx.Timeout(timeout),
            "headers": {
                "User-Agent": f"mneme-sdk/{__version__}",
                **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
                **(headers or {}),
            },
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"


def _sync(flow: Callable[P, Flow[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(flow(*args, **kwargs))

    return functools.wraps(flow)(method)  # help() and inspect show the flow's parameters


def _sync_iter(flow: Callable[P, Flow[None]], _item: type[E]) -> Callable[Concatenate[Client, P], Iterator[E]]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[E]:
        return self._iterate(flow(*args, **kwargs))

    return functools.wraps(flow)(method)  # help() and inspect show the flow's parameters


def _async(flow: Callable[P, Flow[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(flow(*args, **kwargs))

    return functools.wraps(flow)(method)  # help() and inspect show the flow's parameters


def _async_iter(
    flow: Callable[P, Flow[None]], _item: type[E]
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[E]]:
    def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[E]:
        return self._iterate(flow(*args, **kwargs))

    return functools.wraps(flow)(method)  # help() and inspect show the flow's parameters


async def _asyncio_sleep(seconds: float) -> None:
    import asyncio  # here: a sync-only program does not pay for importing asyncio

    await asyncio.sleep(seconds)


class Client(_Base):
    """Every route of the v1 API as a typed method, over `httpx.Client`. Thread-safe.

    `timeout` is per request, in seconds. Retries: a 429 or 503 for every call, honouring
    `Retry-After`; other 5xx answers and dropped connections only for calls that are safe to repeat
    (reads, `remember`, `PUT /v1/layers`); `max_retries=0` turns them off. `transport` replaces the
    network (an `httpx.BaseTransport`: `httpx.MockTransport`, or a server's in-process one).
    Failures raise `mneme_sdk.errors.MnemeError` subclasses carrying the API's error code.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(
            base_url, api_key, timeout=timeout, max_retries=max_retries, backoff=backoff,
            max_backoff=max_backoff, max_retry_after=max_retry_after, headers=headers,
        )  # fmt: skip
        self.http = httpx.Client(transport=transport, **self._options)
        self._sleep = sleep

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, flow: Flow[T]) -> T:
        steps = self._steps(flow)
        try:
            value = next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise TypeError(f"the flow emitted {value!r}: iterate it")

    def _iterate(self, flow: Flow[None]) -> Iterator[Any]:
        yield from self._steps(flow)

    def _steps(self, flow: Flow[T]) -> Generator[Any, None, T]:
        """Carries out `drive(flow)`: yields what the flow emits, returns its value."""
        steps = drive(flow, self.retry)
        outcome: Any = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            outcome = None
            if isinstance(step, Emit):
                yield step.value
            elif isinstance(step, Sleep):
                self._sleep(step.seconds)
            else:
                try:
                    outcome = self.http.request(
                        step.method, step.path, params=step.query, content=step.content, headers=step.headers
                    )
                except httpx.TransportError as e:
                    outcome = e

    request = _sync(op.request)
    health = _sync(op.health)
    me = _sync(op.me)
    retrieve = _sync(op.retrieve)
    retrieve_json = _sync(op.retrieve_json)
    remember = _sync(op.remember)
    remember_messages = _sync(op.remember_messages)
    remember_batch = _sync(op.remember_batch)
    remember_many = _sync(op.remember_many)
    recall = _sync(op.recall)
    get_episode = _sync(op.get_episode)
    list_episodes = _sync(op.list_episodes)
    forget_episode = _sync(op.forget_episode)
    get_fact = _sync(op.get_fact)
    list_facts = _sync(op.list_facts)
    forget_fact = _sync(op.forget_fact)
    correct_fact = _sync(op.correct_fact)
    consolidate = _sync(op.consolidate)
    get_run = _sync(op.get_run)
    list_runs = _sync(op.list_runs)
    wait_run = _sync(op.wait_run)
    list_scopes = _sync(op.list_scopes)
    create_scope = _sync(op.create_scope)
    rename_scope = _sync(op.rename_scope)
    get_layers = _sync(op.get_layers)
    put_layers = _sync(op.put_layers)
    create_memory = _sync(op.create_memory)
    find_memory = _sync(op.find_memory)
    list_scope_memories = _sync(op.list_scope_memories)
    edit_memory = _sync(op.edit_memory)
    archive_memory = _sync(op.archive_memory)
    approve_memory = _sync(op.approve_memory)
    reject_memory = _sync(op.reject_memory)
    memory_history = _sync(op.memory_history)
    reviews = _sync(op.reviews)
    create_draft = _sync(op.create_draft)
    get_draft = _sync(op.get_draft)
    publish_draft = _sync(op.publish_draft)
    discard_draft = _sync(op.discard_draft)
    erase_scope = _sync(op.erase_scope)
    validate_sttp = _sync(op.validate_sttp)
    create_key = _sync(op.create_key)
    list_keys = _sync(op.list_keys)
    revoke_key = _sync(op.revoke_key)
    changes = _sync(op.changes)
    iter_change_pages = _sync_iter(op.iter_change_pages, ChangesPage)
    iter_changes = _sync_iter(op.iter_changes, Change)


class AsyncClient(_Base):
    """`Client`'s methods as coroutines (and async iterators for the change feed), over `httpx.AsyncClient`.

    `transport` is an `httpx.AsyncBaseTransport`. Use `async with AsyncClient(...) as mneme:`.
    At most `max_connections` requests are under way at once, each on a kept-alive connection; the others
    wait their turn, in order, and `timeout` starts when a request's turn comes: thousands of concurrent
    calls (e.g. a LangGraph store's `abatch`es) queue here, not in httpx's pool, whose waiting requests
    time out and whose bookkeeping grows with their number.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        max_connections: int = 100,
    ) -> None:
        super().__init__(
            base_url, api_key, timeout=timeout, max_retries=max_retries, backoff=backoff,
            max_backoff=max_backoff, max_retry_after=max_retry_after, headers=headers,
        )  # fmt: skip
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self.http = httpx.AsyncClient(transport=transport, limits=limits, **self._options)
        self._sleep = sleep or _asyncio_sleep
        self.max_connections = max_connections
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _turn(self) -> asyncio.Semaphore:
        """The queue of requests waiting for one of the `max_connections` (one per event loop)."""
        import asyncio  # here: a sync-only program does not pay for importing asyncio

        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Semaphore(self.max_connections)
        return turn

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        steps = drive(flow, self.retry)
        outcome: Any = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            outcome = await self._do(step)

    async def _iterate(self, flow: Flow[None]) -> AsyncIterator[Any]:
        steps = drive(flow, self.retry)
        outcome: Any = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration:
                return
            if isinstance(step, Emit):
                yield step.value
                outcome = None
            else:
                outcome = await self._do(step)

    async def _do(self, step: Send | Sleep | Emit) -> Any:
        if isinstance(step, Sleep):
            await self._sleep(step.seconds)
            return None
        if isinstance(step, Emit):
            raise TypeError(f"the flow emitted {step.value!r}: iterate it")
        try:
            async with self._turn():
                return await self.http.request(
                    step.method, step.path, params=step.query, content=step.content, headers=step.headers
                )
        except httpx.TransportError as e:
            return e

    request = _async(op.request)
    health = _async(op.health)
    me = _async(op.me)
    retrieve = _async(op.retrieve)
    retrieve_json = _async(op.retrieve_json)
    remember = _async(op.remember)
    remember_messages = _async(op.remember_messages)
    remember_batch = _async(op.remember_batch)
    remember_many = _async(op.remember_many)
    recall = _async(op.recall)
    get_episode = _async(op.get_episode)
    list_episodes = _async(op.list_episodes)
    forget_episode = _async(op.forget_episode)
    get_fact = _async(op.get_fact)
    list_facts = _async(op.list_facts)
    forget_fact = _async(op.forget_fact)
    correct_fact = _async(op.correct_fact)
    consolidate = _async(op.consolidate)
    get_run = _async(op.get_run)
    list_runs = _async(op.list_runs)
    wait_run = _async(op.wait_run)
    list_scopes = _async(op.list_scopes)
    create_scope = _async(op.create_scope)
    rename_scope = _async(op.rename_scope)
    get_layers = _async(op.get_layers)
    put_layers = _async(op.put_layers)
    create_memory = _async(op.create_memory)
    find_memory = _async(op.find_memory)
    list_scope_memories = _async(op.list_scope_memories)
    edit_memory = _async(op.edit_memory)
    archive_memory = _async(op.archive_memory)
    approve_memory = _async(op.approve_memory)
    reject_memory = _async(op.reject_memory)
    memory_history = _async(op.memory_history)
    reviews = _async(op.reviews)
    create_draft = _async(op.create_draft)
    get_draft = _async(op.get_draft)
    publish_draft = _async(op.publish_draft)
    discard_draft = _async(op.discard_draft)
    erase_scope = _async(op.erase_scope)
    validate_sttp = _async(op.validate_sttp)
    create_key = _async(op.create_key)
    list_keys = _async(op.list_keys)
    revoke_key = _async(op.revoke_key)
    changes = _async(op.changes)
    iter_change_pages = _async_iter(op.iter_change_pages, ChangesPage)
    iter_changes = _async_iter(op.iter_changes, Change)
