"""One run lifecycle: status decided once, leases on the stage path, settling episodes, maintenance
sweeps, a failed start, typed reasoner errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.consolidation.service import maintain
from mneme.consolidation.stages import STAGE_NAMES, Batch
from mneme.errors import ReasonerRefused, StoreUnavailable
from mneme.models import Forgotten, Role
from mneme.records import Proposal, Reading, Run, StageReport, Turn
from mneme.services.remember import RememberItem
from tests.conftest import principal

WRITER = principal("acme", "wendy", Role.writer)


def remember(services: Services, *texts: str, scope: str = "root.acme") -> list[str]:
    items = [RememberItem(scope=scope, content=t, create_scope=True) for t in texts]
    return [r.episode_id for r in services.remember.remember(WRITER, items)]


def settle(services: Services, clock: Any) -> None:
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)


def scope_id(services: Services, path: str = "root.acme") -> str:
    return services.scopes.resolve("acme", path).scope.scope_id


def run_with(**stages: dict[str, int]) -> Run:
    run = Run(tenant="acme", run_id="r", started_at=datetime(2026, 1, 1, tzinfo=UTC), requested_by="x")
    for name, counters in stages.items():
        errors = [{"stage": name, "message": "boom"}] * counters.get("errors", 0)
        run.stages[name] = StageReport(counters=counters, errors=errors)
    return run


@pytest.mark.parametrize(
    ("stages", "status"),
    [
        ({"commit": {"facts_written": 2}}, "succeeded"),
        ({"commit": {"facts_written": 2}, "extract": {"errors": 1}}, "partial"),
        ({"checkpoint": {"advanced": 3}, "rollup": {"errors": 1}}, "partial"),
        ({"extract": {"errors": 1}}, "failed"),
    ],
)
def test_a_run_status_is_decided_in_one_place(stages: dict[str, dict[str, int]], status: str) -> None:
    run = run_with(**stages)
    run.conclude(datetime(2026, 1, 2, tzinfo=UTC))
    assert run.status == status and run.finished_at is not None


def test_step_functions_finish_calls_errors_with_facts_written_partial(services: Services, clock: Any) -> None:
    # Given a run whose one batch wrote a fact and erred in a later stage
    run, _ = services.consolidation.open(WRITER)
    batch = Batch(tenant="acme", scope_id="s", run_id=run.run_id, started_at=clock.now())
    batch.count("commit", "facts_written")
    batch.fail("rollup", "store_unavailable: down")
    # When the workflow's Finish task runs
    result = services.consolidation.step(
        {"stage": "finish", "tenant": "acme", "run_id": run.run_id, "batches": [batch.model_dump(mode="json")]}
    )
    # Then the run is partial, as the local runner would say
    assert result["status"] == "partial"
    assert services.consolidation.get(WRITER, run.run_id).status == "partial"


def test_a_run_right_after_remember_leaves_the_settling_scope_dirty(services: Services, clock: Any) -> None:
    # Given an episode still inside the settle window
    remember(services, "Acme's VAT scheme is flat rate.")
    # When a run starts at once
    first = services.consolidation.start(WRITER, None)
    # Then it reads nothing and the scope stays dirty
    assert first.stages["collect"].counters["episodes_read"] == 0
    assert services.store.list_dirty("acme", 10) == [("acme", scope_id(services))]
    # And the next run, after the window, consolidates it
    settle(services, clock)
    second = services.consolidation.start(WRITER, None)
    assert second.stages["collect"].counters["episodes_read"] == 1
    assert services.store.list_dirty("acme", 10) == []


def test_maintenance_covers_scopes_without_new_episodes(services: Services, clock: Any) -> None:
    # Given a fact in one scope
    remember(services, "Acme's VAT scheme is flat rate.", scope="root.acme")
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    # When, 40 weeks later, only another scope gets new episodes and a run happens
    clock.advance(weeks=40)
    remember(services, "Parking moved to the back yard.", scope="root.globex")
    settle(services, clock)
    run = services.consolidation.start(WRITER, None)
    # Then the untouched fact decayed and expired all the same
    assert run.scopes == ["root.globex"]
    assert services.store.get_facts("acme", [fact.fact_id])[fact.fact_id].status == "expired"
    assert run.stages["maintain"].counters["expired"] >= 1


def test_maintenance_reads_the_sources_of_many_facts_in_one_call(
    services: Services, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given facts in six scopes, one of whose source episodes is then forgotten
    claims = ["VAT scheme is flat rate", "invoice contact is Sam Patel", "year end is March",
              "bank is Monzo", "payroll runs monthly", "auditor is Grant Lee"]  # fmt: skip
    for i, claim in enumerate(claims):
        remember(services, f"Acme's {claim}.", scope=f"root.s{i}")
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    facts = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert len(facts) >= 5
    gone = facts[0].source_episode_ids[0]
    record = Forgotten(tenant="acme", record_id=gone, kind="episode", scope_id=facts[0].scope_id,
                       forgotten_by="wendy", forgotten_at=clock.now())  # fmt: skip
    services.store.forget_episode("acme", gone, record)
    reads: list[int] = []
    real = services.store.get_episodes
    counted = lambda t, ids, **k: (reads.append(len(ids)), real(t, ids, **k))[1]  # noqa: E731
    monkeypatch.setattr(services.store, "get_episodes", counted)
    # When, 40 weeks later, a run's maintenance sweep goes over them (and the day's and week's roll-ups)
    clock.advance(weeks=40)
    run, _ = services.consolidation.open(WRITER)
    maintain(services.consolidation.deps, run)
    # Then their source episodes were read in one call (and once more by the index write of the changed
    # facts, for their metadata), not once per fact; every fact decayed; the forgotten source is flagged
    assert len(reads) == 2
    after = services.store.get_facts("acme", [f.fact_id for f in facts])
    assert all(f.status == "expired" for f in after.values())
    assert after[facts[0].fact_id].stale and not after[facts[1].fact_id].stale
    swept = len(services.store.list_facts("acme"))  # the raw facts and each scope's roll-ups
    assert run.stages["maintain"].counters == {"facts_updated": swept, "expired": swept}


def test_the_stage_path_takes_the_scope_lease(services: Services, clock: Any) -> None:
    # Given a scope with work whose lease another run holds
    remember(services, "Forklift 2 failed inspection.")
    settle(services, clock)
    target = scope_id(services)
    assert services.store.acquire_lease("acme", target, "run_other", clock.now(), timedelta(minutes=5))
    service = services.consolidation
    # When the workflow runs the stages of this run over that scope
    event: dict[str, Any] = {"stage": "begin", "tenant": "acme", "run_id": "run_mine", "scope_id": target}
    batch = service.step(event)
    for name in STAGE_NAMES:
        batch = service.step({"stage": name, "batch": batch})
    # Then it reads nothing, writes nothing and leaves the mark for the lease holder
    assert batch["leased_elsewhere"] and batch["counters"] == {"collect": {"skipped_leased": 1}}
    assert services.store.list_dirty("acme", 10) == [("acme", target)]
    assert services.store.get_checkpoint("acme", target).processed == 0
    # And once the other run released it, this run's stages do the work and finish releases the lease
    services.store.release_lease("acme", target, "run_other")
    batch = service.step(event)
    for name in STAGE_NAMES:
        batch = service.step({"stage": name, "batch": batch})
    assert batch["counters"]["checkpoint"]["advanced"] == 1
    run = Run(tenant="acme", run_id="run_mine", started_at=clock.now(), requested_by="x")
    services.store.put_run(run)
    service.step({"stage": "finish", "tenant": "acme", "run_id": "run_mine", "batches": [batch]})
    assert services.store.acquire_lease("acme", target, "run_third", clock.now(), timedelta(minutes=5))


def test_a_failed_start_marks_the_run_failed(services: Services, clock: Any) -> None:
    class Down:
        def start(self, run: Run, targets: list[str]) -> None:
            raise StoreUnavailable("could not start the consolidation: ServiceUnavailable")

    # Given an orchestrator whose StartExecution fails
    remember(services, "Acme's VAT scheme is flat rate.")
    services.consolidation.orchestrator = Down()
    stored: list[str] = []
    put_run = services.store.put_run
    services.store.put_run = lambda run: (stored.append(run.run_id), put_run(run))  # type: ignore[method-assign]
    # When a run is started
    with pytest.raises(StoreUnavailable):
        services.consolidation.start(WRITER, None)
    # Then its record says failed, with the reason, and is finished
    run = services.consolidation.get(WRITER, stored[-1])
    assert run.status == "failed" and run.finished_at is not None
    assert run.errors[0]["stage"] == "workflow" and "ServiceUnavailable" in run.errors[0]["message"]


def test_a_refused_reasoner_stops_the_stage_at_once(services: Services, clock: Any) -> None:
    calls = []

    class Refusing:
        name, generative = "refusing", True

        def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Any:
            calls.append(turns)
            raise ReasonerRefused("access denied", code="reasoner_access_denied")

    remember(services, "Acme's VAT scheme is flat rate.", "The boiler in unit 4 was serviced by Dale.")
    settle(services, clock)
    services.consolidation.deps.reasoner = Refusing()
    run = services.consolidation.start(WRITER, None)
    assert run.status == "failed" and len(calls) == 1
    assert run.errors[0]["message"].startswith("reasoner_access_denied")


def test_llm_reasoners_read_each_turn_with_its_speaker_and_time(services: Services, clock: Any) -> None:
    seen: list[list[Turn]] = []

    class Recording:
        name, generative = "recording", True

        def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
            seen.append(list(turns))
            fact = Proposal(entity="Maya", property="lives in", value="Berlin", summary="Maya lives in Berlin now.",
                            sources=[2])  # fmt: skip
            return Reading(facts=[fact])

    items = [
        RememberItem(scope="root.acme", content=text, create_scope=True, session_id="s1", metadata={"speaker": who})
        for who, text in (("tom", "Where did you end up?"), ("Maya", "I moved to Berlin."))
    ]
    services.remember.remember(WRITER, items)
    settle(services, clock)
    services.consolidation.deps.reasoner = Recording()
    services.consolidation.start(WRITER, None)
    at = seen[0][0].at
    assert seen == [[Turn(number=1, speaker="Tom", text="Where did you end up?", at=at),
                     Turn(number=2, speaker="Maya", text="I moved to Berlin.", at=at)]]  # fmt: skip
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert fact.summary == "Maya lives in Berlin now." and len(fact.source_episode_ids) == 1


def test_the_llm_schema_is_generated_from_the_proposal_model() -> None:
    from mneme.adapters.reasoners import ANSWER_SCHEMA, PROPOSAL_SCHEMA

    assert ANSWER_SCHEMA["properties"]["facts"]["items"] is PROPOSAL_SCHEMA
    assert list(PROPOSAL_SCHEMA["properties"]) == list(Proposal.model_fields)
    assert PROPOSAL_SCHEMA["required"] == list(Proposal.model_fields)
    assert PROPOSAL_SCHEMA["properties"]["entity"]["type"] == ["string", "null"]
    assert PROPOSAL_SCHEMA["properties"]["summary"]["type"] == "string"
