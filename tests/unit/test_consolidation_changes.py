"""A later turn that changes a claim without a value a claim could hold ("we moved house last week" after
"I live in Leeds"): consolidation marks the claim changed by that turn, recall ranks the turn above it and
says the claim has since changed, and forgetting the turn makes the claim current again."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from mneme.bootstrap import Services
from mneme.records import Fact
from mneme.services.recall import RecallRequest
from tests.unit.test_consolidation import WRITER, settle
from tests.unit.test_consolidation_windows import say


def claims(services: Services) -> dict[str, Any]:
    return {f.summary: f for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity}


def test_a_change_without_a_new_value_marks_the_claim_and_recall_puts_the_change_first(
    services: Services, clock: Any
) -> None:
    # Given a claim consolidated from a first conversation
    say(services, "s1", ("Ines", "I live in Leeds, near the station."), ("Sam", "Handy!"), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    assert claims(services)["Ines lives in Leeds."].changed_by is None
    # And weeks later a turn that changes it without saying where to
    clock.advance(days=40)
    [moved, _] = say(services, "s2", ("Ines", "We finally moved house last week, the boxes are everywhere."),
                     ("Sam", "Good luck unpacking!"), occurred_at=clock.now())  # fmt: skip
    settle(services, clock)
    # When consolidation runs again
    run = services.consolidation.start(WRITER, None)
    # Then the claim is marked changed by that turn, stale from its time, and the run counts it
    leeds = claims(services)["Ines lives in Leeds."]
    said_at = clock.now() - timedelta(seconds=services.consolidation.deps.settings.settle_seconds + 1)
    assert (leeds.changed_by, leeds.changed_at, leeds.stale) == (moved, said_at, True)
    assert run.counter("commit", "changed") == 1
    # And recall for where she lives puts the change first and says the claim has since changed
    response = services.recall.recall(WRITER, RecallRequest(query="Where does Ines live?", explain=True))
    ids = [r.id for r in response.results]
    assert ids.index(moved) < ids.index(leeds.fact_id)
    [result] = [r for r in response.results if r.id == leeds.fact_id]
    assert result.since_changed is not None and result.since_changed["by"] == moved
    # And forgetting the turn makes the claim current again
    services.forgetting.forget_episode(WRITER, moved)
    leeds = claims(services)["Ines lives in Leeds."]
    assert (leeds.changed_by, leeds.stale) == (None, False)


def test_another_persons_turn_or_another_partitions_changes_nothing(services: Services, clock: Any) -> None:
    # Given Ines's claim, from a conversation of user ines
    say(services, "s1", ("Ines", "I live in Leeds."), occurred_at=clock.now(), metadata={"user": "ines"})
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    clock.advance(days=40)
    # And later Sam moving house, and "Ines" moving house in another user's conversation
    say(
        services, "s2", ("Sam", "We finally moved house last week."), occurred_at=clock.now(), metadata={"user": "ines"}
    )
    say(
        services, "s3", ("Ines", "We finally moved house last week."), occurred_at=clock.now(), metadata={"user": "bob"}
    )
    settle(services, clock)
    # When consolidation runs
    run = services.consolidation.start(WRITER, None)
    # Then the claim stands unchanged
    leeds = claims(services)["Ines lives in Leeds."]
    assert (leeds.changed_by, leeds.stale, run.counter("commit", "changed")) == (None, False, 0)


def test_the_fact_a_change_states_is_current_not_changed_by_its_own_turn(services: Services, clock: Any) -> None:
    # Given a first statement and, weeks later, a change with its new value
    say(services, "s1", ("Elif", "Gwen, my manager, signed off my holiday for Lisbon!"), occurred_at=clock.now())
    clock.advance(days=70)
    [turn] = say(services, "s2", ("Elif", "Big changes at work. Gwen went off to run the data team and my new manager "
                                          "is a guy called Tomasz."), occurred_at=clock.now())  # fmt: skip
    # And the claim consolidation draws from it, as close to its turn in meaning as a vector can be
    claim_of(services, turn, "fa_tomasz", "Tomasz", clock.now())
    # When recall asks about the present
    response = services.recall.recall(WRITER, RecallRequest(query="Who does Elif report to?", explain=True))
    # Then the fact comes first, not marked as changed by the turn it was drawn from (which it folds)
    top = response.results[0]
    assert (top.id, top.since_changed) == ("fa_tomasz", None)


def test_a_claim_fact_is_updated_by_a_later_change_of_its_owner(services: Services, clock: Any) -> None:
    # Given "Gwen, my manager, …" drawn into the claim "Elif's manager is Gwen."
    [gwen] = say(
        services, "s1", ("Elif", "Gwen, my manager, signed off my holiday for Lisbon!"), occurred_at=clock.now()
    )
    claim_of(services, gwen, "fa_gwen", "Gwen", clock.now())
    # And weeks later a change, in Elif's words
    clock.advance(days=70)
    [change] = say(services, "s2", ("Elif", "Gwen went off to run the data team and my new manager is Tomasz."),
                   occurred_at=clock.now())  # fmt: skip
    # When recall asks about the present
    response = services.recall.recall(WRITER, RecallRequest(query="Who is Elif's manager?", explain=True))
    # Then the change comes first and the claim is marked as since changed by it
    ids = [r.id for r in response.results]
    assert ids.index(change) < ids.index("fa_gwen")
    [claim] = [r for r in response.results if r.id == "fa_gwen"]
    assert claim.since_changed is not None and claim.since_changed["by"] == change


def claim_of(services: Services, turn: str, fact_id: str, manager: str, now: datetime) -> None:
    """The claim "Elif's manager is <manager>." drawn from `turn`, with the turn's own vector."""
    episode = services.store.get_episodes("acme", [turn])[turn]
    fact = Fact(tenant="acme", fact_id=fact_id, scope_id=episode.scope_id, entity="Elif", property="manager",
                value=manager, summary=f"Elif's manager is {manager}.", confidence=0.5, source_episode_ids=[turn],
                valid_from=episode.occurred_at, created_at=now, updated_at=now, reinforced_at=now,
                vector=episode.vector, model_id=services.consolidation.deps.embedder.model_id)  # fmt: skip
    services.store.put_facts([fact])
    services.consolidation.deps.indexer.index_facts([fact])


