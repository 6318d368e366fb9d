"""The SDK's record methods against the local server: a mem0-style session end to end (remember with
metadata, recall with a metadata filter, list, forget an episode and a fact, recall again, the tombstones in the
change feed), and correcting a fact."""

from __future__ import annotations

import pytest

from mneme_sdk import Client as MnemeClient
from mneme_sdk.errors import Conflict, InvalidInput, NotFound
from mneme_sdk.models import EpisodePage, FactRecord
from tests.integration.test_client import admin

__all__ = ["admin"]  # the fixture, used by name
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def test_remember_recall_list_forget_and_the_feed(admin: MnemeClient) -> None:
    start = admin.changes().next_cursor
    said = [
        admin.remember("root.users", "Ines: I am vegetarian, no meat at all.", create_scope=True,
                       metadata={"user": "ines", "topic": "diet"}),
        admin.remember("root.users", "Ines: being vegetarian is easy in Lisbon.", metadata={"user": "ines"}),
        admin.remember("root.users", "Tobias: I am vegetarian on weekdays.", metadata={"user": "tobias"}),
    ]  # fmt: skip
    ines = admin.recall("who is vegetarian?", scope="root.users", metadata={"user": "ines"})
    assert {r.id for r in ines.results} == {said[0].episode_id, said[1].episode_id}
    both = admin.recall("vegetarian", scope="root.users", metadata={"user": ["ines", "tobias"], "topic": "diet"})
    assert [r.id for r in both.results] == [said[0].episode_id]

    page = admin.list_episodes("root.users", metadata={"user": "ines"}, limit=1)
    assert isinstance(page, EpisodePage) and page.has_more and len(page.episodes) == 1
    rest = admin.list_episodes("root.users", metadata={"user": "ines"}, cursor=page.next_cursor)
    assert [e.id for e in page.episodes + rest.episodes] == [said[1].episode_id, said[0].episode_id]
    assert admin.get_episode(said[2].episode_id).metadata == {"user": "tobias"}

    forgot = admin.forget_episode(said[0].episode_id, reason="asked to forget")
    assert forgot.forgotten and forgot.kind == "episode"
    again = admin.recall("who is vegetarian?", scope="root.users", metadata={"user": "ines"})
    assert [r.id for r in again.results] == [said[1].episode_id]
    with pytest.raises(NotFound) as gone:
        admin.get_episode(said[0].episode_id)
    assert gone.value.code == "episode_forgotten" and gone.value.details["reason"] == "asked to forget"
    tombstones = [c for c in admin.iter_changes(start) if c.deleted]
    assert [(c.kind, c.id, c.record) for c in tombstones] == [("episode", said[0].episode_id, None)]
    with pytest.raises(InvalidInput):
        admin.list_episodes("root.users", colour="red")


def test_consolidated_facts_can_be_listed_corrected_and_forgotten(admin: MnemeClient) -> None:
    for n in range(3):
        admin.remember("root.acme", f"Acme's billing plan is Basic, ticket {n}.", create_scope=True,
                       metadata={"customer": "acme"})  # fmt: skip
    admin.wait_run(admin.consolidate().run_id)
    [fact] = [f for f in admin.list_facts("root.acme", metadata={"customer": "acme"}).facts if f.tier == "raw"]
    assert fact.value == "Basic"
    detail = admin.get_fact(fact.id)
    assert isinstance(detail, FactRecord) and detail.sources and len(detail.sources) == 3

    corrected = admin.correct_fact(fact.id, fact.version, value="Premium", reason="upgraded")
    assert (corrected.value, corrected.version) == ("Premium", fact.version + 1)
    with pytest.raises(Conflict):
        admin.correct_fact(fact.id, fact.version, value="Gold")
    assert admin.get_fact(fact.id).history[-1]["changes"]["value"] == ["Basic", "Premium"]  # type: ignore[index]

    assert admin.forget_fact(fact.id, reason="wrong customer").forgotten
    assert fact.id not in {r.id for r in admin.recall("Acme billing plan", scope="root.acme").results}
    assert fact.id not in {f.id for f in admin.list_facts("root.acme").facts}
