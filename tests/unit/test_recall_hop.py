"""Multi-hop recall (services/recall/hop.py): a candidate linked to one of the best hits is admitted.

The test embedder is a bag of hashed words, so the cosines below are those of shared words: the
answer "Rotterdam since March…" shares only stopwords with the question (cosine ~0.22, under the
balanced bar of 0.25, and no BM25 hit) but most of its words with the turn that names Ines
(cosine ~0.72); the distractor is as close to the question (~0.22) and far from that turn (~0.39).
"""

from __future__ import annotations

from typing import Any

from mneme.bootstrap import Services
from mneme.models import Role
from mneme.services.recall import RecallRequest, RecallResponse
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)
QUESTION = "Which cities has Ines lived in?"
SOURCE = "Ines has lived in Lyon for six years, near the river and the old town."
LINKED = "Rotterdam since March: a flat near the river and the old town."
DISTRACTOR = "The choir has a concert next June at the cathedral."


def say(services: Services, content: str, scope: str = "root.chat", caller: Any = ALICE) -> str:
    item = RememberItem.model_validate({"scope": scope, "content": content, "create_scope": True})
    return services.remember.remember(caller, [item])[0].episode_id


def recall(services: Services, query: str, **fields: Any) -> RecallResponse:
    request = RecallRequest.model_validate({"query": query, "scope": "root.chat", "explain": True, **fields})
    return services.recall.recall(ALICE, request)


def stage(response: RecallResponse, name: str) -> dict[str, Any]:
    assert response.explain is not None
    return next(s for s in response.explain["stages"] if s["stage"] == name)


def test_a_turn_linked_to_the_best_hit_is_found_with_it(services: Services) -> None:
    source, linked, distractor = say(services, SOURCE), say(services, LINKED), say(services, DISTRACTOR)
    response = recall(services, QUESTION)
    found = {r.id: r for r in response.results}
    assert list(found) == [source, linked]
    assert found[linked].scores["linked"] >= 0.6 and found[linked].score <= found[source].score
    assert "linked" not in found[source].scores
    assert stage(response, "admit")["linked"] == {linked: source}
    assert {"id": distractor, "reason": "not_admitted:balanced"} in (response.explain or {})["omitted"]


def test_without_a_best_hit_to_link_to_the_admission_rule_is_unchanged(services: Services) -> None:
    say(services, LINKED), say(services, DISTRACTOR)
    response = recall(services, QUESTION, scoring={"fallback": "never"})
    assert response.results == [] and "linked" not in stage(response, "admit")


def test_precision_and_time_window_questions_link_nothing(services: Services) -> None:
    source, linked = say(services, SOURCE), say(services, LINKED)
    precise = recall(services, QUESTION, scoring={"strictness": "precision"})
    assert linked not in [r.id for r in precise.results] and "linked" not in stage(precise, "admit")
    windowed = recall(services, "Which cities has Ines lived in during 2026?")
    assert [r.id for r in windowed.results] == [source] and "linked" not in stage(windowed, "admit")


def test_a_link_never_reaches_another_scope_or_tenant(services: Services) -> None:
    source = say(services, SOURCE)
    say(services, LINKED, scope="root.elsewhere")
    say(services, LINKED, caller=principal("globex", "gina", Role.admin))
    response = recall(services, QUESTION)
    assert [r.id for r in response.results] == [source]
    assert "linked" not in stage(response, "admit")


CHAINED = "Which city does the granddaughter live in?"
FIRST_HOP = "My granddaughter Yui lives with my son Takeshi."
SECOND_HOP = "Takeshi drove up from Osaka, which does take a while."  # cosine ~0.24 with CHAINED, no BM25 hit
UNNAMED = "Mariko drove up from Osaka, which does take a while."  # the same cosine, another name


def test_a_chained_question_finds_the_turn_naming_what_the_first_turn_names(services: Services) -> None:
    first, second, unnamed = say(services, FIRST_HOP), say(services, SECOND_HOP), say(services, UNNAMED)
    response = recall(services, CHAINED)
    found = {r.id: r for r in response.results}
    assert list(found) == [first, second]
    assert found[second].scores["named"] > 1 and found[second].score <= found[first].score
    admit = stage(response, "admit")
    assert admit["named"] == {second: first} and {"takeshi", "yui"} <= set(admit["names"])
    assert {"id": unnamed, "reason": "not_admitted:balanced"} in (response.explain or {})["omitted"]


def test_a_name_the_question_uses_is_not_followed_and_a_name_link_stays_in_scope(services: Services) -> None:
    first = say(services, FIRST_HOP)
    say(services, SECOND_HOP, scope="root.elsewhere")
    say(services, SECOND_HOP, caller=principal("globex", "gina", Role.admin))
    response = recall(services, CHAINED)
    assert [r.id for r in response.results] == [first] and "named" not in stage(response, "admit")
    asked = recall(services, "Which city does Takeshi's daughter live in?")
    assert "takeshi" not in stage(asked, "admit").get("names", [])
