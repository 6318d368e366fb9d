"""What becomes of a fact when one of its source episodes is forgotten (`forgetting._settlement`): pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from mneme.language.digests import Standing
from mneme.models import Episode
from mneme.records import Fact
from mneme.services.forgetting import _settlement

T = datetime(2026, 3, 2, 9, tzinfo=UTC)


def episode(episode_id: str, content: str, minutes: int = 0) -> Episode:
    return Episode(tenant="t", episode_id=episode_id, scope_id="s", content=content, content_hash=episode_id,
                   occurred_at=T + timedelta(minutes=minutes), created_at=T, author="a")  # fmt: skip


def fact(**fields: Any) -> Fact:
    stamps = {"valid_from": T, "created_at": T, "updated_at": T, "reinforced_at": T}
    sources = {"source_episode_ids": ["ep_1", "ep_2", "ep_3"], "summary": "Maya's favourite colour is teal."}
    base: dict[str, Any] = {"tenant": "t", "fact_id": "fa_1", "scope_id": "s", "confidence": 0.5, **stamps, **sources}
    return Fact.model_validate({**base, **fields})


CLAIM = {"entity": "Maya", "property": "favourite colour", "value": "teal"}


def test_a_fact_with_no_source_left_is_retracted() -> None:
    assert _settlement(fact(**CLAIM), []) == ("retracted", {})


def test_a_claim_still_stated_by_its_other_sources_is_regrounded_on_them() -> None:
    left = [episode("ep_2", "Maya said her favourite colour is teal."), episode("ep_3", "Teal, said Maya.")]
    assert _settlement(fact(**CLAIM), left) == ("regrounded", {"source_episode_ids": ["ep_2", "ep_3"], "stale": False})


def test_a_claim_its_other_sources_do_not_state_is_marked_stale_and_keeps_its_sources() -> None:
    action, update = _settlement(fact(**CLAIM), [episode("ep_2", "Maya painted the fence.")])
    assert (action, update) == ("stale", {"stale": True})  # the forgotten id stays listed: maintenance keeps it stale


def test_a_rollup_is_composed_again_from_the_claims_standing_and_the_turns_left() -> None:
    rollup = fact(fact_id="ro_1", tier="daily", summary="Maya's favourite colour is teal.\nThe secret gate code.")
    left = [episode("ep_2", "Maya painted the fence teal.", 5), episode("ep_3", "Maya painted the gate blue.", 9)]
    standing = Standing.of([fact(**CLAIM, source_episode_ids=["ep_1", "ep_2"])])
    action, update = _settlement(rollup, left, standing)
    assert action == "rebuilt" and update["source_episode_ids"] == ["ep_2", "ep_3"]
    assert update["summary"] == "Maya's favourite colour is teal.\nMaya painted the gate blue."  # ep_2: the claim's
    assert "secret" not in update["summary"] and update["valid_from"] == T + timedelta(minutes=5)
    assert _settlement(rollup, [episode("ep_2", "Lol, thanks!")]) == ("retracted", {})  # small talk: no roll-up


def test_a_summary_is_regrounded_rebuilt_or_retracted_by_what_is_left() -> None:
    summary = fact(summary="Maya painted the fence and the gate.")
    both = [episode("ep_2", "Maya painted the fence."), episode("ep_3", "Maya painted the gate and the fence.")]
    assert _settlement(summary, both)[0] == "regrounded"
    other = [episode("ep_2", "Maya baked bread."), episode("ep_3", "Maya baked rolls, bread too.")]
    action, update = _settlement(summary, other)
    assert action == "rebuilt" and update["summary"] in {"Maya baked bread.", "Maya baked rolls, bread too."}
    assert _settlement(summary, other[:1]) == ("retracted", {})  # a lone episode with no claim stays an episode