def test_an_implied_change_supersedes_a_claim_when_its_value_reads_and_marks_it_stale_when_not(
    services: Services, clock: Any
) -> None:
    # Given claims consolidated from a first conversation: where Noor works, and her pay
    say(services, "s1", ("Noor", "I work at Fenwick Print as a planner."), ("Noor", "I'm on £31k, which is tight."),
        ("Jo", "Ouch."), occurred_at=clock.now())  # fmt: skip
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    assert {"Noor works at Fenwick Print.", "Noor's salary is £31k."} <= set(claims(services))
    # And months later an offer with a new pay (no claim reads it), then a first day somewhere new
    clock.advance(days=60)
    [offer, _] = say(services, "s2", ("Noor", "Tallis Maps offered me the GIS job, at £36,000!"),
                     ("Jo", "Take it!"), occurred_at=clock.now())  # fmt: skip
    clock.advance(days=30)
    say(services, "s3", ("Noor", "Said bye to the team on Friday. First day at Tallis Maps today!"), ("Jo", "Go on!"),
        occurred_at=clock.now())  # fmt: skip
    settle(services, clock)
    # When consolidation runs again
    services.consolidation.start(WRITER, None)
    facts = claims(services)
    # Then the employer is superseded by the new claim, history kept
    old, new = facts["Noor works at Fenwick Print."], facts["Noor works at Tallis Maps."]
    assert (old.status, old.superseded_by, new.status) == ("superseded", new.fact_id, "active")
    # And the pay, whose new value no claim reads, is marked changed by the offer and stale
    pay = facts["Noor's salary is £31k."]
    assert (pay.status, pay.changed_by, pay.stale) == ("active", offer, True)


