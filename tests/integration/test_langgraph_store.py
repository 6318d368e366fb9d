"""`mneme_sdk.langgraph.MnemeStore` with LangGraph itself (`langgraph` from PyPI) against the local server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError, Item

from mneme import cli
from mneme_sdk import AsyncClient, Client
from mneme_sdk.langgraph import MnemeStore, decode, encode

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture
def key(server: str, home: Path) -> str:
    key_file, _ = cli.ensure_first_run()
    return key_file.read_text().strip()


@pytest.fixture
def store(server: str, key: str) -> MnemeStore:
    return MnemeStore(Client(server, key), AsyncClient(server, key), scope="root.agents")


def test_put_get_update_delete_and_names_outside_mneme_grammar(store: MnemeStore, server: str, key: str) -> None:
    namespace = ("users", "Alice@Example_com", "prefs")
    store.put(namespace, "food_preference", {"likes": "pizza", "spicy": False})
    item = store.get(namespace, "food_preference")
    assert isinstance(item, Item) and item.value == {"likes": "pizza", "spicy": False}
    assert (item.namespace, item.key) == (namespace, "food_preference")
    assert item.created_at.tzinfo is not None
    # The item is a curated memory in a scope under the store's scope, its value the body as JSON
    scope = store.scope_of(namespace)
    assert scope.startswith("root.agents.users.x--") and scope.endswith(".prefs")
    (block,) = Client(server, key).retrieve_json(scope).blocks
    assert block.key == encode("food_preference", store_key_pattern()) and json.loads(block.body)["likes"] == "pizza"
    # put again overwrites (a new revision of the same memory); delete archives it
    store.put(namespace, "food_preference", {"likes": "sushi"})
    updated = store.get(namespace, "food_preference")
    assert updated is not None and updated.value == {"likes": "sushi"} and updated.created_at == item.created_at
    assert len(Client(server, key).memory_history(block.memory_id).history) == 2
    store.delete(namespace, "food_preference")
    assert store.get(namespace, "food_preference") is None
    assert store.get(("nobody",), "nothing") is None  # a namespace never written: no scope, no item
    assert decode(encode("Ünïcode key_1", store_key_pattern())) == "Ünïcode key_1"
    with pytest.raises(InvalidNamespaceError):
        store.put(tuple(f"n{i}" for i in range(8)), "k", {"too": "deep"})  # root.agents leaves 7 levels


def store_key_pattern() -> Any:
    from mneme_sdk.langgraph import KEY

    return KEY


def test_search_lists_filters_and_ranks(store: MnemeStore) -> None:
    store.put(("docs", "acme"), "year-end", {"text": "Acme's year end is 31 March.", "kind": "finance", "rank": 1})
    store.put(("docs", "acme"), "vat", {"text": "Acme is on the flat-rate VAT scheme.", "kind": "tax", "rank": 2})
    store.put(("docs", "globex"), "payroll", {"text": "Globex runs payroll weekly.", "kind": "finance", "rank": 3})
    store.put(("notes",), "other", {"text": "Unrelated note about the weather.", "kind": "misc", "rank": 4})
    # Without a query: every item under the prefix, by namespace and key; offset and limit page them
    listed = store.search(("docs",))
    assert [(i.namespace, i.key) for i in listed] == [
        (("docs", "acme"), "vat"), (("docs", "acme"), "year-end"), (("docs", "globex"), "payroll"),
    ]  # fmt: skip
    assert [i.key for i in store.search(("docs",), limit=1, offset=1)] == ["year-end"]
    # Filters on the values: equality and comparison operators
    assert {i.key for i in store.search(("docs",), filter={"kind": "finance"})} == {"year-end", "payroll"}
    assert {i.key for i in store.search((), filter={"rank": {"$gte": 3}})} == {"payroll", "other"}
    assert [i.key for i in store.search(("docs",), filter={"kind": {"$ne": "finance"}})] == ["vat"]
    # With a query: Mneme's ranked recall under the prefix, with scores
    ranked = store.search(("docs",), query="when is the year end?", limit=2)
    assert ranked[0].key == "year-end" and ranked[0].score is not None and ranked[0].score > 0
    assert all(i.namespace[0] == "docs" for i in ranked)
    assert [i.key for i in store.search(("docs",), query="Acme", filter={"kind": "tax"})] == ["vat"]
    assert store.search(("missing",), query="anything") == []
    # list_namespaces: the namespaces holding items, with prefix/suffix conditions and max_depth
    assert store.list_namespaces() == [("docs", "acme"), ("docs", "globex"), ("notes",)]
    assert store.list_namespaces(prefix=("docs",)) == [("docs", "acme"), ("docs", "globex")]
    assert store.list_namespaces(suffix=("acme",)) == [("docs", "acme")]
    assert store.list_namespaces(prefix=("docs", "*")) == [("docs", "acme"), ("docs", "globex")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("notes",)]


def test_batch_and_the_async_forms(store: MnemeStore) -> None:
    from langgraph.store.base import GetOp, PutOp, SearchOp

    async def agent() -> tuple[Any, ...]:
        await store.aput(("memories", "u1"), "m1", {"text": "prefers email"})
        got = await store.aget(("memories", "u1"), "m1")
        found = await store.asearch(("memories",), query="which email does u1 prefer?")
        results = await store.abatch(
            [PutOp(("memories", "u1"), "m2", {"text": "works in Leeds"}), GetOp(("memories", "u1"), "m2")]
        )
        await store.adelete(("memories", "u1"), "m1")
        return got, found, results, await store.aget(("memories", "u1"), "m1"), await store.alist_namespaces()

    got, found, results, gone, namespaces = asyncio.run(agent())
    assert got.value == {"text": "prefers email"} and found[0].key == "m1"
    assert results[0] is None and results[1].value == {"text": "works in Leeds"}
    assert gone is None and namespaces == [("memories", "u1")]
    sync = store.batch([SearchOp(("memories",)), GetOp(("memories", "u1"), "m2")])
    assert [i.key for i in sync[0]] == ["m2"] and sync[1].key == "m2"


def test_another_tenant_sees_nothing(store: MnemeStore, server: str, capsys: pytest.CaptureFixture[str]) -> None:
    store.put(("secrets",), "k", {"text": "only for tenant default"})
    assert cli.main(["keys", "create", "--tenant", "acme", "--principal", "ci", "--roles", "admin", "--json"]) == 0
    other_key = json.loads(capsys.readouterr().out)["api_key"]
    other = MnemeStore(Client(server, other_key), scope="root.agents")
    assert other.get(("secrets",), "k") is None
    assert other.search(("secrets",)) == [] and other.search((), query="only for tenant default") == []
    assert other.list_namespaces() == []


class State(TypedDict):
    user: str
    message: str
    reply: str


def remember_and_answer(state: State, runtime: Runtime[None]) -> dict[str, str]:
    """A node with no LLM: it stores what the user says about themselves and answers from the store."""
    assert runtime.store is not None
    namespace = ("profiles", state["user"])
    if state["message"].startswith("I like "):
        runtime.store.put(namespace, "likes", {"text": state["message"].removeprefix("I like ")})
        return {"reply": "noted"}
    hits = runtime.store.search(namespace, query=state["message"], limit=1)
    return {"reply": f"you like {hits[0].value['text']}" if hits else "I don't know yet"}


def test_a_langgraph_graph_keeps_memory_across_threads(store: MnemeStore) -> None:
    builder = StateGraph(State)
    builder.add_node("agent", remember_and_answer)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    first = graph.invoke(
        {"user": "alice", "message": "I like hiking", "reply": ""}, {"configurable": {"thread_id": "1"}}
    )
    assert first["reply"] == "noted"
    # A new thread (a new conversation) still finds what the first one stored, in Mneme
    later = {"configurable": {"thread_id": "2"}}
    assert (
        graph.invoke({"user": "alice", "message": "what do I like?", "reply": ""}, later)["reply"] == "you like hiking"
    )
    assert (
        graph.invoke({"user": "bob", "message": "what do I like?", "reply": ""}, later)["reply"] == "I don't know yet"
    )
