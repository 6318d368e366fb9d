"""consolidate: stages, exactly-once facts, supersession, checkpoints, leases, runs, recall of facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.consolidation.reasoning import ExtractiveReasoner
from mneme.consolidation.service import run_batch, run_stage
from mneme.consolidation.stages import STAGE_NAMES, Batch, Working, cluster, collect
from mneme.language.grounding import confidence, grounding_error
from mneme.models import Role
from mneme.records import Proposal, Turn
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.conftest import principal
from tests.support.stored import contradictions

WRITER = principal("acme", "wendy", Role.writer)


def remember(services: Services, *texts: str, scope: str = "root.acme", **fields: Any) -> list[str]:
    items = [RememberItem.model_validate({"scope": scope, "content": t, "create_scope": True, **fields}) for t in texts]
    return [r.episode_id for r in services.remember.remember(WRITER, items)]


def settle(services: Services, clock: Any) -> None:
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)


def test_the_stage_list_is_the_designs() -> None:
    # maintain (decay, expiry, stale flags) is the run's sweep at its end, over every fact: not a batch stage
    assert STAGE_NAMES == ("collect", "cluster", "extract", "reconcile", "commit", "rollup", "checkpoint")


def turns(*said: str) -> list[Turn]:
    """A window of turns: 'Name: text' gives the speaker."""
    out = []
    for n, text in enumerate(said, 1):
        speaker, _, rest = text.partition(": ") if ": " in text else ("", "", text)
        out.append(Turn(number=n, speaker=speaker or None, text=rest, at=datetime(2026, 3, 1, 12, n, tzinfo=UTC)))
    return out


def test_grounding_checks_each_proposal_against_the_turns_it_cites() -> None:
    texts = ["Acme's VAT scheme is flat rate.", "Acme moved to the flat rate scheme in 2024."]
    claim = Proposal(entity="Acme", property="VAT scheme", value="flat rate", summary="s", sources=[1])
    assert grounding_error(claim, texts, generative=False) is None
    assert "entity" in grounding_error(claim.model_copy(update={"entity": "Globex"}), texts, generative=False)
    assert "value" in grounding_error(claim.model_copy(update={"value": "standard"}), texts, generative=False)
    assert "value" in grounding_error(claim.model_copy(update={"value": "2024"}), texts, generative=False)
    for outside in ([3], [0], []):  # a turn outside the window, or none: refused
        assert "sources" in grounding_error(claim.model_copy(update={"sources": outside}), texts, generative=False)
    copy = Proposal(summary="Acme's VAT scheme is flat rate.", sources=[1, 2])
    assert grounding_error(copy, texts, generative=False) is None
    assert "verbatim" in grounding_error(copy, texts, generative=True)


def test_extractive_reasoner_reads_each_turn_with_its_speaker() -> None:
    reasoner = ExtractiveReasoner()
    reading = reasoner.propose(
        turns("Where do you live these days?", "Maya: I moved to Berlin last year.",
              "The invoice contact for Pennine Joinery is Sam Patel.", "Maya: Yes, I live in Berlin.")
    )  # fmt: skip
    assert [(p.entity, p.property, p.value, p.sources) for p in reading.facts] == [
        ("Maya", "lives in", "Berlin", [2, 4]),  # one claim stated twice: one proposal citing both turns
        ("Pennine Joinery", "invoice contact", "Sam Patel", [3]),
    ]
    assert reading.facts[0].summary == "Maya lives in Berlin." and reading.input_tokens == 0
    vague = turns("Had a good chat about the roadmap.", "Roadmap chat went well.")
    assert ExtractiveReasoner().propose(vague).facts == []


def test_confidence_follows_support() -> None:
    assert confidence(1, False) == pytest.approx(1 / 3, abs=1e-4)
    assert confidence(2, True) == pytest.approx(0.5 + 0.5 * 0.3)


def test_clustering_is_deterministic(services: Services, clock: Any) -> None:
    remember(services, *[f"Pallet {i} damaged in transit, forklift {i % 3}." for i in range(12)])
    settle(services, clock)
    deps = services.consolidation.deps
    runs = []
    for _ in range(2):
        batch = Batch(tenant="acme", scope_id=_scope(services), run_id="r", started_at=clock.now())
        work = Working.of(deps, batch)
        runs.append(cluster(deps, collect(deps, batch, work), work))
    first, second = runs
    assert first.clusters == second.clusters and sum(len(c) for c in first.clusters) == 12


def _scope(services: Services, path: str = "root.acme") -> str:
    return services.scopes.resolve("acme", path).scope.scope_id


def test_a_run_turns_episodes_into_facts_with_sources_and_a_truthful_record(services: Services, clock: Any) -> None:
    ids = remember(services, "Acme's VAT scheme is flat rate.", "Acme's VAT scheme is flat rate, Sam confirmed.")
    settle(services, clock)
    run = services.consolidation.start(WRITER, None)
    assert run.status == "succeeded" and run.scopes == ["root.acme"] and run.errors == []
    assert run.stages["collect"].counters["episodes_read"] == 2
    assert run.stages["checkpoint"].counters["advanced"] == 2
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert (fact.entity, fact.property, fact.value) == ("Acme", "VAT scheme", "flat rate")
    assert sorted(fact.source_episode_ids) == sorted(ids)
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 2
    assert services.store.list_dirty("acme", 10) == []


def test_a_replayed_batch_writes_nothing_twice(services: Services, clock: Any) -> None:
    remember(services, "Acme's VAT scheme is flat rate.", "The boiler in unit 4 was serviced by Dale.")
    settle(services, clock)
    deps = services.consolidation.deps
    batch = Batch(tenant="acme", scope_id=_scope(services), run_id="r1", started_at=clock.now())
    for name in STAGE_NAMES[:-1]:  # a crash before the checkpoint
        batch = Batch.model_validate(run_stage(deps, {"stage": name, "batch": batch.model_dump(mode="json")}))
    facts_before = {f.fact_id: f.source_episode_ids for f in services.store.list_facts("acme")}
    run = services.consolidation.start(WRITER, None)  # the replay
    assert run.status == "succeeded"
    assert {f.fact_id: f.source_episode_ids for f in services.store.list_facts("acme")} == facts_before
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 2


def test_a_new_value_supersedes_the_old_fact_and_as_of_still_finds_it(services: Services, clock: Any) -> None:
    remember(services, "Acme's VAT scheme is flat rate.", occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    clock.advance(days=30)
    remember(services, "Acme's VAT scheme is standard rate.", occurred_at=clock.now())
    settle(services, clock)
    run = services.consolidation.start(WRITER, None)
    assert run.stages["reconcile"].counters == {"supersede": 1}
    facts = {f.value: f for f in services.store.list_facts("acme") if f.entity}
    old, new = facts["flat rate"], facts["standard rate"]
    assert old.status == "superseded" and old.superseded_by == new.fact_id and old.valid_until == new.valid_from
    [contradiction] = contradictions(services.store, "acme", _scope(services))
    assert (contradiction.old_value, contradiction.new_value, contradiction.resolution) == (
        "flat rate",
        "standard rate",
        "superseded",
    )
    now = services.recall.recall(WRITER, RecallRequest(query="Acme VAT scheme", kinds=["fact"]))
    assert [r.fact["value"] for r in now.results if r.fact and r.tier == "raw"] == ["standard rate"]
    then = services.recall.recall(
        WRITER, RecallRequest(query="Acme VAT scheme", kinds=["fact"], as_of=clock.now() - timedelta(days=15))
    )
    assert [r.fact["value"] for r in then.results if r.fact and r.tier == "raw"] == ["flat rate"]


def test_facts_are_recalled_with_their_sources_and_rank_with_episodes(services: Services, clock: Any) -> None:
    ids = remember(services, "The invoice contact for Pennine Joinery is Sam Patel.", metadata={"source": "email"})
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    response = services.recall.recall(WRITER, RecallRequest(query="invoice contact Pennine Joinery"))
    kinds = [r.kind for r in response.results]
    assert kinds[0] == "fact"
    fact = response.results[0]
    assert ids[0] not in [r.id for r in response.results]  # folded under its fact, not a slot of its own
    assert fact.sources == [  # the turn that states it, shown beside it (its grounding line)
        {
            "id": ids[0],
            "occurred_at": fact.sources[0]["occurred_at"],
            "metadata": {"source": "email"},
            "text": "The invoice contact for Pennine Joinery is Sam Patel.",
        }
    ]


def test_a_failed_stage_holds_the_checkpoint_and_the_run_says_so(services: Services, clock: Any) -> None:
    remember(services, "Acme's VAT scheme is flat rate.")
    settle(services, clock)

    class Broken:
        name, generative = "broken", True

        def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Any:
            from mneme.errors import StoreUnavailable

            raise StoreUnavailable("model down")

    services.consolidation.deps.reasoner = Broken()
    run = services.consolidation.start(WRITER, None)
    assert run.status == "failed" and run.errors[0]["stage"] == "extract" and run.errors[0]["episode_ids"]
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 0
    assert services.store.list_dirty("acme", 10)  # still has work
    services.consolidation.deps.reasoner = ExtractiveReasoner()
    assert services.consolidation.start(WRITER, None).status == "succeeded"
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 1


def test_a_leased_scope_is_skipped_and_a_stale_batch_cannot_move_the_checkpoint(services: Services, clock: Any) -> None:
    remember(services, "Forklift 2 failed inspection.")
    settle(services, clock)
    scope_id = _scope(services)
    assert services.store.acquire_lease("acme", scope_id, "other-runner", clock.now(), timedelta(minutes=5))
    run = services.consolidation.start(WRITER, None)
    assert run.stages["collect"].counters == {"skipped_leased": 1}
    deps = services.consolidation.deps
    old = Batch(tenant="acme", scope_id=scope_id, run_id="a", started_at=clock.now())
    stale = collect(deps, old, Working.of(deps, old))
    fresh = run_batch(deps, Batch(tenant="acme", scope_id=scope_id, run_id="b", started_at=clock.now()))
    assert fresh.errors == []
    from mneme.consolidation.stages import checkpoint

    assert checkpoint(deps, stale, Working.of(deps, stale)).errors[0]["stage"] == "checkpoint"
    assert services.store.get_checkpoint("acme", scope_id).processed == 1


def test_rollups_summarise_days_and_weeks_with_sources(services: Services, clock: Any) -> None:
    saturday = remember(services, "Delivery to York arrived with two pallets.", occurred_at=clock.now() - timedelta(1))
    sunday = remember(services, "Delivery to Hull arrived late, one crate broken.", occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    rollups = [f for f in services.store.list_facts("acme") if f.tier != "raw"]
    rollups.sort(key=lambda f: (f.valid_from, f.tier == "daily"))
    assert [f.tier for f in rollups] == ["weekly", "daily", "daily"]  # the ISO week, 2026-10-31, 2026-11-01
    assert [f.source_episode_ids for f in rollups] == [sorted(saturday + sunday), saturday, sunday]
    week = "Delivery to York arrived with two pallets.\nDelivery to Hull arrived late, one crate broken."
    assert rollups[0].summary == week


def test_maintain_decays_untouched_facts_and_expires_faint_ones(services: Services, clock: Any) -> None:
    remember(services, "Acme's VAT scheme is flat rate.")
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    clock.advance(weeks=40)
    remember(services, "Unrelated note about parking.")  # makes the scope dirty again
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    decayed = services.store.get_facts("acme", [fact.fact_id])[fact.fact_id]
    assert decayed.status == "expired" and decayed.confidence < 0.1


def test_no_fact_without_new_knowledge(services: Services, clock: Any) -> None:
    # Given a lone chatty turn, a lone claim, and two near-identical observations without a claim
    remember(services, "Cool! What did it look like?", scope="root.chat")
    remember(services, "Acme's VAT scheme is flat rate.", scope="root.claim")
    remember(services, "Pallet 7 damaged in transit.", "Pallet 7 damaged in transit again.", scope="root.pair")
    settle(services, clock)
    # When consolidation runs
    run = services.consolidation.start(WRITER, None)
    # Then only the claim is a fact: the chatty turn and the pair stay episodes (the extractive reasoner
    # proposes claims only: a summary of two turns would only copy one of them)
    facts = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    by_scope = {services.scopes.chain_of("acme", f.scope_id).path: f for f in facts}
    assert set(by_scope) == {"root.claim"}
    assert by_scope["root.claim"].value == "flat rate"
    assert by_scope["root.claim"].summary == "Acme's VAT scheme is flat rate."
    assert run.counter("extract", "proposals") == 1 and run.counter("reconcile", "create") == 1
    assert run.status == "succeeded" and services.store.list_dirty("acme", 10) == []


def test_a_claim_read_with_the_turns_before_it_cites_them_too() -> None:
    """'She's a paramedic.' after Sofia was named: the claim's entity comes from an earlier turn, which it
    cites, so the grounding check holds it (it refused the claim citing its own turn alone)."""
    window = turns("Lucas: I met Sofia at the climbing wall.", "Amara: I already like her. What does she do?",
                   "Lucas: She's a paramedic.")  # fmt: skip
    [proposal] = ExtractiveReasoner().propose(window).facts
    assert (proposal.entity, proposal.value, proposal.sources) == ("Sofia", "paramedic", [1, 3])
    assert grounding_error(proposal, [t.said() for t in window], generative=False) is None
