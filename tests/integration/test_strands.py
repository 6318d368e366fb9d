"""Strands Agents (`strands-agents`) with Mneme as its memory: `mneme_sdk.strands`'s hook provider and tools, in
a real Strands `Agent` whose model is a scripted stand-in (no network, tests/support/strands_model.py), against
the local server over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from strands import Agent

from mneme import cli
from mneme_sdk import Client
from mneme_sdk.strands import MnemeMemoryHooks, mneme_tools
from tests.support.strands_model import CallTool, ScriptedModel, last_user_text, tool_text

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ADA = "root.users.ada"


@pytest.fixture
def mneme(server: str, home: Path) -> Client:
    key_file, _ = cli.ensure_first_run()
    return Client(server, key_file.read_text().strip())


def agent(model: ScriptedModel, *hooks: MnemeMemoryHooks, tools: list[object] | None = None) -> Agent:
    return Agent(model=model, hooks=list(hooks), tools=tools or [], callback_handler=None)


def in_order(mneme: Client, session_id: str) -> list[str]:
    """The session's episodes in the order they were said (the list is newest remembered first)."""
    episodes = mneme.list_episodes(ADA, session_id=session_id).episodes
    return [e.content for e in sorted(episodes, key=lambda e: e.occurred_at)]


def test_turns_are_remembered_in_order_with_session_and_speaker(mneme: Client) -> None:
    # Given an agent with Mneme's hooks for ada, in a session
    model = ScriptedModel(["Noted: vegetarian, in Leeds.", "Trains it is."])
    talk = agent(model, MnemeMemoryHooks(mneme, ADA, session_id="chat-1", user="ada"))
    # When she says two things
    talk("I am vegetarian and I live in Leeds.")
    talk("I prefer trains to planes.")
    # Then the four turns are episodes of that session, in the order said, each with its speaker
    page = mneme.list_episodes(ADA, session_id="chat-1")
    said = [(e.metadata["speaker"], e.content) for e in sorted(page.episodes, key=lambda e: e.occurred_at)]
    assert said == [
        ("ada", "I am vegetarian and I live in Leeds."),
        ("assistant", "Noted: vegetarian, in Leeds."),
        ("ada", "I prefer trains to planes."),
        ("assistant", "Trains it is."),
    ]


def test_a_new_conversation_gets_a_recall_pack_that_history_never_keeps(mneme: Client) -> None:
    # Given what ada said in an earlier conversation
    first = ScriptedModel(["Noted."])
    agent(first, MnemeMemoryHooks(mneme, ADA, user="ada"))("I am vegetarian and I live in Leeds.")
    assert "Mneme" not in last_user_text(first.inputs[0])  # nothing was known before: nothing added
    # When a new agent, in a new session, is asked something that depends on it
    later = ScriptedModel([last_user_text])
    hooks = MnemeMemoryHooks(mneme, ADA, user="ada", budget_tokens=200)
    talk = agent(later, hooks)
    answer = str(talk("What should I eat tonight?"))
    # Then the model's input carried the pack after the question, and the agent's history does not
    seen = last_user_text(later.inputs[0])
    assert seen.startswith("What should I eat tonight?\n")
    assert "Mneme, your long-term memory" in seen and "I am vegetarian and I live in Leeds." in seen
    assert "I am vegetarian" in answer
    assert [m["content"] for m in talk.messages if m["role"] == "user"] == [[{"text": "What should I eat tonight?"}]]
    # And the pack is within the budget the hooks asked for (the server's estimate: 4 characters a token)
    pack = seen.split("\n\n", 2)[-1]
    assert len(pack) / 4 <= 200


def test_a_tool_loop_keeps_the_pack_and_remembers_only_the_words(mneme: Client) -> None:
    # Given ada's earlier statement and an agent that looks something up with Mneme's tools
    mneme.remember(ADA, "Ada's year end is 31 March.", create_scope=True)
    model = ScriptedModel([CallTool("recall", {"query": "year end"}), lambda m: f"Per memory: {tool_text(m)[:60]}"])
    hooks = MnemeMemoryHooks(mneme, ADA, session_id="chat-2", user="ada")
    talk = agent(model, hooks, tools=mneme_tools(mneme, ADA))
    talk("When is my year end?")
    # Then both model calls saw the pack (the second, after the tool result)
    assert all("Ada's year end is 31 March." in last_user_text(seen) for seen in model.inputs)
    assert "31 March" in tool_text(model.inputs[1])
    # And only the question and the final answer were remembered: no tool call, no tool result
    turns = in_order(mneme, "chat-2")
    assert turns[0] == "When is my year end?" and turns[1].startswith("Per memory: ") and len(turns) == 2


