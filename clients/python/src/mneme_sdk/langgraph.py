"""`MnemeStore`: LangGraph's long-term memory (`BaseStore`) kept in Mneme. Needs `mneme-sdk[langgraph]`.

    from mneme_sdk import AsyncClient, Client
    from mneme_sdk.langgraph import MnemeStore

    store = MnemeStore(Client(url, key), AsyncClient(url, key), scope="root.agents")
    graph = builder.compile(store=store)

**What backs an item.** A store item is addressed by a namespace and a key, overwritten by `put`
and removed by `delete`: that is a curated memory, addressed by its scope and key, edited in place
(with its revision history) and archived. Episodes are immutable observations and facts are derived
by consolidation, so neither can be overwritten or keyed by the caller. An item's value is the
memory's body, as JSON; a namespace is a scope under the store's `scope`, one segment per element.

**Names.** A scope segment is `[a-z0-9][a-z0-9-]{0,62}` and a memory key `[a-z0-9][a-z0-9._-]{0,127}`;
an element or key outside that (capitals, `_`, `@`, …) or starting with `x--` is stored as `x--`
and its UTF-8 bytes in lower-case base32, and read back as it was given. A namespace has at most
8 elements, fewer when `scope` is below root.

**Search.** With a `query`, every item under the namespace prefix that passes the filter, ranked: what
Mneme's recall (vector + BM25, at the store's `strictness`) scores first, with its score, then the rest
in the listing's order, with score 0.0; `offset` and `limit` page that one ranking. Without a query, every
item under the prefix, in the listing's order (scope path, then key; a name stored encoded sorts by its
stored form), read only as far as the page asked for needs. `filter` is applied to the values: `{"field": value}` or
`{"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}`.

**Indexing.** `put(..., index=False)` stores an item that recall never finds (the memory's `search_text`
is empty); `index=["field", "a.b", "items[*].name"]` makes the text at those paths what recall searches.
The key's role decides what it may do: an approver's writes are published at once; a writer's stay
pending, visible to it alone, until an approver publishes them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, get_args

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from mneme_sdk import _operations as op
from mneme_sdk._flow import Flow
from mneme_sdk.client import AsyncClient, Client
from mneme_sdk.errors import Conflict, Forbidden, MemoryNotFound, ScopeNotFound
from mneme_sdk.models import MemoryRecord, Strictness
from mneme_sdk.models import Result as Hit

SEGMENT = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
KEY = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
ENCODED = "x--"
MAX_DEPTH = 8
RANKED = 200  # memories recall ranks for a search with a query (its most); the rest follow, unscored
PAGE = 200  # memories a listing request returns (the most it may)
PACK = 32  # the least context pack (tokens) recall builds: the store reads its results, never its pack
OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def encode(name: str, pattern: re.Pattern[str]) -> str:
    """`name` as a scope segment or memory key: itself when it fits, else `x--` + base32 of its bytes."""
    if pattern.fullmatch(name) and not name.startswith(ENCODED):
        return name
    encoded = ENCODED + base64.b32encode(name.encode()).decode().rstrip("=").lower()
    if not pattern.fullmatch(encoded):
        raise InvalidNamespaceError(f"{name!r} is too long to name a Mneme scope segment or memory key")
    return encoded


def decode(name: str) -> str:
    if not name.startswith(ENCODED):
        return name
    text = name.removeprefix(ENCODED).upper()
    return base64.b32decode(text + "=" * (-len(text) % 8)).decode()


def matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    for field, wanted in (filter or {}).items():
        actual = value.get(field)
        conditions = wanted if isinstance(wanted, dict) and wanted and set(wanted) <= set(OPERATORS) else None
        if conditions is None:
            if actual != wanted:
                return False
            continue
        try:
            if not all(OPERATORS[name](actual, operand) for name, operand in conditions.items()):
                return False
        except TypeError:  # e.g. None > 3: not a match
            return False
    return True


def search_text(value: dict[str, Any], index: Literal[False] | list[str] | None) -> str | None:
    """What Mneme searches an item by: None for the whole item (the memory's own text), "" for nothing
    (`index=False`: stored, listed and filtered, never searched), else the text at the `index` paths
    (LangGraph's path syntax: `"text"`, `"meta.title"`, `"items[*].name"`, `"$"`), one line each."""
    if index is None:
        return None
    if index is False:
        return ""
    return "\n".join(text for path in index for text in get_text_at_path(value, path) if text.strip())


class MnemeStore(BaseStore):
    """A LangGraph `BaseStore` over Mneme's curated memories (see the module's docstring).

    `client` serves `batch` (and the sync methods), `aclient` serves `abatch` (and the async ones);
    without `aclient`, `abatch` runs `batch` in a worker thread.
    """

    supports_ttl = False

    def __init__(
        self,
        client: Client | None = None,
        aclient: AsyncClient | None = None,
        *,
        scope: str = "root",
        strictness: Strictness = "recall",
    ):
        if client is None and aclient is None:
            raise ValueError("give a Client, an AsyncClient or both")
        if strictness not in get_args(Strictness):
            raise ValueError(f"strictness is one of {get_args(Strictness)}, not {strictness!r}")
        self.client, self.aclient = client, aclient
        self.scope = scope
        self.strictness = strictness
        self.depth = len(scope.split(".")) - 1
        self._scopes: set[str] = set()  # created (or found) by this store

    # -- LangGraph's two entry points -------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError("MnemeStore was given no sync Client: use the async methods")
        return [self.client._run(self._flow(o)) for o in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations concurrently, with the results of running them one after another (`runs`);
        the `AsyncClient` queues their requests for its connections. A failure is raised once every
        operation of its run has ended (the first failing operation's, in the given order)."""
        ops = list(ops)
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, ops)
        aclient = self.aclient
        results: list[Result] = [None] * len(ops)
        for run in runs(ops):
            outcomes = await asyncio.gather(*(aclient._run(self._flow(ops[i])) for i in run), return_exceptions=True)
            for i, outcome in zip(run, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    raise outcome
                results[i] = outcome
        return results

    def _flow(self, o: Op) -> Flow[Any]:
        if isinstance(o, GetOp):
            return self._get(o.namespace, o.key)
        if isinstance(o, SearchOp):
            return self._search(o)
        if isinstance(o, PutOp):
            return self._put(o.namespace, o.key, o.value, o.index)
        if isinstance(o, ListNamespacesOp):
            return self._list_namespaces(o)
        raise ValueError(f"unknown operation {o!r}")

    # -- names ------------------------------------------------------------------------------------

    def scope_of(self, namespace: tuple[str, ...]) -> str:
        if not namespace or len(namespace) + self.depth > MAX_DEPTH:
            raise InvalidNamespaceError(f"a namespace has 1 to {MAX_DEPTH - self.depth} elements here: {namespace}")
        return ".".join([self.scope, *(encode(name, SEGMENT) for name in namespace)])

    def namespace_of(self, scope: str) -> tuple[str, ...]:
        inner = scope.removeprefix(self.scope).lstrip(".")
        return tuple(decode(segment) for segment in inner.split(".")) if inner else ()

    # -- operations as flows (the same code for the sync and the async client) --------------------

    def _find(self, scope: str, key: str) -> Flow[MemoryRecord | None]:
        """The memory keyed `key` in exactly `scope`, as the caller sees it, in one request (`find_memory`:
        one read of the store, whatever the scope holds), or None (also when the scope does not exist)."""
        try:
            found: MemoryRecord = yield from op.find_memory(scope, key)
        except (MemoryNotFound, ScopeNotFound):
            return None
        return found

    def _get(self, namespace: tuple[str, ...], key: str) -> Flow[Item | None]:
        """One request. A writer's own open edit of a published item is what it reads back, as retrieve shows it."""
        record = yield from self._find(self.scope_of(namespace), encode(key, KEY))
        return None if record is None else Item(**fields_of(record, namespace, key))

    def _put(
        self, namespace: tuple[str, ...], key: str, value: Any, index: Literal[False] | list[str] | None
    ) -> Flow[None]:
        """A new key is one write; a taken one (a Conflict) is one lookup and one edit, and the server writes
        nothing when nothing changed; a delete (`value` None) is one lookup and one archive."""
        scope, memory_key = self.scope_of(namespace), encode(key, KEY)
        if value is None:
            found = yield from self._find(scope, memory_key)
            if found is not None:
                yield from op.archive_memory(found.memory_id)
            return None
        body = json.dumps(value, ensure_ascii=False, sort_keys=True)
        searched = search_text(value, index)
        fields = {} if searched is None else {"search_text": searched}
        if scope not in self._scopes:
            # it exists already, or the key may not create scopes (an admin's may): then it must exist
            with contextlib.suppress(Conflict, Forbidden):
                yield from op.create_scope(scope, parents=True)
            self._scopes.add(scope)
        try:
            yield from op.create_memory(memory_key, body, scope=scope, **fields)
        except Conflict:  # the key is taken: this put overwrites it
            found = yield from self._find(scope, memory_key)
            if found is None:
                raise
            yield from op.edit_memory(found.memory_id, body=body, search_text=searched)
        return None

    def _memories_under(
        self, prefix: str, keep: Callable[[MemoryRecord], bool] | None = None, need: int = 0
    ) -> Flow[list[MemoryRecord]]:
        """The memories of the scopes under `prefix` (the scope itself included) in the listing's order (scope
        path, key), as the caller reads them (`list_scope_memories`, a page of 200 a request): for a key that
        has both, its own draft, not the published memory (as `get`). With `keep`, the listing stops after the
        first page by which `need` whole memories were kept (a key's records are adjacent: the page's last key
        may go on into the next page, so it is left out)."""
        records: dict[tuple[str, str], MemoryRecord] = {}
        cursor: str | None = None
        last: tuple[str, str] | None = None
        kept = 0
        while True:
            try:
                page = yield from op.list_scope_memories(prefix, cursor=cursor, limit=PAGE)
            except ScopeNotFound:
                return []
            for record in page.memories:
                slot = (record.target, record.key)
                if last is not None and slot != last and keep is not None and keep(records[last]):
                    kept += 1  # the key before is whole
                if slot not in records or record.status == "pending":  # its own draft (never another's)
                    records[slot] = record
                last = slot
            if page.next_cursor is None:
                return list(records.values())
            if keep is not None and kept >= need:
                return list(records.values())[:-1]
            cursor = page.next_cursor

    def _search(self, o: SearchOp) -> Flow[list[SearchItem]]:
        """Every item under the prefix that passes the filter, paged by `offset` and `limit`. With a query,
        ranked: first those recall scores (its order, its scores), then the rest (in the listing's order,
        score 0.0): recall leaves out what falls under its relevance floor and what is not searched
        (`index=False`). The ranking does not depend on the page asked for, so pages never overlap. Recall's
        hits carry their items; the rest are read from the listing of the prefix, only when the page needs
        them, and only as far as it needs them."""
        prefix = self.scope_of(o.namespace_prefix) if o.namespace_prefix else self.scope
        wanted = o.offset + o.limit
        scored: list[SearchItem] = []
        ranked: set[tuple[str, str]] = set()  # (scope, key) of the items recall scored
        if o.query:
            try:  # always the same number of hits, so that every page is cut from one ranking
                answer = yield from op.recall(
                    o.query, scope=prefix, kinds=["memory"], limit=RANKED, strictness=self.strictness,
                    budget_tokens=PACK,
                )  # fmt: skip
            except ScopeNotFound:
                return []
            hits: dict[tuple[str, str], Hit] = {}  # an item once: its best hit (a draft and the published memory)
            for r in answer.results:
                if r.kind == "memory" and r.key is not None and r.scope != self.scope:
                    hits.setdefault((r.scope, r.key), r)
            ranked = set(hits)
            scored = [hit for r in hits.values() if matches((hit := self._hit_item(r)).value, o.filter)]
            if len(scored) >= wanted:
                return scored[o.offset : wanted]
        score = 0.0 if o.query else None

        def unranked(r: MemoryRecord) -> SearchItem | None:  # an item recall did not score, if the filter passes it
            if (r.target, r.key) in ranked or r.target == self.scope:
                return None
            found = SearchItem(**fields_of(r, self.namespace_of(r.target), decode(r.key)), score=score)
            return found if matches(found.value, o.filter) else None

        keep, need = (lambda r: unranked(r) is not None), wanted - len(scored)
        records = yield from self._memories_under(prefix, keep=keep, need=need)
        rest = [found for r in records if (found := unranked(r)) is not None]
        return [*scored, *rest][o.offset : wanted]

    def _hit_item(self, hit: Hit) -> SearchItem:
        """A recall hit on a memory as a search item, with its score."""
        assert hit.key is not None
        return SearchItem(
            namespace=self.namespace_of(hit.scope), key=decode(hit.key), value=json.loads(hit.content),
            created_at=hit.created_at, updated_at=hit.occurred_at, score=hit.score,
        )  # fmt: skip

    def _list_namespaces(self, o: ListNamespacesOp) -> Flow[list[tuple[str, ...]]]:
        records = yield from self._memories_under(self.scope)
        namespaces = sorted({self.namespace_of(r.target) for r in records} - {()})
        for condition in o.match_conditions or ():
            namespaces = [ns for ns in namespaces if _match(ns, condition.path, condition.match_type)]
        if o.max_depth is not None:
            namespaces = sorted({ns[: o.max_depth] for ns in namespaces})
        return namespaces[o.offset : o.offset + o.limit]


def fields_of(record: MemoryRecord, namespace: tuple[str, ...], key: str) -> dict[str, Any]:
    """The fields of the item a memory holds, as the caller reads it: its own open edit of a published one."""
    revision = record.pending_revision or {}
    body = revision.get("changes", {}).get("body", record.body)
    updated = datetime.fromisoformat(revision["updated_at"]) if revision else record.updated_at
    value = json.loads(body)
    return {"namespace": namespace, "key": key, "value": value, "created_at": record.created_at, "updated_at": updated}


def runs(ops: list[Op]) -> list[list[int]]:
    """The operations' indexes in consecutive runs whose operations may go at once with the results of going
    one after another: a run ends before an operation that reads what the run writes (a get of a put item,
    a search or listing over its namespace), or writes what the run reads or writes."""
    found: list[list[int]] = []
    written: set[tuple[tuple[str, ...], str]] = set()
    read: set[tuple[tuple[str, ...], str]] = set()
    scanned: list[tuple[str, ...]] = []  # the prefixes the run's searches and listings read
    for i, o in enumerate(ops):
        if isinstance(o, PutOp):
            item = (o.namespace, o.key)
            clash = item in written or item in read or any(o.namespace[: len(p)] == p for p in scanned)
        elif isinstance(o, GetOp):
            item = (o.namespace, o.key)
            clash = item in written
        else:
            prefix = o.namespace_prefix if isinstance(o, SearchOp) else ()
            clash = any(namespace[: len(prefix)] == prefix for namespace, _ in written)
        if clash or not found:
            found.append([])
            written, read, scanned = set(), set(), []
        found[-1].append(i)
        if isinstance(o, PutOp):
            written.add((o.namespace, o.key))
        elif isinstance(o, GetOp):
            read.add((o.namespace, o.key))
        else:
            scanned.append(o.namespace_prefix if isinstance(o, SearchOp) else ())
    return found


def _match(namespace: tuple[str, ...], path: tuple[str, ...], kind: str) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if kind == "prefix" else namespace[len(namespace) - len(path) :]
    return all(wanted in ("*", actual) for wanted, actual in zip(path, part, strict=True))


__all__ = ["MnemeStore"]
