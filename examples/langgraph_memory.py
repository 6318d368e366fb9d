"""A LangGraph agent whose long-term memory is Mneme, with no LLM: memory flows from one conversation to the next.

    make serve                                   # in another shell: Mneme on http://127.0.0.1:8080
    .venv/bin/python examples/langgraph_memory.py

The graph has two nodes. `remember` stores what the user states about themselves ("I ...") in the
store, under the user's namespace; `answer` searches that namespace for what is relevant to the
message and hands it to the chat model in the system prompt. The chat model is a stand-in that
answers from its system prompt, so what you see is exactly what came back from Mneme. Thread 2 is a
new conversation: it has no messages of thread 1, only what the store kept.

MNEME_URL and MNEME_API_KEY choose another API (default: the local one and .mneme/admin.key).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from mneme_sdk import AsyncClient, Client
from mneme_sdk.langgraph import MnemeStore


class Context(TypedDict):
    user: str  # whose memory: the namespace ("users", user)


class EchoMemoryModel(GenericFakeChatModel):
    """A fake chat model: it answers with the memories its system prompt carries."""

    def _generate(self, messages: list[BaseMessage], *args: object, **kwargs: object):  # type: ignore[override]
        system = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
        remembered = str(system).removeprefix("What you remember about the user: ")
        self.messages = iter([AIMessage(f"(from memory) {remembered}")])
        return super()._generate(messages, *args, **kwargs)  # type: ignore[arg-type]


model = EchoMemoryModel(messages=iter([]))


def remember(state: MessagesState, runtime: Runtime[Context]) -> dict[str, list[BaseMessage]]:
    said = str(state["messages"][-1].content)
    if said.startswith("I ") and runtime.store is not None:
        runtime.store.put(("users", runtime.context["user"]), uuid.uuid4().hex, {"text": said})
    return {"messages": []}


def answer(state: MessagesState, runtime: Runtime[Context]) -> dict[str, list[BaseMessage]]:
    assert runtime.store is not None
    question = str(state["messages"][-1].content)
    ranked = runtime.store.search(("users", runtime.context["user"]), query=question, limit=3)
    known = "; ".join(m.value["text"] for m in ranked if m.score) or "nothing yet"  # 0.0: below the floor
    prompt = SystemMessage(f"What you remember about the user: {known}")
    return {"messages": [model.invoke([prompt, *state["messages"]])]}


def main() -> None:
    url = os.environ.get("MNEME_URL", "http://127.0.0.1:8080")
    key = os.environ.get("MNEME_API_KEY") or Path(".mneme/admin.key").read_text().strip()
    # search ranks every item of the namespace; recall's balanced floor scores only those relevant to the question
    store = MnemeStore(Client(url, key), AsyncClient(url, key), scope="root.examples", strictness="balanced")

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)

    user = f"ada-{uuid.uuid4().hex[:6]}"  # a new user each run, so the output is the same every time
    conversations = [
        ("thread-1", "I am vegetarian and I live in Leeds."),
        ("thread-1", "I prefer trains to planes."),
        ("thread-2", "Where should I go for a vegetarian dinner?"),
        ("thread-3", "Should I take trains or planes to London?"),
    ]
    for thread, message in conversations:
        config: RunnableConfig = {"configurable": {"thread_id": f"{user}-{thread}"}}
        result = graph.invoke({"messages": [HumanMessage(message)]}, config, context={"user": user})
        print(f"[{thread}] user: {message}\n[{thread}] agent: {result['messages'][-1].content}")
    print(f"stored in Mneme under {store.scope_of(('users', user))}:")
    for item in sorted(store.search(("users", user)), key=lambda item: item.created_at):  # in the order kept
        print(f"  {item.key[:8]}… {item.value['text']}")


if __name__ == "__main__":
    main()
