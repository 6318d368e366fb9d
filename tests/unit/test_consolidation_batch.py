"""A batch is a working set: stages pass ids and read once, and no batch outgrows a Step Functions state
(256 KiB): proposals are capped, and what does not fit waits for the next batch."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.consolidation.service import run_batch, run_stage
from mneme.consolidation.stages import STAGE_NAMES, Batch
from mneme.records import Proposal, Reading
from tests.unit.test_consolidation import WRITER, _scope, remember, settle
from tests.unit.test_consolidation_windows import say

STATE_LIMIT = 256 * 1024


def counted(services: Services, monkeypatch: pytest.MonkeyPatch, *names: str) -> Counter[str]:
    """Count the store calls of these names."""
    calls: Counter[str] = Counter()
    store = services.store
    for name in names:
        real = getattr(store, name)

        def call(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(store, name, call)
    return calls


def test_a_batch_reads_its_episodes_facts_and_scopes_once(
    services: Services, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scope with a fact already, and one new episode
    remember(services, "Maya: I moved to Berlin.")
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    remember(services, "Maya: My dog is called Biscuit.")
    settle(services, clock)
    # When its batch goes through every stage
    calls = counted(services, monkeypatch, "get_episodes", "list_facts", "get_facts", "get_scopes")
    batch = run_batch(
        services.consolidation.deps, Batch(tenant="acme", scope_id=_scope(services), run_id="r", started_at=clock.now())
    )
    # Then the episodes, the scope's facts and its ancestors were each read once (the episodes by collect's
    # query, and once more for the earlier turns of the period its roll-ups cover; the scope's chain one call
    # per level: root, root.acme), not once per stage (the code before read 8, 3 and 6 times in this run)
    assert batch.errors == [] and batch.counters["commit"]["facts_written"] == 1
    assert calls == {"get_episodes": 1, "list_facts": 1, "get_scopes": 2}


class Wordy:
    """A reasoner that says a lot about every turn: one fact each, its summary 400 characters of non-ASCII
    text (six bytes each once JSON-escaped)."""

    name, generative = "wordy", True

    def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
        said = [(t.speaker, t.text.split()[-1].rstrip("."), t.number) for t in turns]
        facts = [Proposal(entity=w, property="said", value=v, summary="é" * 400, sources=[n]) for w, v, n in said]
        return Reading(facts=facts, summary="ü" * 400)


def test_no_batch_outgrows_a_step_functions_state(services: Services, clock: Any) -> None:
    # Given 200 turns in 40 sessions (each given in one call), and a reasoner whose answers would take 500 KiB
    for n in range(40):
        say(services, f"s{n}", *[("Ana", f"Turn {n}-{t} about item{n}x{t}.") for t in range(5)])
        clock.advance(seconds=1)
    settle(services, clock)
    deps = services.consolidation.deps
    deps.reasoner = Wordy()
    sizes: list[int] = []
    # When batches run as Step Functions runs them, each stage's output a JSON state
    written = 0
    for _ in range(10):
        batch = Batch(tenant="acme", scope_id=_scope(services), run_id="r", started_at=clock.now())
        state = batch.model_dump(mode="json")
        for name in STAGE_NAMES:
            state = run_stage(deps, {"stage": name, "batch": state})
            sizes.append(len(json.dumps(state)))
        assert state["errors"] == []
        written += state["counters"].get("checkpoint", {}).get("advanced", 0)
        if not state["full"]:
            break
    # Then no state came near the limit, the batches that ran out of room left the rest to the next, and
    # every turn was consolidated once
    assert max(sizes) < STATE_LIMIT * 0.85
    assert written == 200
    facts = [f for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity]
    assert len(facts) == 200
