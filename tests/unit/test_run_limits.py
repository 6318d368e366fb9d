"""10,000 dirty scopes: a run takes a bounded share, whose Step Functions input stays within its limit."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from mneme.adapters.orchestrators import StepFunctionsOrchestrator
from mneme.bootstrap import Services
from mneme.consolidation.service import MAX_TARGETS_PER_RUN
from mneme.records import Run

STEP_FUNCTIONS_INPUT_LIMIT = 256 * 1024


class ManyDirty:
    """A store double: 10,000 dirty scopes in one tenant (only `list_dirty` is used)."""

    def __init__(self, count: int) -> None:
        self.marks = [("acme", str(uuid.uuid4())) for _ in range(count)]

    def list_dirty(self, tenant: str | None, limit: int) -> list[tuple[str, str]]:
        return [m for m in self.marks if tenant in (None, m[0])][:limit]


class CapturingClient:
    def __init__(self) -> None:
        self.inputs: list[str] = []

    def start_execution(self, **params: Any) -> dict[str, Any]:
        self.inputs.append(params["input"])
        return {"executionArn": "arn:aws:states:eu-west-1:1:execution:m:" + params["name"]}


def test_ten_thousand_dirty_scopes_give_a_run_of_bounded_size_within_the_input_limit(services: Services) -> None:
    # Given 10,000 dirty scopes
    store = ManyDirty(10_000)
    services.consolidation.deps.store = store  # type: ignore[assignment]
    # When a run picks its targets and Step Functions is started with them
    targets = services.consolidation.targets("acme", None)
    client = CapturingClient()
    run = Run(tenant="acme" * 32, run_id=f"run_{uuid.uuid4().hex}", started_at=datetime(2026, 11, 30), requested_by="s")
    StepFunctionsOrchestrator("arn:aws:states:eu-west-1:1:stateMachine:m", client=client).start(run, targets)
    # Then the run takes MAX_TARGETS_PER_RUN of them (the rest stay dirty for the next run)
    assert len(targets) == MAX_TARGETS_PER_RUN < 10_000
    assert targets == [scope_id for _, scope_id in store.marks[:MAX_TARGETS_PER_RUN]]
    # and the execution input (the longest tenant name, every id) stays well inside 256 KiB
    (payload,) = client.inputs
    assert json.loads(payload)["targets"] == targets
    assert len(payload.encode()) < STEP_FUNCTIONS_INPUT_LIMIT / 2


def test_a_run_asked_for_a_subtree_takes_its_dirty_scopes_behind_the_marks_of_every_other(services: Services) -> None:
    """A subtree's scopes dirtied after MAX_TARGETS_PER_RUN others are still its run's targets: the run does not
    take the tenant's oldest marks and then keep none of them."""
    # Given MAX_TARGETS_PER_RUN + 5 dirty scopes under root.chat, then two under root.logs, marked later
    create, store, at = services.scopes.create, services.consolidation.deps.store, datetime(2026, 11, 30)
    chat = [create("acme", f"root.chat.c{n}", parents=True).scope.scope_id for n in range(MAX_TARGETS_PER_RUN + 5)]
    logs = [create("acme", f"root.logs.l{n}", parents=True).scope.scope_id for n in range(2)]
    store.mark_dirty("acme", chat, at)
    store.mark_dirty("acme", logs, at.replace(hour=1))
    # When runs are asked for root.logs, for root.chat and for the whole tenant
    # Then the first takes the two under root.logs, the second MAX_TARGETS_PER_RUN of root.chat's, the third as many
    assert sorted(services.consolidation.targets("acme", ["root.logs"])) == sorted(logs)
    taken = services.consolidation.targets("acme", ["root.chat"])
    assert len(taken) == MAX_TARGETS_PER_RUN and set(taken) < set(chat)  # one time for all: in no set order
    assert len(services.consolidation.targets("acme", None)) == MAX_TARGETS_PER_RUN
