"""Contract of the record store's agent-written records (listing episodes, forgetting, correcting a fact) on
SQLite and DynamoDB (moto). Builders and the `store` fixture come from the record store's own suite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mneme.adapters.dynamo.store import DynamoRecordStore
from mneme.errors import Conflict, NotFound
from mneme.models import Forgotten, HistoryEntry
from mneme.ports import RecordStore
from tests.contract.test_record_store import T0, TABLE, A, B, aws, episode, fact, scope, store
from tests.support.sessions import said_before

__all__ = ["aws", "store"]  # fixtures, used by name


def forgotten(record_id: str, kind: str = "episode", scope_id: str = "acme", tenant: str = A) -> Forgotten:
    return Forgotten.model_validate(
        {"tenant": tenant, "record_id": record_id, "kind": kind, "scope_id": scope_id, "forgotten_by": "ada",
         "forgotten_at": T0, "reason": "asked to"}
    )  # fmt: skip


def test_list_episodes_pages_newest_first_within_the_scopes_and_tenant(store: RecordStore) -> None:
    store.put_episodes([episode(f"e{i}", minute=i, scope_id="acme" if i % 2 else "beta") for i in range(1, 7)])
    store.put_episodes([episode("other", minute=9, tenant=B)])
    both = store.list_episodes(A, ["acme", "beta"], None, 4)
    assert [e.episode_id for e in both] == ["e6", "e5", "e4", "e3"]
    last = both[-1]
    rest = store.list_episodes(A, ["acme", "beta"], (last.created_at, last.episode_id), 4)
    assert [e.episode_id for e in rest] == ["e2", "e1"]
    assert [e.episode_id for e in store.list_episodes(A, ["acme"], None, 10)] == ["e5", "e3", "e1"]
    assert store.list_episodes(B, ["acme"], None, 10)[0].episode_id == "other"
    assert store.list_episodes(A, ["nowhere"], None, 10) == []


def test_forget_episode_deletes_it_leaves_a_tombstone_and_who_forgot_it(store: RecordStore) -> None:
    store.put_episodes([episode("e1", session_id="s"), episode("e2", minute=1, session_id="s")])
    gone = store.forget_episode(A, "e1", forgotten("e1"))
    assert gone is not None and gone.content == "saw e1"
    assert store.get_episodes(A, ["e1"]) == {}
    assert [e.episode_id for e in store.session_episodes(A, "acme", "s", said_before(T0 + timedelta(days=1)), 10)] == [
        "e2"
    ]
    assert [e.episode_id for e in store.list_episodes(A, ["acme"], None, 10)] == ["e2"]
    changes = store.list_changes(A, None, 10)
    assert [(kind, i) for _, kind, i in changes] == [("episode", "e2"), ("deleted:episode", "e1")]
    record = store.get_forgotten(A, "e1")
    assert record is not None and (record.forgotten_by, record.reason) == ("ada", "asked to")
    assert store.get_forgotten(B, "e1") is None
    assert store.forget_episode(A, "e1", forgotten("e1")) is None  # already gone: nothing written
    assert store.forget_episode(B, "e2", forgotten("e2", tenant=B)) is None  # another tenant's
    assert store.get_episodes(A, ["e2"]) != {}


def test_what_was_forgotten_lately_is_listed_for_a_lagging_index(store: RecordStore) -> None:
    """Recall drops an episode forgotten within its index's lag even when a lagging read still finds it."""
    store.put_episodes([episode("e1"), episode("e2", minute=1)])
    store.put_episodes([episode("e1", tenant=B)])
    store.forget_episode(A, "e1", forgotten("e1"))
    store.put_facts([fact("f1", scope_id="acme")])
    store.forget_fact(
        A, "f1", forgotten("f1", kind="fact").model_copy(update={"forgotten_at": T0 + timedelta(hours=1)})
    )

    assert store.list_forgotten_since(A, T0 - timedelta(seconds=1)) == {"e1", "f1"}
    assert store.list_forgotten_since(A, T0 + timedelta(minutes=1)) == {"f1"}
    assert store.list_forgotten_since(A, T0 + timedelta(hours=2)) == set()
    assert store.list_forgotten_since(B, T0 - timedelta(seconds=1)) == set()


def test_forget_fact_takes_its_corrections_with_it(store: RecordStore) -> None:
    store.put_facts([fact("f1", scope_id="acme"), fact("f2", scope_id="acme")])
    store.add_history(
        HistoryEntry(tenant=A, memory_id="f1", version=2, action="corrected", actor="ada", status="active", at=T0,
                     changes={"value": ["flat", "standard"]})
    )  # fmt: skip
    assert store.forget_fact(A, "f1", forgotten("f1", "fact")) is not None
    assert store.get_facts(A, ["f1"]) == {}
    assert [f.fact_id for f in store.list_facts(A, "acme")] == ["f2"]
    assert store.list_history(A, "f1") == []
    assert ("deleted:fact", "f1") in [(kind, i) for _, kind, i in store.list_changes(A, None, 10)]
    assert store.forget_fact(B, "f2", forgotten("f2", "fact", tenant=B)) is None


def test_update_fact_checks_the_version(store: RecordStore) -> None:
    original = fact("f1", scope_id="acme")
    store.put_facts([original])
    corrected = original.model_copy(update={"value": "standard", "version": 2})
    store.update_fact(corrected, 1)
    assert store.get_facts(A, ["f1"])["f1"].value == "standard"
    assert [f.version for f in store.list_facts(A, "acme")] == [2]
    with pytest.raises(Conflict) as stale:
        store.update_fact(corrected.model_copy(update={"version": 3}), 1)
    assert stale.value.code == "stale_version"
    with pytest.raises(NotFound):
        store.update_fact(fact("nope", scope_id="acme"), 1)
    assert store.list_changes(A, None, 10)[-1][1:] == ("fact", "f1")


def test_erasing_a_scope_erases_who_forgot_what(store: RecordStore) -> None:
    store.create_scope(root := scope("root", None, "root"))
    store.create_scope(scope("acme", root, "acme"))
    store.put_episodes([episode("e1"), episode("e2")])
    store.put_facts([fact("f1", scope_id="acme")])
    store.add_history(
        HistoryEntry(tenant=A, memory_id="f1", version=2, action="corrected", actor="ada", status="active", at=T0)
    )
    store.forget_episode(A, "e1", forgotten("e1"))
    store.erase_scopes(A, ["acme"], dry_run=False)
    assert store.get_forgotten(A, "e1") is None
    assert store.list_history(A, "f1") == []


def test_dynamodb_lists_erased_episodes_and_facts_as_recently_forgotten(aws: Any) -> None:
    """A Serverless index may return an erased scope's records for a while: the erasure marks them too."""
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    store.create_scope(root := scope("root", None, "root"))
    store.create_scope(scope("acme", root, "acme"))
    store.put_episodes([episode("e1"), episode("e2", minute=1)])
    store.put_facts([fact("f1", scope_id="acme")])
    store.erase_scopes(A, ["acme"], dry_run=False)
    assert store.list_forgotten_since(A, datetime.now(UTC) - timedelta(minutes=1)) == {"e1", "e2", "f1"}
    assert store.list_forgotten_since(B, datetime.now(UTC) - timedelta(minutes=1)) == set()