def test_the_tools_remember_list_recall_and_forget(mneme: Client) -> None:
    # Given an agent with only the tools, working in a scope nobody has written to
    script = [
        CallTool("recall", {"query": "allergies"}),
        CallTool("remember", {"content": "Ada is allergic to peanuts."}),
        CallTool("list", {}),
        lambda m: "listed",
    ]
    model = ScriptedModel(script)
    talk = agent(model, tools=mneme_tools(mneme, ADA, session_id="tools-1"))
    talk("Remember that I am allergic to peanuts.")
    # Then recall said nothing is known yet, remember created the scope, list shows the episode
    assert tool_text(model.inputs[1]) == f"Nothing is remembered under {ADA} yet."
    assert tool_text(model.inputs[2]).startswith(f"remembered in {ADA}: episode_id ep_")
    listed = tool_text(model.inputs[3])
    episode_id = listed.split(" ", 1)[0]
    assert listed.endswith("Ada is allergic to peanuts.") and episode_id.startswith("ep_")
    assert mneme.get_episode(episode_id).session_id == "tools-1"
    # When it recalls, then forgets, then forgets again
    script = [
        CallTool("recall", {"query": "what is ada allergic to?"}),
        CallTool("forget", {"episode_id": episode_id, "reason": "ada asked"}),
        CallTool("forget", {"episode_id": episode_id}),
        lambda m: "done",
    ]
    model = ScriptedModel(script)
    agent(model, tools=mneme_tools(mneme, ADA))("What am I allergic to? Then forget it.")
    assert "Ada is allergic to peanuts." in tool_text(model.inputs[1])
    assert tool_text(model.inputs[2]) == f"forgot {episode_id}"
    # Then a refused call is a tool error naming the API's code, and recall no longer finds it
    last = model.inputs[3][-1]["content"][0]["toolResult"]
    assert last["status"] == "error" and last["content"][0]["text"].startswith("episode_forgotten: ")
    assert mneme.recall("peanuts", scope=ADA).results == []


def test_memory_being_unreachable_never_stops_the_agent(mneme: Client) -> None:
    # Given hooks whose Mneme cannot be reached
    offline = Client("http://127.0.0.1:9", "mnk_unused", max_retries=0, timeout=2)
    hooks = MnemeMemoryHooks(offline, ADA, session_id="chat-3", user="ada")
    model = ScriptedModel(["Hello Ada.", "Still here."])
    talk = agent(model, hooks)
    # When the agent is used, it answers without memory
    assert str(talk("Hello.")).strip() == "Hello Ada."
    # And the unsaved turns wait for the next write, which lands once Mneme is back
    hooks.client = mneme
    assert str(talk("Are you there?")).strip() == "Still here."
    turns = in_order(mneme, "chat-3")
    assert turns == ["Hello.", "Hello Ada.", "Are you there?", "Still here."]


def test_turns_mneme_refuses_are_dropped_and_a_long_turn_is_kept_up_to_the_limit(mneme: Client) -> None:
    # Given a reader's key: it may recall but not remember
    reader = Client(mneme.base_url, mneme.create_key("reading-agent", ["reader"]).api_key)
    hooks = MnemeMemoryHooks(reader, ADA, session_id="chat-4", user="ada")
    talk = agent(ScriptedModel(["Hello.", "Hello again."]), hooks)
    # When it talks twice, each write is refused (403): the turns are dropped, not kept growing
    assert str(talk("Hi.")).strip() == "Hello."
    assert str(talk("Hi again.")).strip() == "Hello again."
    assert hooks._unsaved == []
    # And with a writer's key a reply past the API's 32 KiB content limit is kept, cut to the limit
    long_reply = "é" * 20_000  # 40,000 bytes
    writer = MnemeMemoryHooks(mneme, ADA, session_id="chat-5", user="ada")
    agent(ScriptedModel([long_reply]), writer)("Say it long.")
    kept = [e.content for e in mneme.list_episodes(ADA, session_id="chat-5").episodes if e.content != "Say it long."]
    assert kept == ["é" * 16_384]
