"""A claim fact drawn from a current statement takes that turn's place when a question asks about before
it (`services/recall/time.py: _drawn_from_chains`)."""

from __future__ import annotations

from datetime import datetime

import pytest

from mneme.bootstrap import Services
from mneme.records import Fact
from tests.unit.test_recall_ranking import DAY, recall, say

EARLY, LATE = DAY.replace(year=2025, month=1), DAY.replace(year=2025, month=2)


def put_claim(
    services: Services,
    fact_id: str,
    said: tuple[str, str, str, str],
    source: str,
    held: datetime,
    written: datetime,
    confidence: float = 0.8,
) -> str:
    """A claim fact (entity, property, value, summary) drawn from `source`, holding from `held`."""
    entity, prop, value, summary = said
    embedder = services.consolidation.deps.embedder
    scope_id = services.scopes.resolve("acme", "root.chat").scope.scope_id
    fact = Fact(tenant="acme", fact_id=fact_id, scope_id=scope_id, entity=entity, property=prop, value=value,
                summary=summary, confidence=confidence, source_episode_ids=[source], valid_from=held,
                created_at=written, updated_at=written, reinforced_at=written,
                vector=embedder.embed([summary])[0].tolist(), model_id=embedder.model_id)  # fmt: skip
    services.store.put_facts([fact])
    services.consolidation.deps.indexer.index_facts([fact])
    return fact_id


def claim(services: Services, fact_id: str, value: str, source: str, at: datetime) -> str:
    said = ("The grant report", "due date", value, f"The grant report's due date is {value}.")
    return put_claim(services, fact_id, said, source, at, at, confidence=0.6)


def test_a_claim_drawn_from_the_current_statement_ranks_below_the_earlier_one_for_the_past(
    services: Services,
) -> None:
    """Only the change became a claim ("The grant report's due date is 30 June."): asked for the first date,
    the turn that says it ranks above the claim, as it does above the turn the claim was drawn from."""
    say(services, "Noor", "The grant report has to reach the trust by 9 June.", occurred_at=EARLY)
    say(services, "Omar", "Tight. The survey data is still out.", occurred_at=EARLY)
    then = say(services, "Noor", "The trust moved its panel, so the grant report is due 30 June instead.",
               occurred_at=LATE)  # fmt: skip
    new = claim(services, "fa_new", "30 June", then, LATE)
    response = recall(services, "What was the original due date of the grant report?")
    assert "9 June" in response.results[0].content
    assert response.results[1].id == new and response.results[1].scores["later"] < 1
    assert "30 June" in recall(services, "When is the grant report due?").results[0].content


@pytest.mark.parametrize(
    ("later", "how"),
    [  # her later word ranks above the turn the claim was drawn from by the rules (read as that turn) ...
        ("Since January I've cut out dairy and eggs too, fully vegan, so no yoghurt dips.", "later"),
        # ... or on its own, with no change the rules read: the claim does not pass it
        ("Food-wise I've cut out dairy and eggs too since January, fully vegan.", "source_passed"),
    ],
)
def test_a_claim_ranks_below_the_later_word_that_outranks_the_turn_it_was_drawn_from(
    services: Services, later: str, how: str
) -> None:
    """A run wrote "Elif is vegetarian." from her first word; months later she went vegan. Her later word ranked
    above her first before the run, and still does after it, above the claim too."""
    first = say(services, "Elif", "Booking the team dinner? I'm vegetarian, so anywhere with halloumi works.",
                occurred_at=EARLY)  # fmt: skip
    then = say(services, "Elif", later, occurred_at=LATE)
    assert recall(services, "What diet does Elif follow?").results[0].id == then
    claim = put_claim(services, "fa_diet", ("Elif", "diet", "vegetarian", "Elif is vegetarian."), first, EARLY, LATE)
    after = recall(services, "What diet does Elif follow?")
    assert [r.id for r in after.results[:2]] == [then, claim]
    assert how in (after.results[0].scores if how == "later" else after.results[1].scores)
    before = recall(services, "What diet did Elif follow before she went vegan?")
    assert "source_passed" not in next(r for r in before.results if r.id == claim).scores


def test_a_claim_drawn_from_a_superseded_turn_is_superseded_of_that_subject(services: Services) -> None:
    """The change was read of the turn ("Our whole team sits under Lena Okonkwo" after "My manager is Fiona
    Mackay"), not of the claim drawn from it: the claim follows its turn (`_claims_follow`), for the subject the
    change was read of only."""
    first = say(services, "Arjun", "My manager is Fiona Mackay, and I'm based in the Leeds office. Proper one-to-ones.",
                occurred_at=EARLY)  # fmt: skip
    reorg = "Reorg day. Our whole team sits under Lena Okonkwo in Data Platform, great first chat."
    then = say(services, "Arjun", reorg, occurred_at=LATE)
    said = ("Arjun", "manager", "Fiona Mackay", "Arjun's manager is Fiona Mackay.")
    manager = put_claim(services, "fa_manager", said, first, EARLY, LATE)
    office = put_claim(
        services, "fa_office", ("Arjun", "based in", "Leeds", "Arjun is based in Leeds."), first, EARLY, LATE
    )
    asked = recall(services, "Who does Arjun answer to at work?").results
    shown = {r.id: r for r in asked}
    assert asked[0].id == then
    changed = shown[manager].since_changed or {}
    assert changed.get("by") == then and changed["why"].startswith("its source")
    where = {r.id: r for r in recall(services, "Which office is Arjun based in?").results}
    assert office in where and where[office].since_changed is None
