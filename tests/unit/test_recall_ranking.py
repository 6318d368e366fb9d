"""Ranking rules a user of recall notices on conversations: the speaker, time, updates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mneme.bootstrap import Services
from mneme.models import Role
from mneme.services.recall import RecallRequest, RecallResponse
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)
DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def say(services: Services, speaker: str, content: str, **fields: Any) -> str:
    item = RememberItem.model_validate(
        {"scope": "root.chat", "content": content, "create_scope": True, "metadata": {"speaker": speaker}, **fields}
    )
    return services.remember.remember(ALICE, [item])[0].episode_id


def recall(services: Services, query: str, **fields: Any) -> RecallResponse:
    return services.recall.recall(ALICE, RecallRequest.model_validate({"query": query, "scope": "root.chat", **fields}))


def test_a_query_naming_a_person_favours_that_persons_own_turns(services: Services) -> None:
    maya = say(services, "Maya", "I moved to Lisbon last spring.", occurred_at=DAY)
    tom = say(services, "Tom", "I moved to Lisbon last spring.", occurred_at=DAY.replace(hour=10))
    assert [r.id for r in recall(services, "Where did Maya move?").results] == [maya, tom]
    response = recall(services, "Where did Tom move?")
    assert [r.id for r in response.results] == [tom, maya]
    assert response.results[0].scores["speaker"] > 1 and "speaker" not in response.results[1].scores
    assert response.results[0].metadata == {"speaker": "Tom"}  # unchanged, as given


def test_the_speaker_is_searched_with_the_words_of_the_turn(services: Services) -> None:
    ravi = say(services, "Ravi", "I start at the bakery on Monday.", occurred_at=DAY)
    say(services, "Ana", "Good luck with it!", occurred_at=DAY)
    response = recall(services, "Ravi", scoring={"strictness": "precision"})
    assert [r.id for r in response.results] == [ravi]