def consolidated_then_changed(
    services: Services, clock: Any, first: tuple[str, str], later: tuple[str, str], days: int
) -> str:
    """`first` said and consolidated, `later` said `days` on (each answered by Jo) and consolidated again: the
    id of the later turn."""
    say(services, "s1", first, ("Jo", "Nice."), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    clock.advance(days=days)
    [changed, _] = say(services, "s2", later, ("Jo", "Really?"), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    return str(changed)


def test_a_stale_claim_is_placed_below_its_change_only_for_a_question_about_its_subject(
    services: Services, clock: Any
) -> None:
    # Given a pay claim consolidation marked stale by a later offer
    offer = consolidated_then_changed(
        services, clock, ("Noor", "I'm on £31k and I love the map-making side of the job."),
        ("Noor", "Tallis Maps offered me the GIS job, at £36,000!"), days=60,
    )  # fmt: skip
    pay = claims(services)["Noor's salary is £31k."]
    assert (pay.changed_by, pay.stale) == (offer, True)

    def found(query: str) -> Any:
        response = services.recall.recall(WRITER, RecallRequest(query=query, limit=10))
        return next(r for r in response.results if r.id == pay.fact_id)

    # When recall asks about her pay, the claim is marked as since changed by the offer
    assert found("What is Noor's salary?").since_changed["by"] == offer
    # When it asks about another subject the claim's grounding turn answers (what she loves in a job), the
    # claim stands where that turn would, flagged stale, not placed below the offer
    other = found("What does Noor love about the job?")
    assert other.since_changed is None and other.fact is not None and other.fact["stale"]


def test_an_age_is_flagged_stale_a_year_after_it_was_said(services: Services, clock: Any) -> None:
    # Given an age consolidated from a turn
    say(services, "s1", ("Noor", "I'm 41, and my knees know it."), ("Jo", "Ha."), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    assert not claims(services)["Noor is 41."].stale
    # When a run's maintenance sweep comes more than a year later
    clock.advance(days=370)
    say(services, "s2", ("Jo", "Happy new year!"), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    # Then the age is flagged stale: true once, not now
    assert claims(services)["Noor is 41."].stale


def test_a_changed_claim_weighs_less_for_the_present_and_in_full_for_a_question_about_the_past(
    services: Services, clock: Any
) -> None:
    # Given an employer claim consolidation marked changed by a later turn that names no new employer
    notice = consolidated_then_changed(
        services, clock, ("Aiko", "I work at Brindle Optics, in the lens lab."),
        ("Aiko", "I handed in my notice at the lab on Monday."), days=90,
    )  # fmt: skip
    claim = claims(services)["Aiko works at Brindle Optics."]
    assert (claim.changed_by, claim.stale) == (notice, True)

    def scored(query: str) -> dict[str, Any]:
        response = services.recall.recall(WRITER, RecallRequest(query=query, limit=10, explain=True))
        return next(r.scores for r in response.results if r.id == claim.fact_id)

    # When recall asks where she works now, the changed claim weighs less (stale)
    now = scored("Where does Aiko work?")
    assert now["stale"] == 0.6 and now["lifecycle"] > 0.6  # the lifecycle factor holds no stale share
    # When it asks where she worked before, or about an event, the claim is the history asked for, in full
    for query in ("Where did Aiko work before?", "Where did Aiko start working?"):
        then = scored(query)
        assert "stale" not in then and then["lifecycle"] == now["lifecycle"], (query, then)


def test_a_change_a_later_turn_calls_off_leaves_the_claim_standing(services: Services, clock: Any) -> None:
    # Given a claim consolidated from a first conversation
    say(services, "s1", ("Ines", "I live in Leeds, near the station."), ("Sam", "Handy!"), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    # And weeks later a move, then before the next run the move called off
    clock.advance(days=40)
    moved = "We finally moved house last week, the boxes are everywhere."
    say(services, "s2", ("Ines", moved), occurred_at=clock.now())
    clock.advance(days=3)
    say(services, "s3", ("Ines", "The house move fell through after all, we're staying put."), occurred_at=clock.now())
    settle(services, clock)
    # When consolidation runs again
    run = services.consolidation.start(WRITER, None)
    # Then the claim stands: the change it would have been marked by was called off
    leeds = claims(services)["Ines lives in Leeds."]
    assert (leeds.changed_by, leeds.stale, run.counter("commit", "changed")) == (None, False, 0)


def test_one_more_of_a_many_valued_claim_stands_beside_it_and_a_named_switch_replaces_it(
    services: Services, clock: Any
) -> None:
    # Given tools and a child, consolidated from a first conversation
    say(services, "s1", ("Dario", "We use Slack for chat."), ("Dario", "My son is Leo."), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    # And weeks later one more tool and one more son, then later still a switch away from one tool
    clock.advance(days=40)
    say(services, "s2", ("Dario", "We also use Figma for design."), ("Dario", "My son is Max, he was born in May."),
        occurred_at=clock.now())  # fmt: skip
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    held = {(f.property, f.value): f for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity}
    # Then each stands beside the first: one more is not instead
    for key in [("uses", "Slack"), ("uses", "Figma"), ("son", "Leo"), ("son", "Max")]:
        assert held[key].status == "active", key
    clock.advance(days=40)
    say(services, "s3", ("Dario", "We switched from Slack to Teams last month."), occurred_at=clock.now())
    settle(services, clock)
    services.consolidation.start(WRITER, None)
    # And a switch that names the old tool supersedes it, and only it
    held = {(f.property, f.value): f for f in services.store.list_facts("acme") if f.tier == "raw" and f.entity}
    assert held[("uses", "Slack")].superseded_by == held[("uses", "Teams")].fact_id
    assert held[("uses", "Figma")].status == "active"
