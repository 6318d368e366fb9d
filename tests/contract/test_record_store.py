"""One contract for every RecordStore adapter: the embedded SQLite store and DynamoDB (under moto)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws
from moto.dynamodb import models as moto_dynamodb_models
from moto.dynamodb.models.table import Table as MotoTable

from mneme.adapters.dynamo.store import TABLE_SCHEMA, DynamoRecordStore, create_table
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import Conflict, StoreUnavailable
from mneme.models import ApiKey, Episode, HistoryEntry, Memory, Revision, Role, Scope, session_position
from mneme.ports import RecordStore
from mneme.records import Checkpoint, Contradiction, Fact, Run, StageReport, Waiting
from tests.support.legacy import forget_sessions
from tests.support.moto import one_call_at_a_time
from tests.support.sessions import said_before
from tests.support.stored import contradictions

TABLE = "mneme-contract"
T0 = datetime(2025, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
A, B = "tenant-a", "tenant-b"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_table(client, TABLE)
        yield client


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RecordStore:
    if request.param == "sqlite":
        return SqliteRecordStore(tmp_path / "mneme.db")
    return DynamoRecordStore(TABLE, client=request.getfixturevalue("aws"), feed_horizon_seconds=0)


# -- builders -------------------------------------------------------------------------------
def scope(scope_id: str, parent: Scope | None, segment: str, tenant: str = A) -> Scope:
    return Scope(
        tenant=tenant,
        scope_id=scope_id,
        parent_id=parent.scope_id if parent else None,
        segment=segment,
        depth=0 if parent is None else parent.depth + 1,
        created_at=T0,
        updated_at=T0,
    )


def _memory(memory_id: str, tenant: str, fields: dict[str, Any]) -> Memory:
    base: dict[str, Any] = {"body": f"body of {memory_id}", "status": "published", "author": "ada"}
    stamps = {"created_at": T0, "updated_at": T0}
    return Memory.model_validate({**base, **stamps, **fields, "tenant": tenant, "memory_id": memory_id})


def scoped(memory_id: str, scope_id: str, key: str, tenant: str = A, **fields: Any) -> Memory:
    return _memory(memory_id, tenant, {"kind": "scoped", "scope_id": scope_id, "key": key, **fields})


def tagged(memory_id: str, layer: str, value: str | None, key: str, tenant: str = A, **fields: Any) -> Memory:
    target = {"kind": "tagged", "layer": layer, "value": value, "key": key}
    return _memory(memory_id, tenant, {**target, **fields})


def api_key(key_id: str, tenant: str = A, **fields: Any) -> ApiKey:
    base: dict[str, Any] = {"principal": "bot", "roles": [Role.reader, Role.writer], "created_at": T0}
    identity = {"key_hash": f"hash-{tenant}-{key_id}", "key_id": key_id, "tenant": tenant}
    return ApiKey.model_validate({**base, **fields, **identity})


def episode(episode_id: str, minute: int = 0, tenant: str = A, **fields: Any) -> Episode:
    base: dict[str, Any] = {"scope_id": "acme", "content": f"saw {episode_id}", "author": "agent-7"}
    stamps = {"occurred_at": T0, "created_at": T0 + timedelta(minutes=minute)}
    content_hash = {"content_hash": f"hash-of-{episode_id}"}
    return Episode.model_validate(
        {**base, **stamps, **content_hash, **fields, "tenant": tenant, "episode_id": episode_id}
    )


def fact(fact_id: str, scope_id: str = "s1", tenant: str = A, **fields: Any) -> Fact:
    base: dict[str, Any] = {"summary": f"fact {fact_id}", "confidence": 0.8, "source_episode_ids": ["e1", "e2"]}
    stamps = {"valid_from": T0, "created_at": T0, "updated_at": T0, "reinforced_at": T0}
    identity = {"tenant": tenant, "fact_id": fact_id, "scope_id": scope_id}
    return Fact.model_validate({**base, **stamps, **fields, **identity})


def contradiction(contradiction_id: str, scope_id: str = "s1", tenant: str = A, **fields: Any) -> Contradiction:
    base: dict[str, Any] = {
        "entity": "acme",
        "property": "vat",
        "old_fact_id": "f1",
        "new_fact_id": "f2",
        "old_value": "flat",
        "new_value": "standard",
        "resolution": "superseded",
        "created_at": T0,
    }
    identity = {"tenant": tenant, "contradiction_id": contradiction_id, "scope_id": scope_id}
    return Contradiction.model_validate({**base, **fields, **identity})


def revision(memory_id: str, author: str, tenant: str = A, **fields: Any) -> Revision:
    base: dict[str, Any] = {"base_version": 1, "changes": {"body": f"{author}'s body"}}
    identity = {"tenant": tenant, "memory_id": memory_id, "author": author}
    return Revision.model_validate({**base, "created_at": T0, "updated_at": T0, **fields, **identity})


def history(memory_id: str, version: int, action: str, tenant: str = A, **fields: Any) -> HistoryEntry:
    base: dict[str, Any] = {"actor": "ada", "status": "published", "at": T0}
    identity = {"tenant": tenant, "memory_id": memory_id, "version": version, "action": action}
    return HistoryEntry.model_validate({**base, **fields, **identity})


def tree(store: RecordStore, tenant: str = A) -> tuple[Scope, Scope]:
    """root and root.acme."""
    root = scope("r", None, "root", tenant)
    acme = scope("acme", root, "acme", tenant)
    store.create_scope(root)
    store.create_scope(acme)
    return root, acme


def ids(memories: list[Memory]) -> list[str]:
    return [memory.memory_id for memory in memories]


def ids_of(episodes: list[Episode]) -> list[str]:
    return [e.episode_id for e in episodes]


# -- scopes ---------------------------------------------------------------------------------
def test_absent_scope_records_read_as_none(store: RecordStore) -> None:
    assert store.get_scope(A, "nope") is None
    assert store.find_child(A, None, "root") is None
    assert store.find_alias(A, "nope", "x") is None
    assert store.list_children(A, "nope") == []


def test_create_scope_round_trips_and_is_found_by_slot(store: RecordStore) -> None:
    root, acme = tree(store)

    assert store.get_scope(A, "r") == root
    assert store.get_scope(A, "acme") == acme
    assert store.find_child(A, None, "root") == root
    assert store.find_child(A, "r", "acme") == acme
    assert store.find_child(A, "r", "other") is None
    assert store.find_alias(A, "r", "acme") is None  # a live name is not an alias


def test_get_scopes_reads_many_scopes_of_one_tenant_at_once(store: RecordStore) -> None:
    root, acme = tree(store)
    teams = [scope(f"team-{i:03d}", acme, f"team-{i:03d}") for i in range(120)]  # more than one DynamoDB batch
    for team in teams:
        store.create_scope(team)
    tree(store, B)  # the same ids in another tenant

    found = store.get_scopes(A, ["r", "acme", *(team.scope_id for team in teams), "missing", "r"])

    assert found == {"r": root, "acme": acme, **{team.scope_id: team for team in teams}}
    assert store.get_scopes(A, []) == {}
    assert store.get_scopes("nobody", ["r", "acme"]) == {}


def test_list_children_is_ordered_by_segment_and_only_direct_live_children(store: RecordStore) -> None:
    root, acme = tree(store)
    for scope_id, segment in [("z", "zeta"), ("b", "beta"), ("m", "mid-1"), ("m0", "mid")]:
        store.create_scope(scope(scope_id, root, segment))
    store.create_scope(scope("vat", acme, "vat"))
    store.rename_scope(A, "b", "alpha", T0)  # leaves an alias "beta", which is not a child

    children = store.list_children(A, "r")

    assert [child.segment for child in children] == ["acme", "alpha", "mid", "mid-1", "zeta"]
    assert [child.segment for child in store.list_children(A, "acme")] == ["vat"]


def test_same_segment_under_different_parents_is_allowed(store: RecordStore) -> None:
    root, acme = tree(store)
    store.create_scope(scope("vat1", root, "vat"))
    store.create_scope(scope("vat2", acme, "vat"))

    assert store.find_child(A, "r", "vat").scope_id == "vat1"  # type: ignore[union-attr]
    assert store.find_child(A, "acme", "vat").scope_id == "vat2"  # type: ignore[union-attr]


def test_create_scope_on_a_live_name_conflicts_and_writes_nothing(store: RecordStore) -> None:
    root, acme = tree(store)

    with pytest.raises(Conflict):
        store.create_scope(scope("acme2", root, "acme"))

    assert store.get_scope(A, "acme2") is None
    assert store.find_child(A, "r", "acme") == acme
    assert [child.scope_id for child in store.list_children(A, "r")] == ["acme"]


def test_create_scope_on_an_alias_conflicts_and_writes_nothing(store: RecordStore) -> None:
    root, _ = tree(store)
    store.rename_scope(A, "acme", "acme-ltd", T0)

    with pytest.raises(Conflict):
        store.create_scope(scope("new", root, "acme"))

    assert store.get_scope(A, "new") is None
    assert store.find_alias(A, "r", "acme") == "acme"
    assert store.find_child(A, "r", "acme") is None


def test_rename_moves_the_name_and_leaves_an_alias(store: RecordStore) -> None:
    _, acme = tree(store)
    later = T0 + timedelta(hours=1)

    renamed = store.rename_scope(A, "acme", "acme-ltd", later)

    assert renamed == acme.model_copy(update={"segment": "acme-ltd", "updated_at": later})
    assert store.get_scope(A, "acme") == renamed
    assert store.find_child(A, "r", "acme-ltd") == renamed
    assert store.find_child(A, "r", "acme") is None
    assert store.find_alias(A, "r", "acme") == "acme"
    assert store.find_alias(A, "r", "acme-ltd") is None
    assert [child.segment for child in store.list_children(A, "r")] == ["acme-ltd"]


def test_chained_renames_leave_every_old_name_resolving(store: RecordStore) -> None:
    tree(store)
    store.rename_scope(A, "acme", "b", T0)
    store.rename_scope(A, "acme", "c", T0)

    assert store.find_alias(A, "r", "acme") == "acme"
    assert store.find_alias(A, "r", "b") == "acme"
    assert store.find_child(A, "r", "c").scope_id == "acme"  # type: ignore[union-attr]
    assert store.get_scope(A, "acme").segment == "c"  # type: ignore[union-attr]


def test_renaming_back_consumes_the_scopes_own_alias(store: RecordStore) -> None:
    tree(store)
    store.rename_scope(A, "acme", "acme-ltd", T0)

    back = store.rename_scope(A, "acme", "acme", T0 + timedelta(minutes=5))

    assert back.segment == "acme"
    assert store.find_child(A, "r", "acme") == back
    assert store.find_alias(A, "r", "acme") is None
    assert store.find_alias(A, "r", "acme-ltd") == "acme"
    assert store.find_child(A, "r", "acme-ltd") is None


def test_rename_onto_a_live_scope_conflicts_and_writes_nothing(store: RecordStore) -> None:
    root, acme = tree(store)
    other = scope("other", root, "other")
    store.create_scope(other)

    with pytest.raises(Conflict):
        store.rename_scope(A, "acme", "other", T0 + timedelta(hours=1))

    assert store.get_scope(A, "acme") == acme
    assert store.find_child(A, "r", "acme") == acme
    assert store.find_child(A, "r", "other") == other
    assert store.find_alias(A, "r", "acme") is None


def test_rename_onto_another_scopes_alias_conflicts_and_writes_nothing(store: RecordStore) -> None:
    root, _ = tree(store)
    store.rename_scope(A, "acme", "acme-ltd", T0)  # "acme" is now an alias of scope acme
    beta = scope("beta", root, "beta")
    store.create_scope(beta)

    with pytest.raises(Conflict):
        store.rename_scope(A, "beta", "acme", T0 + timedelta(hours=1))

    assert store.get_scope(A, "beta") == beta
    assert store.find_child(A, "r", "beta") == beta
    assert store.find_alias(A, "r", "acme") == "acme"
    assert store.find_alias(A, "r", "beta") is None


def test_rename_of_a_missing_scope_conflicts(store: RecordStore) -> None:
    tree(store)

    with pytest.raises(Conflict):
        store.rename_scope(A, "ghost", "anything", T0)

    assert store.find_child(A, "r", "anything") is None


# -- layers ---------------------------------------------------------------------------------
def test_layers_round_trip_and_are_replaced_whole(store: RecordStore) -> None:
    assert store.get_layers(A) == {}

    store.put_layers(A, {1: "clients", 2: "services", 3: "years"})
    assert store.get_layers(A) == {1: "clients", 2: "services", 3: "years"}

    store.put_layers(A, {1: "customers"})
    assert store.get_layers(A) == {1: "customers"}


# -- memories -------------------------------------------------------------------------------
def test_memory_round_trips_every_field_exactly(store: RecordStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    memory = scoped(
        "m1",
        "acme",
        "vat-policy",
        status="pending",
        version=3,
        summary="VAT rules",
        tags=["vat", "tax", "vat"],
        triggers=["invoice", "ünïcode ✓"],
        confidence=0.1 + 0.2,
        valid_until=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=plus_two),
        review_due=T0,
        depends_on=["m0", "m-1"],
        body='# Heading\n\n- line with `code` and "quotes"\n',
    )

    store.create_memory(memory)
    got = store.get_memory(A, "m1")

    assert got == memory
    assert got is not None and got.confidence == 0.30000000000000004
    assert got.valid_until is not None and got.valid_until.utcoffset() is not None
    assert got.tags == ["vat", "tax", "vat"]


def test_memory_optional_fields_and_whole_floats_round_trip(store: RecordStore) -> None:
    store.create_memory(scoped("m1", "acme", "a", confidence=1.0))
    store.create_memory(tagged("m2", "services", None, "b"))

    one, two = store.get_memory(A, "m1"), store.get_memory(A, "m2")

    assert one is not None and one.confidence == 1.0 and isinstance(one.confidence, float)
    assert two == tagged("m2", "services", None, "b")
    assert store.get_memory(A, "nope") is None


def test_memories_read_in_one_call_as_each_alone(store: RecordStore) -> None:
    # Given a scoped, a tagged and an archived memory, and another tenant's
    store.create_memory(scoped("m1", "acme", "a"))
    store.create_memory(tagged("m2", "services", None, "b"))
    store.create_memory(scoped("m3", "acme", "c"))
    archived = store.get_memory(A, "m3")
    assert archived is not None
    store.update_memory(archived.model_copy(update={"status": "archived", "version": 2}), 1)
    store.create_memory(scoped("m4", "acme", "d", tenant="other"))
    # When they are read together (with an id twice and one that does not exist)
    found = store.get_memories(A, ["m1", "m2", "m3", "m1", "m4", "nope"])
    # Then each is what get_memory returns, and only this tenant's
    assert found == {i: store.get_memory(A, i) for i in ("m1", "m2", "m3")}
    assert found["m3"].status == "archived"
    assert store.get_memories(A, []) == {}


def test_scoped_key_is_unique_per_scope(store: RecordStore) -> None:
    store.create_memory(scoped("m1", "acme", "vat-policy"))

    with pytest.raises(Conflict):
        store.create_memory(scoped("m2", "acme", "vat-policy"))

    assert store.get_memory(A, "m2") is None
    assert ids(store.list_scoped_memories(A, "acme")) == ["m1"]
    store.create_memory(scoped("m3", "other", "vat-policy"))  # same key, other scope
    store.create_memory(tagged("m4", "clients", "acme", "vat-policy"))  # same key, tagged
    assert ids(store.list_scoped_memories(A, "other")) == ["m3"]


def test_tagged_key_is_unique_per_layer_and_value(store: RecordStore) -> None:
    store.create_memory(tagged("wide", "services", None, "rule"))
    store.create_memory(tagged("vat", "services", "vat", "rule"))  # value-targeted: another slot
    store.create_memory(tagged("pay", "services", "payroll", "rule"))
    store.create_memory(tagged("other-layer", "clients", None, "rule"))

    with pytest.raises(Conflict):
        store.create_memory(tagged("wide2", "services", None, "rule"))
    with pytest.raises(Conflict):
        store.create_memory(tagged("vat2", "services", "vat", "rule"))

    assert store.get_memory(A, "wide2") is None and store.get_memory(A, "vat2") is None
    assert ids(store.list_tagged_memories(A, "services", None)) == ["wide"]
    assert ids(store.list_tagged_memories(A, "services", "vat")) == ["vat"]
    assert ids(store.list_tagged_memories(A, "services", "payroll")) == ["pay"]
    assert ids(store.list_tagged_memories(A, "clients", None)) == ["other-layer"]


def test_update_with_the_expected_version_replaces_the_record(store: RecordStore) -> None:
    memory = scoped("m1", "acme", "k")
    store.create_memory(memory)
    edited = memory.model_copy(update={"body": "new body", "version": 2, "updated_at": T0 + timedelta(days=1)})

    store.update_memory(edited, expected_version=1)

    assert store.get_memory(A, "m1") == edited
    assert store.list_scoped_memories(A, "acme") == [edited]


def test_update_with_a_stale_version_conflicts_and_writes_nothing(store: RecordStore) -> None:
    memory = scoped("m1", "acme", "k")
    store.create_memory(memory)
    first = memory.model_copy(update={"body": "first", "version": 2})
    store.update_memory(first, expected_version=1)

    with pytest.raises(Conflict):
        store.update_memory(memory.model_copy(update={"body": "second", "version": 2}), expected_version=1)

    assert store.get_memory(A, "m1") == first
    assert store.list_scoped_memories(A, "acme") == [first]


def test_update_of_a_missing_memory_conflicts(store: RecordStore) -> None:
    with pytest.raises(Conflict):
        store.update_memory(scoped("ghost", "acme", "k", version=2), expected_version=1)

    assert store.get_memory(A, "ghost") is None
    assert store.list_scoped_memories(A, "acme") == []


def test_archiving_frees_the_key(store: RecordStore) -> None:
    memory = scoped("m1", "acme", "k")
    store.create_memory(memory)
    archived = memory.model_copy(update={"status": "archived", "version": 2})

    store.update_memory(archived, expected_version=1)
    store.create_memory(scoped("m2", "acme", "k"))

    assert store.get_memory(A, "m1") == archived
    assert ids(store.list_scoped_memories(A, "acme")) == ["m2"]


@pytest.mark.parametrize("target", ["scoped", "tagged"])
def test_a_pending_draft_holds_its_key_for_its_author_only(store: RecordStore, target: str) -> None:
    def draft(memory_id: str, author: str, **fields: Any) -> Memory:
        if target == "scoped":
            return scoped(memory_id, "acme", "k", status="pending", author=author, **fields)
        return tagged(memory_id, "services", "vat", "k", status="pending", author=author, **fields)

    def listed() -> list[str]:
        if target == "scoped":
            return ids(store.list_scoped_memories(A, "acme"))
        return ids(store.list_tagged_memories(A, "services", "vat"))

    # Two authors each hold a draft of one key; the same author twice is a conflict
    store.create_memory(draft("m1", "wendy"))
    store.create_memory(draft("m2", "oscar"))
    with pytest.raises(Conflict) as twice:
        store.create_memory(draft("m3", "wendy"))
    assert twice.value.code == "memory_exists" and listed() == ["m1", "m2"]
    # Publishing one takes the key: the other draft cannot be published over it, nor a new draft made
    store.update_memory(draft("m1", "wendy", version=2).model_copy(update={"status": "published"}), 1)
    with pytest.raises(Conflict) as over:
        store.update_memory(draft("m2", "oscar", version=2).model_copy(update={"status": "published"}), 1)
    assert over.value.code == "memory_exists"
    with pytest.raises(Conflict) as late:
        store.create_memory(draft("m4", "pat"))
    assert late.value.code == "memory_exists"
    # Its author can still edit or withdraw the draft that lost
    store.update_memory(draft("m2", "oscar", version=2, body="edited"), 1)
    store.update_memory(draft("m2", "oscar", version=3).model_copy(update={"status": "archived"}), 2)
    assert listed() == ["m1"]


def test_archiving_a_tagged_memory_frees_its_key(store: RecordStore) -> None:
    memory = tagged("t1", "services", "vat", "rule")
    store.create_memory(memory)

    store.update_memory(memory.model_copy(update={"status": "archived", "version": 2}), expected_version=1)
    store.create_memory(tagged("t2", "services", "vat", "rule"))

    assert ids(store.list_tagged_memories(A, "services", "vat")) == ["t2"]


def test_changing_the_key_moves_the_uniqueness_slot(store: RecordStore) -> None:
    memory = scoped("m1", "acme", "old")
    store.create_memory(memory)
    moved = memory.model_copy(update={"key": "new", "scope_id": "other", "version": 2})

    store.update_memory(moved, expected_version=1)

    store.create_memory(scoped("m2", "acme", "old"))  # the old slot is free
    with pytest.raises(Conflict):
        store.create_memory(scoped("m3", "other", "new"))  # the new one is taken
    assert ids(store.list_scoped_memories(A, "acme")) == ["m2"]
    assert ids(store.list_scoped_memories(A, "other")) == ["m1"]


def test_changing_the_key_onto_a_taken_key_conflicts_and_writes_nothing(store: RecordStore) -> None:
    one, two = scoped("m1", "acme", "a"), scoped("m2", "acme", "b")
    store.create_memory(one)
    store.create_memory(two)

    with pytest.raises(Conflict):
        store.update_memory(one.model_copy(update={"key": "b", "version": 2}), expected_version=1)

    assert store.get_memory(A, "m1") == one
    assert store.list_scoped_memories(A, "acme") == [one, two]
    store.update_memory(one.model_copy(update={"body": "still mine", "version": 2}), expected_version=1)


def test_lists_are_ordered_by_key_then_id_and_skip_archived_and_other_targets(store: RecordStore) -> None:
    for memory_id, key in [
        ("m3", "zeta"),
        ("m1", "alpha"),
        ("m4", "Beta"),
        ("m2", "alpha-2"),
        ("m5", "gone"),
    ]:
        store.create_memory(scoped(memory_id, "acme", key, status="pending" if key == "zeta" else "published"))
    gone = store.get_memory(A, "m5")
    assert gone is not None
    store.update_memory(gone.model_copy(update={"status": "archived", "version": 2}), expected_version=1)
    store.create_memory(scoped("x", "other", "alpha"))
    store.create_memory(tagged("t2", "services", None, "b"))
    store.create_memory(tagged("t1", "services", None, "a"))
    store.create_memory(tagged("tv", "services", "vat", "a"))

    assert ids(store.list_scoped_memories(A, "acme")) == ["m4", "m1", "m2", "m3"]  # "Beta" < "alpha"
    assert ids(store.list_tagged_memories(A, "services", None)) == ["t1", "t2"]
    assert ids(store.list_tagged_memories(A, "services", "vat")) == ["tv"]
    assert store.list_tagged_memories(A, "services", "payroll") == []
    assert store.list_scoped_memories(A, "nobody") == []


@pytest.fixture
def cheap_moto_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto deep-copies the whole table before every transaction item (to roll back a cancelled one),
    which makes 1,200 creates take minutes. For a test in which no transaction is cancelled, skip it."""
    real_deepcopy = copy.deepcopy

    def deepcopy(obj: Any, memo: Any = None) -> Any:
        return obj if isinstance(obj, MotoTable) else real_deepcopy(obj, memo)

    monkeypatch.setattr(moto_dynamodb_models, "copy", SimpleNamespace(deepcopy=deepcopy))


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_more_than_a_page_of_memories_in_one_scope_all_come_back_in_order(store: RecordStore) -> None:
    # 1,200 items of ~1.3 KB are more than DynamoDB's 1 MB page, so the adapter must follow pages.
    for n in range(1200):
        store.create_memory(scoped(f"m{n:04d}", "big", f"key-{(n * 7919) % 1200:04d}", body="x" * 1000))
    queries = _count_queries(store.client) if isinstance(store, DynamoRecordStore) else [1, 1]

    listed = store.list_scoped_memories(A, "big")

    assert len(queries) >= 2
    assert len(listed) == 1200
    assert [memory.key for memory in listed] == [f"key-{n:04d}" for n in range(1200)]
    assert {memory.memory_id for memory in listed} == {f"m{n:04d}" for n in range(1200)}


def test_list_memories_is_every_live_memory_of_the_tenant_by_id(store: RecordStore) -> None:
    store.create_memory(scoped("m2", "acme", "a"))
    store.create_memory(tagged("m1", "services", None, "a"))
    store.create_memory(tagged("m3", "services", "vat", "a", status="pending"))
    gone = scoped("m0", "other", "x")
    store.create_memory(gone)
    store.update_memory(gone.model_copy(update={"status": "archived", "version": 2}), expected_version=1)

    assert ids(store.list_memories(A)) == ["m1", "m2", "m3"]
    assert ids(store.list_memories(A, archived=True)) == ["m0", "m1", "m2", "m3"]
    assert store.list_memories(B) == [] and store.list_memories(B, archived=True) == []


# -- episodes -------------------------------------------------------------------------------
def test_episodes_round_trip_exactly(store: RecordStore) -> None:
    metadata = {
        "source": "chat",
        "n": 1,
        "ratio": 1.0,
        "tiny": 1e-300,
        "nested": {"list": [1, 2.5, None, "ü"]},
    }
    # a dimension that is not a multiple of 8 is stored float32 (DynamoDB quantises the others): these round-trip
    vector = [float(np.float32(x)) for x in (0.1, -0.2, 1 / 3, 0.0, -1e-30)]
    first = episode(
        "e1",
        occurred_at=datetime(2025, 2, 1, 8, 0, 0, 1, tzinfo=timezone(timedelta(hours=-5))),
        metadata=metadata,
        vector=vector,
        model_id="minilm@384",
        session_id="s1",
        tier="daily",
        format="sttp",
    )
    second = episode("e2")

    assert store.put_episodes([first, second]) == ([first, second], {"e1", "e2"})

    got = store.get_episodes(A, ["e1", "e2", "missing", "e1"])
    assert got == {"e1": first, "e2": second}
    assert got["e1"].metadata == metadata and isinstance(got["e1"].metadata["ratio"], float)
    assert got["e1"].vector == vector
    assert store.get_episodes(A, []) == {}


def test_get_episodes_without_vectors_reads_everything_else(store: RecordStore) -> None:
    """`vectors=False` lets a store leave the vector out; every other field reads the same, also when a
    nested field carries its own "vector" key or a string spells one."""
    plain = episode("e1", model_id="m@3", vector=[0.25, -0.5, 1.0], content='says "vector":[1] here')
    nested = episode(
        "e2", model_id="m@3", vector=[1.0, 0.0, 0.0], metadata={"vector": [9, 9]}, structured={"vector": None}
    )
    store.put_episodes([plain, nested, episode("e3")])

    got = store.get_episodes(A, ["e1", "e2", "e3"], vectors=False)

    for original in (plain, nested, episode("e3")):
        found = got[original.episode_id]
        assert found.vector in (None, original.vector)
        assert found.model_copy(update={"vector": original.vector}) == original
    assert store.get_episodes(A, ["e1"], vectors=True)["e1"].vector == plain.vector


def test_putting_episodes_again_returns_the_first_records_and_writes_nothing(
    store: RecordStore,
) -> None:
    first = episode("e1", minute=1)
    store.put_episodes([first])
    retry = first.model_copy(update={"created_at": T0 + timedelta(hours=5), "content": "same hash"})

    stored, written = store.put_episodes([retry, episode("e2", minute=2)])

    assert stored == [first, episode("e2", minute=2)]
    assert written == {"e2"}
    assert store.get_episodes(A, ["e1"]) == {"e1": first}
    assert ids_of(store.list_recent_episodes(A, T0, 10)) == ["e2", "e1"]


def test_a_reused_episode_id_with_other_content_conflicts_and_writes_no_episode(
    store: RecordStore,
) -> None:
    store.put_episodes([episode("e1")])

    with pytest.raises(Conflict):
        store.put_episodes([episode("e2"), episode("e1", content_hash="another")])
    with pytest.raises(Conflict):
        store.put_episodes([episode("e3"), episode("e3", content_hash="another")])

    assert set(store.get_episodes(A, ["e1", "e2", "e3"])) == {"e1"}


def test_an_id_repeated_in_one_batch_is_written_once(store: RecordStore) -> None:
    stored, written = store.put_episodes([episode("e1"), episode("e1", content="retyped")])

    assert stored == [episode("e1"), episode("e1")]
    assert written == {"e1"}
    assert store.get_episodes(A, ["e1"]) == {"e1": episode("e1")}


@pytest.fixture
def one_moto_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    one_call_at_a_time(monkeypatch)


@pytest.mark.usefixtures("one_moto_call_at_a_time")
def test_of_concurrent_writers_of_one_id_exactly_one_learns_it_wrote_it(store: RecordStore) -> None:
    """The conditional write decides who created an episode; everyone gets the stored record."""
    barrier = threading.Barrier(6)

    def put() -> tuple[list[Episode], set[str]]:
        barrier.wait()
        return store.put_episodes([episode("e1"), episode("e2", minute=1)])

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(lambda _: put(), range(6)))

    assert all(stored == [episode("e1"), episode("e2", minute=1)] for stored, _ in outcomes)
    assert sorted(len(written) for _, written in outcomes) == [0, 0, 0, 0, 0, 2]
    assert ids_of(store.list_recent_episodes(A, T0, 10)) == ["e2", "e1"]


def test_more_than_a_hundred_episodes_are_all_stored(store: RecordStore) -> None:
    batch = [episode(f"e{n:03d}", minute=n) for n in range(150)]

    assert store.put_episodes(batch) == (batch, {e.episode_id for e in batch})

    assert len(store.get_episodes(A, [e.episode_id for e in batch])) == 150


def test_unindexed_episodes_are_listed_oldest_first_across_tenants_until_marked(store: RecordStore) -> None:
    # (written in created_at order: "oldest" is unambiguous whether a store orders by time or by write)
    store.put_episodes([episode("done", 0, indexed=True), episode("a1", 1)])
    store.put_episodes([episode("b2", 2, tenant=B)])
    store.put_episodes([episode("a3", 3)])

    assert ids_of(store.list_unindexed(10)) == ["a1", "b2", "a3"]
    assert ids_of(store.list_unindexed(2)) == ["a1", "b2"]

    store.mark_indexed(A, ["a1", "missing"])
    store.mark_indexed(A, ["b2"])  # tenant A cannot mark tenant B's episode

    assert ids_of(store.list_unindexed(10)) == ["b2", "a3"]
    assert store.get_episodes(A, ["a1"])["a1"].indexed is True
    assert store.get_episodes(B, ["b2"])["b2"].indexed is False
    store.mark_indexed(B, ["b2"])
    store.mark_indexed(A, ["a3"])
    assert store.list_unindexed(10) == []


def test_recent_episodes_are_newest_first_from_since_on(store: RecordStore) -> None:
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(6)])
    store.put_episodes([episode("other", minute=9, tenant=B)])

    assert ids_of(store.list_recent_episodes(A, T0 + timedelta(minutes=2), 10)) == ["e5", "e4", "e3", "e2"]
    assert ids_of(store.list_recent_episodes(A, T0 + timedelta(minutes=2), 3)) == ["e5", "e4", "e3"]
    since_in_another_zone = (T0 + timedelta(minutes=4)).astimezone(timezone(timedelta(hours=3)))
    assert ids_of(store.list_recent_episodes(A, since_in_another_zone, 10)) == ["e5", "e4"]
    assert store.list_recent_episodes(A, T0 + timedelta(minutes=6), 10) == []


def test_recent_episodes_of_given_scopes_are_read_scope_by_scope(store: RecordStore) -> None:
    """A busy scope cannot crowd a quiet one out of a scoped read: each scope gives its own newest
    `limit`, merged newest first."""
    store.put_episodes([episode("quiet", minute=1, scope_id="quiet"), episode("other", minute=2, scope_id="x")])
    store.put_episodes([episode(f"busy{n}", minute=10 + n, scope_id="busy") for n in range(5)])
    store.put_episodes([episode("b-quiet", minute=3, scope_id="quiet", tenant=B)])

    assert ids_of(store.list_recent_episodes(A, T0, 3)) == ["busy4", "busy3", "busy2"]
    assert ids_of(store.list_recent_episodes(A, T0, 3, ["quiet"])) == ["quiet"]
    assert ids_of(store.list_recent_episodes(A, T0, 3, ["quiet", "busy"])) == ["busy4", "busy3", "busy2", "quiet"]
    assert ids_of(store.list_recent_episodes(A, T0, 10, ["quiet", "x"])) == ["other", "quiet"]
    assert store.list_recent_episodes(A, T0, 10, []) == []
    assert store.list_recent_episodes(A, T0 + timedelta(minutes=2), 10, ["quiet"]) == []


def turn(episode_id: str, minute: int, session: str | None = "chat-1", **fields: Any) -> Episode:
    """A conversation's turn: occurred `minute` minutes after T0 (written in any order)."""
    return episode(episode_id, occurred_at=T0 + timedelta(minutes=minute), session_id=session, **fields)


def test_session_episodes_are_the_turns_before_a_time_latest_first(store: RecordStore) -> None:
    store.put_episodes([turn("t2", 2), turn("t0", 0), turn("t3", 3)])
    store.put_episodes([turn("t1", 1), turn("t4", 4)])  # written later, said earlier

    before = T0 + timedelta(minutes=3)
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(before), 10)) == ["t2", "t1", "t0"]
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(before), 2)) == ["t2", "t1"]
    in_another_zone = before.astimezone(timezone(timedelta(hours=-5)))
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(in_another_zone), 1)) == ["t2"]
    assert store.session_episodes(A, "acme", "chat-1", said_before(T0), 10) == []  # strictly before
    assert store.session_episodes(A, "acme", "chat-1", said_before(before), 0) == []


def test_turns_said_at_one_time_stand_in_the_order_they_were_given(store: RecordStore) -> None:
    first_call = [turn(f"a{n}", 0, sequence=n) for n in range(3)]  # one time for the session, as a chat log gives
    second_call = [turn(f"b{n}", 0, sequence=n, created_at=T0 + timedelta(seconds=5)) for n in range(2)]
    store.put_episodes(second_call)
    store.put_episodes(first_call)  # stored in any order

    assert ids_of(store.session_episodes(A, "acme", "chat-1", session_position(second_call[1]), 10)) == [
        "b0",
        "a2",
        "a1",
        "a0",
    ]
    assert ids_of(store.session_episodes(A, "acme", "chat-1", session_position(first_call[1]), 10)) == ["a0"]
    assert store.session_episodes(A, "acme", "chat-1", session_position(first_call[0]), 10) == []
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(T0 + timedelta(minutes=1)), 2)) == [
        "b1",
        "b0",
    ]


def test_session_episodes_keep_to_their_tenant_scope_and_session(store: RecordStore) -> None:
    store.put_episodes([turn("mine", 0), turn("no-session", 1, session=None), turn("other-chat", 2, session="chat-2")])
    store.put_episodes([turn("other-scope", 3, scope_id="globex"), turn("same-minute", 5)])
    store.put_episodes([turn("other-tenant", 4, tenant=B)])

    found = store.session_episodes(A, "acme", "chat-1", said_before(T0 + timedelta(minutes=5)), 10)

    assert ids_of(found) == ["mine"]
    assert store.session_episodes(B, "acme", "chat-1", said_before(T0 + timedelta(minutes=9)), 10)[0].tenant == B
    assert ids_of(store.session_episodes(A, "globex", "chat-1", said_before(T0 + timedelta(minutes=9)), 10)) == [
        "other-scope"
    ]


def test_erased_turns_leave_their_session(store: RecordStore) -> None:
    store.create_scope(scope("acme", None, "acme"))
    store.put_episodes([turn("t0", 0), turn("t1", 1)])

    store.erase_scopes(A, ["acme"], dry_run=False)

    assert store.session_episodes(A, "acme", "chat-1", said_before(T0 + timedelta(minutes=9)), 10) == []


def test_backfill_sessions_gives_turns_written_before_the_session_index_back_to_their_session(
    store: RecordStore,
) -> None:
    store.put_episodes([turn("t0", 0), turn("t1", 1), turn("t2", 2), turn("quiet", 3, session=None)])
    store.put_episodes([turn("theirs", 0, tenant=B)])
    forget_sessions(store, A, ["t0", "t1"])
    forget_sessions(store, B, ["theirs"])
    stored = store.get_episodes(A, ["t0", "t1", "t2", "quiet"])
    later = T0 + timedelta(minutes=9)
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(later), 10)) == ["t2"]

    assert store.backfill_sessions(A) == 2

    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(later), 10)) == ["t2", "t1", "t0"]
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(T0 + timedelta(minutes=2)), 1)) == ["t1"]
    assert store.get_episodes(A, ["t0", "t1", "t2", "quiet"]) == stored  # the records themselves unchanged
    assert store.backfill_sessions(A) == 0  # idempotent
    assert store.session_episodes(B, "acme", "chat-1", said_before(later), 10) == []  # another tenant's are its own
    assert store.backfill_sessions(B) == 1
    assert ids_of(store.session_episodes(B, "acme", "chat-1", said_before(later), 10)) == ["theirs"]
    assert store.backfill_sessions("nobody") == 0


def test_iter_episodes_pages_through_every_episode_of_the_tenant(store: RecordStore) -> None:
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(5)])
    store.put_episodes([episode("other", tenant=B)])

    pages = list(store.iter_episodes(A, batch=2))

    assert all(1 <= len(page) <= 2 for page in pages)
    assert sorted(e.episode_id for page in pages for e in page) == [f"e{n}" for n in range(5)]
    assert list(store.iter_episodes("nobody")) == []


def test_delivered_ids_accumulate_per_principal_and_session(store: RecordStore) -> None:
    assert store.get_delivered(A, "bot", "s1") == set()

    store.add_delivered(A, "bot", "s1", ["m1", "e2"])
    store.add_delivered(A, "bot", "s1", ["e2", "e3", "e3"])
    store.add_delivered(A, "bot", "s1", [])

    assert store.get_delivered(A, "bot", "s1") == {"m1", "e2", "e3"}
    assert store.get_delivered(A, "bot", "s2") == set()
    assert store.get_delivered(A, "other-bot", "s1") == set()
    assert store.get_delivered(B, "bot", "s1") == set()


# -- consolidation --------------------------------------------------------------------------
def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def test_dirty_scopes_are_listed_oldest_mark_first_and_cleared_unless_refreshed(store: RecordStore) -> None:
    store.mark_dirty(A, ["s1"], minutes(1))
    store.mark_dirty(A, ["s2", "s2"], minutes(2))
    store.mark_dirty(B, ["s3"], minutes(3))
    store.mark_dirty(A, ["s4"], minutes(4))

    assert store.list_dirty(A, 10) == [(A, "s1"), (A, "s2"), (A, "s4")]
    assert store.list_dirty(A, 2) == [(A, "s1"), (A, "s2")]
    assert store.list_dirty(None, 10) == [(A, "s1"), (A, "s2"), (B, "s3"), (A, "s4")]
    assert store.list_dirty(None, 1) == [(A, "s1")]

    store.mark_dirty(A, ["s1"], minutes(6))  # a write during a run refreshes the mark
    store.clear_dirty(A, "s1", minutes(5))  # ... so the run that started at 5 leaves it
    store.clear_dirty(A, "s2", minutes(5))
    store.clear_dirty(A, "never-marked", minutes(5))
    store.clear_dirty(B, "s4", minutes(9))  # another tenant's scope of that id is untouched

    assert store.list_dirty(A, 10) == [(A, "s4"), (A, "s1")]
    store.clear_dirty(A, "s1", minutes(6))  # at or after the mark: cleared
    assert store.list_dirty(A, 10) == [(A, "s4")]
    assert store.list_dirty(B, 10) == [(B, "s3")]


def test_episodes_after_a_checkpoint_are_read_in_order_up_to_before(store: RecordStore) -> None:
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(6)])
    store.put_episodes([episode("x2", minute=1), episode("x1", minute=1)])  # same created_at: id order
    store.put_episodes([episode("elsewhere", minute=1, scope_id="other")])
    store.put_episodes([episode("theirs", minute=1, tenant=B)])

    def read(after: tuple[datetime | None, str], before: float, limit: int = 100) -> list[str]:
        return ids_of(store.list_episodes_after(A, "acme", after, minutes(before), limit))

    assert read((None, ""), 4) == ["e0", "e1", "x1", "x2", "e2", "e3"]
    assert read((None, ""), 4, limit=2) == ["e0", "e1"]
    assert read((minutes(1), "e1"), 4) == ["x1", "x2", "e2", "e3"]
    assert read((minutes(1), "x1"), 4, limit=2) == ["x2", "e2"]
    assert read((minutes(3), "e3"), 4) == []
    assert read((minutes(5), "e5"), 4) == []
    assert read((None, ""), 0) == []


def test_checkpoints_advance_only_from_the_expected_version(store: RecordStore) -> None:
    assert store.get_checkpoint(A, "s1") == Checkpoint(tenant=A, scope_id="s1")
    first = Checkpoint(
        tenant=A, scope_id="s1", after_created_at=minutes(1), after_episode_id="e1", version=1, processed=1
    )

    store.save_checkpoint(first, expected_version=0)
    with pytest.raises(Conflict):
        store.save_checkpoint(first.model_copy(update={"after_episode_id": "other"}), expected_version=0)
    set_aside = [{"scope_id": "s1", "stage": "extract", "reason": "ungrounded", "episode_ids": ["e2"], "episodes": 1,
                  "run_id": "run_1"}]  # fmt: skip
    second = first.model_copy(
        update={
            "after_created_at": minutes(2),
            "after_episode_id": "e2",
            "version": 2,
            "held": 2,
            "set_aside": set_aside,
            "returned": [{**set_aside[0], "outcome": "set aside again", "attempts": 2}],
            "waiting": [Waiting(episode_ids=["e2", "e3"], reason="ungrounded", attempts=2, due=minutes(240))],
        }
    )  # the runs that held it, the windows set aside (and waiting to come back) when it moved are kept with it
    store.save_checkpoint(second, expected_version=1)
    with pytest.raises(Conflict):
        store.save_checkpoint(second.model_copy(update={"version": 3, "processed": 99}), expected_version=1)

    assert store.get_checkpoint(A, "s1") == second
    assert store.get_checkpoint(B, "s1") == Checkpoint(tenant=B, scope_id="s1")


def test_a_lease_is_held_until_it_expires_or_its_owner_releases_it(store: RecordStore) -> None:
    minute = timedelta(minutes=1)

    assert store.acquire_lease(A, "s1", "w1", minutes(0), minute) is True
    assert store.acquire_lease(A, "s1", "w2", minutes(0.5), minute) is False
    assert store.acquire_lease(A, "s1", "w1", minutes(0.5), minute) is True  # renewed to 1.5
    assert store.acquire_lease(A, "s1", "w2", minutes(1), minute) is False
    assert store.acquire_lease(B, "s1", "w2", minutes(1), minute) is True  # another tenant's scope
    assert store.acquire_lease(A, "s1", "w2", minutes(1.5), minute) is True  # expired: taken over

    store.release_lease(A, "s1", "w1")  # not the owner any more: no effect
    assert store.acquire_lease(A, "s1", "w1", minutes(2), minute) is False
    store.release_lease(A, "s1", "w2")
    assert store.acquire_lease(A, "s1", "w1", minutes(2), minute) is True
    store.save_checkpoint(Checkpoint(tenant=A, scope_id="s1", version=1), expected_version=0)  # lease kept apart
    assert store.acquire_lease(A, "s1", "w3", minutes(2.5), minute) is False


def test_facts_and_contradictions_round_trip_upsert_and_list(store: RecordStore) -> None:
    f1 = fact(
        "f1",
        entity="acme",
        property="vat",
        value="flat",
        valid_until=minutes(9),
        vector=[0.25, float(np.float32(1 / 3))],  # float32, as embedders give it
        model_id="m@2",
        confidence=0.1 + 0.2,
        tier="daily",
        stale=True,
        changed_by="ep_later",  # the later episode that changed its subject
        changed_at=minutes(5),
    )
    f2, f3 = fact("f2", scope_id="s2"), fact("f3")
    c1 = contradiction("c1")

    store.put_facts([f3, f1, f2], [c1])

    assert store.get_facts(A, ["f1", "f3", "missing", "f1"]) == {"f1": f1, "f3": f3}
    assert [f.fact_id for f in store.list_facts(A)] == ["f1", "f2", "f3"]
    assert store.list_facts(A, "s1") == [f1, f3]
    assert contradictions(store, A, "s1") == [c1]
    assert contradictions(store, A, "s2") == []

    superseded = f1.model_copy(update={"status": "superseded", "superseded_by": "f4", "updated_at": minutes(3)})
    store.put_facts([superseded], [c1.model_copy(update={"resolution": "unresolved"}), contradiction("c0")])

    assert store.get_facts(A, ["f1"]) == {"f1": superseded}
    assert store.list_facts(A, "s1") == [superseded, f3]
    assert contradictions(store, A, "s1") == [contradiction("c0"), c1]  # c1 is added once, never rewritten
    assert store.get_facts(B, ["f1"]) == {} and store.list_facts(B) == [] and contradictions(store, B, "s1") == []


def test_many_facts_are_all_stored(store: RecordStore) -> None:
    facts = [fact(f"f{n:03d}", scope_id=f"s{n % 3}") for n in range(130)]

    store.put_facts(facts)

    assert len(store.get_facts(A, [f.fact_id for f in facts])) == 130
    assert [f.fact_id for f in store.list_facts(A)] == [f.fact_id for f in facts]
    assert len(store.list_facts(A, "s0")) == 44


def test_runs_round_trip_and_are_replaced(store: RecordStore) -> None:
    run = Run(tenant=A, run_id="run1", started_at=T0, requested_by="ada", scopes=["root.acme"])
    store.put_run(run)
    assert store.get_run(A, "run1") == run

    error = {"code": "grounding", "score": 0.5, "ids": ["e1"], "none": None}
    stages = {"collect": StageReport(counters={"episodes_read": 3}), "extract": StageReport(errors=[error])}
    finished = run.model_copy(update={"status": "partial", "stages": stages, "finished_at": minutes(2)})
    store.put_run(finished)

    assert store.get_run(A, "run1") == finished
    assert store.get_run(A, "missing") is None
    assert store.get_run(B, "run1") is None

    later = Run(tenant=A, run_id="run0", started_at=minutes(5), requested_by="ada")
    store.put_run(later)
    assert store.list_runs(A, 10) == [later, finished]
    assert store.list_runs(A, 1) == [later]
    assert store.list_runs(B, 10) == []


def test_list_runs_is_newest_first_by_start_then_run_id_within_the_limit(store: RecordStore) -> None:
    ids = [f"run_{(n * 7919) % 1000:03x}" for n in range(25)]  # random-looking: not in start order
    runs = [Run(tenant=A, run_id=run_id, started_at=minutes(n % 7), requested_by="ada") for n, run_id in enumerate(ids)]
    for run in runs:
        store.put_run(run)
    store.put_run(Run(tenant=B, run_id="run_b", started_at=minutes(9), requested_by="bo"))
    newest_first = sorted(runs, key=lambda run: (run.started_at, run.run_id), reverse=True)

    assert store.list_runs(A, 100) == newest_first
    assert store.list_runs(A, 5) == newest_first[:5]  # ties on started_at broken by run_id
    assert store.list_runs(A, 1) == newest_first[:1]
    assert store.list_runs(A, 0) == []
    assert [run.run_id for run in store.list_runs(B, 100)] == ["run_b"]
    assert store.backfill_runs(A) == 0


# -- API keys -------------------------------------------------------------------------------
def test_api_keys_round_trip_list_and_revoke(store: RecordStore) -> None:
    assert store.get_api_key("hash-none") is None
    assert store.list_api_keys(A) == []
    second, first = api_key("k2"), api_key("k1", roles=[Role.admin])
    store.put_api_key(second)
    store.put_api_key(first)

    assert store.get_api_key("hash-tenant-a-k1") == first
    assert store.list_api_keys(A) == [first, second]

    revoked_at = T0 + timedelta(days=3)
    assert store.revoke_api_key(A, "k1", revoked_at) is True
    assert store.revoke_api_key(A, "nope", revoked_at) is False

    revoked = first.model_copy(update={"revoked_at": revoked_at})
    assert store.get_api_key("hash-tenant-a-k1") == revoked
    assert store.list_api_keys(A) == [revoked, second]


# -- review --------------------------------------------------------------------------------
def test_revisions_round_trip_and_upsert_by_memory_and_author(store: RecordStore) -> None:
    assert store.get_revision(A, "m1", "bob") is None
    changes = {"body": "v2", "tags": ["a", "b"], "confidence": 1.0, "summary": None, "deep": {"x": [1, 2.5]}}
    first = revision("m1", "bob", changes=changes, base_version=3)

    store.put_revision(first)

    got = store.get_revision(A, "m1", "bob")
    assert got == first
    assert got is not None and isinstance(got.changes["confidence"], float)
    updated = first.model_copy(update={"changes": {"body": "v3"}, "updated_at": minutes(5)})
    store.put_revision(updated)
    assert store.get_revision(A, "m1", "bob") == updated
    assert store.list_revisions(A, status=None) == [updated]  # one revision per author per memory
    assert store.get_revision(A, "m1", "amy") is None and store.get_revision(A, "m2", "bob") is None


def test_a_revision_changing_status_leaves_the_lists_of_its_old_status(store: RecordStore) -> None:
    opened = revision("m1", "bob")
    store.put_revision(opened)
    rejected = opened.model_copy(update={"status": "rejected", "reason": "no", "decided_by": "carol"})

    store.put_revision(rejected)

    assert store.get_revision(A, "m1", "bob") == rejected
    assert store.list_revisions(A) == []
    assert store.list_revisions(A, author="bob") == []
    assert store.list_revisions(A, memory_id="m1") == []
    assert store.list_revisions(A, status="rejected") == [rejected]
    assert store.list_revisions(A, author="bob", status=None) == [rejected]

    reopened = rejected.model_copy(update={"status": "open", "reason": None, "decided_by": None})
    store.put_revision(reopened)

    assert store.list_revisions(A) == [reopened]
    assert store.list_revisions(A, author="bob") == [reopened]
    assert store.list_revisions(A, memory_id="m1", author="bob") == [reopened]
    assert store.list_revisions(A, status="rejected") == []
    assert store.list_revisions(A, author="bob", status="rejected") == []


def test_list_revisions_filters_by_memory_author_and_status_ordered_by_memory_then_author(
    store: RecordStore,
) -> None:
    specs = [
        ("m2", "bob", "open"),
        ("m1", "zed", "open"),
        ("m1", "amy", "approved"),
        ("m1", "bob", "open"),
        ("m10", "amy", "rejected"),
        ("m2", "amy", "open"),
        ("m1", "bot#1", "open"),
        ("m1", "bot", "open"),
    ]
    for memory_id, author, status in specs:
        store.put_revision(revision(memory_id, author, status=status))

    def listed(**filters: Any) -> list[tuple[str, str]]:
        return [(r.memory_id, r.author) for r in store.list_revisions(A, **filters)]

    assert listed() == [("m1", "bob"), ("m1", "bot"), ("m1", "bot#1"), ("m1", "zed"), ("m2", "amy"), ("m2", "bob")]
    assert listed(status=None) == [
        ("m1", "amy"),
        ("m1", "bob"),
        ("m1", "bot"),
        ("m1", "bot#1"),
        ("m1", "zed"),
        ("m10", "amy"),
        ("m2", "amy"),
        ("m2", "bob"),
    ]
    assert listed(memory_id="m1") == [("m1", "bob"), ("m1", "bot"), ("m1", "bot#1"), ("m1", "zed")]  # not m10's
    assert listed(memory_id="m1", status=None)[0] == ("m1", "amy")
    assert listed(memory_id="m10") == [] and listed(memory_id="m10", status="rejected") == [("m10", "amy")]
    assert listed(author="amy") == [("m2", "amy")]
    assert listed(author="amy", status=None) == [("m1", "amy"), ("m10", "amy"), ("m2", "amy")]
    assert listed(author="bot") == [("m1", "bot")]  # not bot#1's
    assert listed(memory_id="m1", author="amy") == []
    assert listed(memory_id="m1", author="amy", status="approved") == [("m1", "amy")]
    assert listed(memory_id="m1", author="amy", status=None) == [("m1", "amy")]
    assert listed(status="approved") == [("m1", "amy")]
    assert listed(status="rejected") == [("m10", "amy")]
    assert listed(memory_id="nope", status=None) == [] and listed(author="nobody", status=None) == []
    assert listed(status="no-such-status") == []


def test_history_is_append_only_and_listed_in_append_order_per_memory(store: RecordStore) -> None:
    assert store.list_history(A, "m1") == []
    created = history("m1", 1, "created", status="pending", at=minutes(0))
    approved = history("m1", 1, "approved", approved_by="carol", at=minutes(0))  # the same instant
    other = history("m10", 1, "created")
    changes = {"body": ["v1", "v2"], "confidence": [None, 1.0]}
    edited = history("m1", 2, "edited", changes=changes, reason="typo", at=minutes(-5))  # earlier `at`, appended later

    for entry in (created, approved, other, edited, edited):
        store.add_history(entry)

    assert store.list_history(A, "m1") == [created, approved, edited, edited]  # nothing is merged or rewritten
    assert store.list_history(A, "m10") == [other]
    assert store.list_history(A, "m1")[2].changes == {"body": ["v1", "v2"], "confidence": [None, 1.0]}
    assert isinstance(store.list_history(A, "m1")[2].changes["confidence"][1], float)


def test_review_records_are_tenant_isolated(store: RecordStore) -> None:
    mine = revision("m1", "bob")
    store.put_revision(mine)
    store.add_history(history("m1", 1, "created"))

    assert store.get_revision(B, "m1", "bob") is None
    assert store.list_revisions(B, status=None) == []
    assert store.list_revisions(B, memory_id="m1", status=None) == []
    assert store.list_revisions(B, author="bob", status=None) == []
    assert store.list_history(B, "m1") == []

    theirs = revision("m1", "bob", tenant=B, status="approved")
    store.put_revision(theirs)
    store.add_history(history("m1", 1, "edited", tenant=B))

    assert store.get_revision(A, "m1", "bob") == mine
    assert store.list_revisions(A) == [mine] and store.list_revisions(B) == []
    assert store.list_revisions(B, status="approved") == [theirs]
    assert [entry.action for entry in store.list_history(A, "m1")] == ["created"]
    assert [entry.action for entry in store.list_history(B, "m1")] == ["edited"]


# -- change feed ----------------------------------------------------------------------------
def changes(store: RecordStore, tenant: str = A) -> list[tuple[str, str, str]]:
    return store.list_changes(tenant, None, 10_000)


def feed(store: RecordStore, tenant: str = A) -> list[tuple[str, str]]:
    return [(kind, record_id) for _, kind, record_id in changes(store, tenant)]


def test_every_record_write_reaches_the_feed_once_at_its_latest_change(store: RecordStore) -> None:
    tree(store)
    memory = scoped("m1", "acme", "k")
    store.create_memory(memory)
    store.put_episodes([episode("e1"), episode("e2", minute=1)])
    store.put_facts([fact("f1")], [contradiction("c1")])
    store.create_memory(scoped("m2", "acme", "k2"))

    assert feed(store) == [
        ("scope", "r"),
        ("scope", "acme"),
        ("memory", "m1"),
        ("episode", "e1"),
        ("episode", "e2"),
        ("fact", "f1"),
        ("memory", "m2"),
    ]

    store.rename_scope(A, "r", "root-2", T0)
    store.update_memory(memory.model_copy(update={"body": "v2", "version": 2}), expected_version=1)
    store.put_facts([fact("f1", summary="reinforced")])
    store.put_episodes([episode("e1")])  # a retry writes nothing, so changes nothing
    store.mark_indexed(A, ["e2"])  # bookkeeping, not a change of the record
    store.put_layers(A, {1: "clients"})  # not a feed record, nor are the ones below
    store.put_revision(revision("m2", "bob"))
    store.add_history(history("m2", 1, "created"))
    store.mark_dirty(A, ["acme"], T0)
    store.put_run(Run(tenant=A, run_id="run1", started_at=T0, requested_by="ada"))
    store.put_api_key(api_key("k1"))
    store.add_delivered(A, "bot", "s1", ["m1"])

    assert feed(store) == [
        ("scope", "acme"),
        ("episode", "e1"),
        ("episode", "e2"),
        ("memory", "m2"),
        ("scope", "r"),
        ("memory", "m1"),
        ("fact", "f1"),
    ]


def test_a_failed_write_leaves_the_feed_as_it_was(store: RecordStore) -> None:
    root, _ = tree(store)
    store.create_scope(scope("other", root, "other"))
    store.create_memory(scoped("m1", "acme", "k"))
    store.put_episodes([episode("e1")])
    before = changes(store)

    with pytest.raises(Conflict):
        store.create_scope(scope("x", root, "acme"))
    with pytest.raises(Conflict):
        store.rename_scope(A, "acme", "other", T0)
    with pytest.raises(Conflict):
        store.create_memory(scoped("m2", "acme", "k"))
    with pytest.raises(Conflict):
        store.update_memory(scoped("m1", "acme", "k", body="stale", version=3), expected_version=2)
    with pytest.raises(Conflict):
        store.put_episodes([episode("e2"), episode("e1", content_hash="another")])

    assert changes(store) == before


def test_feed_positions_are_fixed_width_utc_text_strictly_increasing_across_writes(store: RecordStore) -> None:
    root, _ = tree(store)
    store.create_memory(scoped("m1", "acme", "k"))
    store.put_episodes([episode("e1")])
    store.put_facts([fact("f1")])
    store.create_scope(scope("b", root, "b"))
    store.put_episodes([episode("e2"), episode("e0")])  # one batch: position order, then id order

    rows = changes(store)
    positions = [position for position, _, _ in rows]

    assert [record_id for _, _, record_id in rows][:6] == ["r", "acme", "m1", "e1", "f1", "b"]
    assert positions[:6] == sorted(set(positions[:6]))  # one write after another: strictly later
    assert [(p, i) for p, _, i in rows] == sorted((p, i) for p, _, i in rows)
    assert len({(p, i) for p, _, i in rows}) == len(rows) == 8
    for position in positions:
        parsed = datetime.strptime(position, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert len(position) == 27 and abs(parsed - datetime.now(UTC)) < timedelta(minutes=5)


def test_paging_after_any_cursor_resumes_exactly(store: RecordStore) -> None:
    tree(store)
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(5)])  # (the embedded store: one position)
    for n in range(3):
        store.create_memory(scoped(f"m{n}", "acme", f"k{n}"))
    store.put_facts([fact("f2"), fact("f1")])
    store.rename_scope(A, "acme", "acme-ltd", T0)
    everything = changes(store)
    assert len(everything) == 12

    for limit in (1, 2, 5, 100):
        seen: list[tuple[str, str, str]] = []
        after: tuple[str, str] | None = None
        while page := store.list_changes(A, after, limit):
            assert len(page) <= limit
            seen += page
            after = (page[-1][0], page[-1][2])
        assert seen == everything
    for index, (position, _, record_id) in enumerate(everything):
        assert store.list_changes(A, (position, record_id), 100) == everything[index + 1 :]
        assert store.list_changes(A, (position, record_id), 2) == everything[index + 1 : index + 3]
        assert store.list_changes(A, (position, ""), 100) == [r for r in everything if r[0] >= position]
    assert store.list_changes(A, None, 0) == []
    assert store.list_changes(A, ("9999-12-31T23:59:59.999999Z", "z"), 10) == []

    last = (everything[-1][0], everything[-1][2])
    store.update_memory(scoped("m0", "acme", "k0", body="v2", version=2), expected_version=1)
    store.put_episodes([episode("late")])
    later = store.list_changes(A, last, 100)
    assert [(kind, i) for _, kind, i in later] == [("memory", "m0"), ("episode", "late")]
    assert all((p, i) > last for p, _, i in later)


def test_feeds_are_per_tenant(store: RecordStore) -> None:
    tree(store, A)
    tree(store, B)
    store.create_memory(scoped("m1", "acme", "k", tenant=B))
    store.put_episodes([episode("e1", tenant=B), episode("e1")])
    store.put_facts([fact("f1", tenant=B), fact("f2")])  # one call, two tenants

    assert feed(store, A) == [("scope", "r"), ("scope", "acme"), ("episode", "e1"), ("fact", "f2")]
    assert feed(store, B) == [("scope", "r"), ("scope", "acme"), ("memory", "m1"), ("episode", "e1"), ("fact", "f1")]
    store.rename_scope(B, "r", "moved", T0)  # moving B's record leaves A's record of the same id in place
    assert feed(store, A)[0] == ("scope", "r") and feed(store, B)[-1] == ("scope", "r")
    assert store.list_changes("nobody", None, 10) == []


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_big_batches_reach_the_feed_whole(store: RecordStore) -> None:
    store.put_episodes([episode(f"e{n:03d}", minute=n) for n in range(120)])
    store.put_facts([fact(f"f{n:03d}") for n in range(60)], [contradiction(f"c{n:02d}") for n in range(90)])
    store.put_facts([fact(f"f{n:03d}", summary="again") for n in range(60)])  # every fact moves: 4 items each

    listed = feed(store)

    assert listed == [("episode", f"e{n:03d}") for n in range(120)] + [("fact", f"f{n:03d}") for n in range(60)]
    assert len(contradictions(store, A, "s1")) == 90
    assert {f.summary for f in store.list_facts(A)} == {"again"}


# -- tenant isolation -----------------------------------------------------------------------
def test_tenant_b_sees_and_touches_nothing_of_tenant_a(store: RecordStore) -> None:
    tree(store, A)
    store.rename_scope(A, "acme", "acme-ltd", T0)
    store.put_layers(A, {1: "clients"})
    store.create_memory(scoped("m1", "acme", "k"))
    store.create_memory(tagged("t1", "clients", None, "k"))
    store.create_memory(tagged("t2", "clients", "acme", "k"))
    store.put_api_key(api_key("k1", A))
    store.put_episodes([episode("e1")])
    store.add_delivered(A, "bot", "s1", ["m1"])

    assert store.get_scope(B, "r") is None
    assert store.find_child(B, None, "root") is None
    assert store.find_child(B, "r", "acme-ltd") is None
    assert store.find_alias(B, "r", "acme") is None
    assert store.list_children(B, "r") == []
    assert store.get_layers(B) == {}
    assert store.get_memory(B, "m1") is None
    assert store.list_scoped_memories(B, "acme") == []
    assert store.list_tagged_memories(B, "clients", None) == []
    assert store.list_tagged_memories(B, "clients", "acme") == []
    assert store.list_api_keys(B) == []
    assert store.list_memories(B) == []
    assert store.get_episodes(B, ["e1"]) == {}
    assert store.list_recent_episodes(B, T0, 10) == []
    assert list(store.iter_episodes(B)) == []
    assert store.get_delivered(B, "bot", "s1") == set()
    assert store.revoke_api_key(B, "k1", T0) is False
    with pytest.raises(Conflict):
        store.rename_scope(B, "acme", "stolen", T0)
    with pytest.raises(Conflict):
        store.update_memory(scoped("m1", "acme", "k", tenant=B, body="stolen", version=2), expected_version=1)

    # Tenant A is untouched, and B may use the same ids, names and keys for itself.
    assert store.get_api_key("hash-tenant-a-k1") == api_key("k1", A)
    assert store.get_scope(A, "acme").segment == "acme-ltd"  # type: ignore[union-attr]
    assert store.get_memory(A, "m1") == scoped("m1", "acme", "k")
    tree(store, B)
    store.create_memory(scoped("m1", "acme", "k", tenant=B))
    store.create_memory(tagged("t1", "clients", None, "k", tenant=B))
    store.put_layers(B, {1: "customers"})
    assert store.find_child(B, "r", "acme") is not None
    assert store.get_layers(A) == {1: "clients"}
    assert ids(store.list_scoped_memories(A, "acme")) == ["m1"]
    assert store.list_scoped_memories(A, "acme")[0].tenant == A


# -- DynamoDB only --------------------------------------------------------------------------
def _count_queries(client: Any) -> list[int]:
    calls: list[int] = []
    client.meta.events.register("after-call.dynamodb.Query", lambda **_: calls.append(1))
    return calls


def test_dynamodb_follows_every_page(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, page_size=4)
    root, _ = tree(store)
    for n in range(9):
        store.create_scope(scope(f"s{n}", root, f"seg-{8 - n}"))
        store.create_memory(scoped(f"m{n}", "acme", f"k{8 - n}"))
        store.create_memory(tagged(f"t{n}", "services", "vat", f"k{n}"))
        store.put_api_key(api_key(f"key{n}"))
    store.rename_scope(A, "s0", "renamed", T0)  # an alias among the slots: filtered out, page by page
    calls = _count_queries(aws)

    assert [s.segment for s in store.list_children(A, "r")][:3] == ["acme", "renamed", "seg-0"]
    assert len(store.list_children(A, "r")) == 10
    assert [m.key for m in store.list_scoped_memories(A, "acme")] == [f"k{n}" for n in range(9)]
    assert len(store.list_tagged_memories(A, "services", "vat")) == 9
    assert len(store.list_api_keys(A)) == 9
    assert len(calls) >= 5 * 3


def test_dynamodb_follows_every_page_of_episodes_facts_and_marks(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, page_size=3)
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(10)])
    store.put_episodes([episode(f"b{n}", minute=n, tenant=B) for n in range(4)])
    store.put_facts([fact(f"f{n}") for n in range(10)])
    for n in range(7):
        store.mark_dirty(A if n % 2 else B, [f"s{n}"], minutes(n))
    store.mark_indexed(A, ["e0", "e1", "e2", "e3", "e4"])  # a run of hits the sweep must page past
    calls = _count_queries(aws)

    assert ids_of(store.list_unindexed(6)) == ["b0", "b1", "b2", "b3", "e5", "e6"]
    assert ids_of(store.list_recent_episodes(A, minutes(2), 100)) == [f"e{n}" for n in range(9, 1, -1)]
    assert len(store.list_episodes_after(A, "acme", (minutes(1), "e1"), minutes(99), 100)) == 8
    assert [len(page) for page in store.iter_episodes(A, batch=4)] == [3, 3, 3, 1]
    assert len(store.list_facts(A)) == len(store.list_facts(A, "s1")) == 10
    assert [scope_id for _, scope_id in store.list_dirty(None, 100)] == [f"s{n}" for n in range(7)]
    assert len(store.list_dirty(A, 100)) == 3
    assert len(calls) >= 7 * 2


def test_dynamodb_throttling_becomes_store_unavailable() -> None:
    client = boto3.client("dynamodb", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    store = DynamoRecordStore(TABLE, client=client)
    with Stubber(client) as stub:
        stub.add_client_error("get_item", "ProvisionedThroughputExceededException", http_status_code=400)
        stub.add_client_error("query", "InternalServerError", http_status_code=500)
        stub.add_client_error("transact_write_items", "ThrottlingException", http_status_code=400)

        with pytest.raises(StoreUnavailable) as throttled:
            store.get_scope(A, "r")
        with pytest.raises(StoreUnavailable):
            store.list_children(A, "r")
        with pytest.raises(StoreUnavailable):
            store.create_scope(scope("r", None, "root"))

    assert isinstance(throttled.value.__cause__, ClientError)


def test_dynamodb_conflict_names_what_collided(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws)
    root, _ = tree(store)
    store.rename_scope(A, "acme", "acme-ltd", T0)
    store.create_memory(scoped("m1", "acme", "k"))

    with pytest.raises(Conflict, match="alias of scope acme") as on_alias:
        store.create_scope(scope("new", root, "acme"))
    with pytest.raises(Conflict, match="held by scope acme"):
        store.create_scope(scope("n2", root, "acme-ltd"))
    with pytest.raises(Conflict, match="held by memory m1"):
        store.create_memory(scoped("m2", "acme", "k"))

    assert on_alias.value.code == "scope_exists"
    assert isinstance(on_alias.value.__cause__, ClientError)


def test_dynamodb_items_are_tenant_prefixed_and_dates_are_utc_strings(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws)
    tree(store)
    store.rename_scope(A, "acme", "acme-ltd", T0)
    store.put_layers(A, {1: "clients"})
    store.create_memory(
        scoped("m1", "acme", "k", valid_until=datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    )
    store.put_api_key(api_key("k1"))
    store.put_episodes([episode("e1", metadata={"x": 1.0})])
    store.add_delivered(A, "bot#1", "s1", ["e1"])
    store.mark_dirty(A, ["acme"], T0)
    store.save_checkpoint(Checkpoint(tenant=A, scope_id="acme", version=1), expected_version=0)
    store.acquire_lease(A, "acme", "w1", T0, timedelta(minutes=1))
    store.put_facts([fact("f1")], [contradiction("c1")])
    store.put_run(Run(tenant=A, run_id="run1", started_at=T0, requested_by="ada"))
    store.put_revision(revision("m#1", "bot#1"))
    store.add_history(history("m1", 1, "created"))

    items = aws.scan(TableName=TABLE)["Items"]
    pks = sorted(item["PK"]["S"] for item in items)

    # scopes 6 (with the alias's back-reference), layers, memory 2, key 2, episode, delivered, consolidation 3,
    # facts 3, run, feed 5, review 4
    assert len(items) == 29
    assert [pk for pk in pks if not pk.startswith(f"T#{A}#")] == ["APIKEY#hash-tenant-a-k1"]
    assert f"T#{A}#DELIVERED#bot%231#s1" in pks  # a principal's "#" cannot reach into another key
    assert f"T#{A}#AUTHREVS#bot%231#open" in pks  # nor can an author's
    assert {item["SK"]["S"] for item in items if item["PK"]["S"] == f"T#{A}#REVQ#open"} == {"M#m%231#bot#1"}
    entries = [item for item in items if item["PK"]["S"] == f"T#{A}#FEED"]
    assert sorted(item["id"]["S"] for item in entries) == ["acme", "e1", "f1", "m1", "r"]  # acme once, renamed
    for entry in entries:
        assert entry["SK"]["S"] == f"{entry['position']['S']}#{entry['id']['S']}"
        record = next(i for i in items if i.get("feed_position") == entry["position"] and i["item_type"]["S"] != "feed")
        assert record["item_type"]["S"] == entry["kind"]["S"]
    stored_episode = next(item for item in items if item["SK"]["S"] == "EP#e1")
    assert stored_episode["metadata"] == {"S": '{"x": 1.0}'}
    assert stored_episode["GSI1PK"]["S"].startswith("UNINDEXED#")  # the tenant's shard (R7)
    memory = next(item for item in items if item["SK"]["S"] == "MEM#m1")
    assert memory["valid_until"] == {"S": "2026-01-01T00:00:00.000000+00:00"}
    assert memory["created_at"] == {"S": "2025-03-01T09:30:15.123456+00:00"}


def test_dynamodb_store_creates_no_client_until_used(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("client created too early")

    monkeypatch.setattr(boto3, "client", refuse)

    DynamoRecordStore(TABLE, region_name="eu-west-1")


def test_create_table_uses_the_shared_schema(aws: Any) -> None:
    table = aws.describe_table(TableName=TABLE)["Table"]

    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == TABLE_SCHEMA["KeySchema"]
    indexes = [
        {name: index[name] for name in ("IndexName", "KeySchema", "Projection")}
        for index in table["GlobalSecondaryIndexes"]
    ]
    assert indexes == TABLE_SCHEMA["GlobalSecondaryIndexes"]


class FakeClock:
    """The adapter's injectable clock: stands still until moved."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


class HeldClient:
    """A DynamoDB client whose transactions are held back until `release`: a writer that took its feed
    position and has not committed yet."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.held: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        self.held.append(params)
        return {}

    def release(self) -> None:
        for params in self.held:
            self.client.transact_write_items(**params)
        self.held.clear()


class InterleavedClient:
    """A DynamoDB client that runs the next of `before` (another writer's work) just before each of its
    own `operation` calls: a concurrent write landing between this writer's read and its write."""

    def __init__(self, client: Any, before: list[Callable[[], Any]], operation: str = "transact_write_items") -> None:
        self.client, self.before, self.operation, self.calls = client, before, operation, 0

    def __getattr__(self, name: str) -> Any:
        if name != self.operation:
            return getattr(self.client, name)

        def interleaved(**params: Any) -> Any:
            if self.before:
                self.before.pop(0)()
            self.calls += 1
            return getattr(self.client, name)(**params)

        return interleaved


def _feed_items(aws: Any, tenant: str = A) -> list[dict[str, Any]]:
    items = aws.scan(TableName=TABLE)["Items"]
    return sorted((i for i in items if i["PK"]["S"] == f"T#{tenant}#FEED"), key=lambda i: i["SK"]["S"])


def test_dynamodb_feed_hides_changes_younger_than_the_horizon(aws: Any) -> None:
    clock = FakeClock(T0)
    store = DynamoRecordStore(TABLE, client=aws, now=clock)  # the default horizon: 5 s
    root = scope("r", None, "root")
    store.create_scope(root)

    assert store.list_changes(A, None, 10) == []
    clock.advance(4.999999)
    assert store.list_changes(A, None, 10) == []
    clock.advance(0.000001)
    first = store.list_changes(A, None, 10)
    assert first == [("2025-03-01T09:30:15.123456Z", "scope", "r")]

    store.create_scope(scope("acme", root, "acme"))  # written at T0 + 5 s
    clock.advance(4)
    assert store.list_changes(A, (first[0][0], "r"), 10) == []
    clock.advance(1)
    assert store.list_changes(A, (first[0][0], "r"), 10) == [("2025-03-01T09:30:20.123456Z", "scope", "acme")]

    wide = DynamoRecordStore(TABLE, client=aws, now=clock, feed_horizon_seconds=60)
    assert wide.list_changes(A, None, 10) == []
    clock.advance(55)
    assert [i for _, _, i in wide.list_changes(A, None, 10)] == ["r", "acme"]


def test_dynamodb_a_late_commit_lands_ahead_of_every_reader(aws: Any) -> None:
    # Writer A takes position t1 but commits late; writer B takes t2 > t1 and commits at once; a reader
    # pages meanwhile. With the horizon the reader cannot pass t1 before A commits, so it sees both, once.
    clock = FakeClock(T0 - timedelta(seconds=30))
    held = HeldClient(aws)
    writer_a = DynamoRecordStore(TABLE, client=held, now=clock)
    writer_b = DynamoRecordStore(TABLE, client=aws, now=clock)
    reader = DynamoRecordStore(TABLE, client=aws, now=clock)
    writer_b.create_scope(scope("early", None, "early"))  # settled long before

    clock.advance(30)
    writer_a.create_scope(scope("a", None, "a"))  # t1 = T0, not committed yet
    (t1,) = [p["Put"]["Item"]["position"]["S"] for p in held.held[0]["TransactItems"] if "position" in p["Put"]["Item"]]
    clock.advance(1)
    writer_b.create_scope(scope("b", None, "b"))  # t2 = T0 + 1 s, committed
    clock.advance(3)  # T0 + 4 s: A's transaction is still within the horizon of t1

    seen = reader.list_changes(A, None, 10)
    cursor = (seen[-1][0], seen[-1][2])
    assert [i for _, _, i in seen] == ["early"]  # b is committed, but not settled
    assert cursor < (t1, "a")  # the reader has not passed t1

    held.release()  # A commits at T0 + 4 s, within the horizon
    clock.advance(1.5)  # T0 + 5.5 s: t1 has settled, t2 not yet
    page = reader.list_changes(A, cursor, 10)
    seen += page
    assert [i for _, _, i in page] == ["a"]
    clock.advance(0.5)
    seen += reader.list_changes(A, (page[-1][0], page[-1][2]), 10)

    assert [(p, i) for p, _, i in seen] == [(seen[0][0], "early"), (t1, "a"), ("2025-03-01T09:30:16.123456Z", "b")]
    assert t1 == "2025-03-01T09:30:15.123456Z"


def test_dynamodb_without_a_horizon_a_late_commit_would_be_missed(aws: Any) -> None:
    # The same interleaving with no horizon: the reader passes t1 before A commits and never sees A.
    clock = FakeClock(T0)
    held = HeldClient(aws)
    writer_a = DynamoRecordStore(TABLE, client=held, now=clock, feed_horizon_seconds=0)
    reader = DynamoRecordStore(TABLE, client=aws, now=clock, feed_horizon_seconds=0)
    writer_a.create_scope(scope("a", None, "a"))
    clock.advance(1)
    reader.create_scope(scope("b", None, "b"))
    seen = reader.list_changes(A, None, 10)
    held.release()

    assert [i for _, _, i in seen] == ["b"]
    assert reader.list_changes(A, (seen[-1][0], "b"), 10) == []  # a, behind the cursor, is lost
    assert [i for _, _, i in reader.list_changes(A, None, 10)] == ["a", "b"]


def test_dynamodb_a_record_moved_concurrently_keeps_one_feed_entry(aws: Any) -> None:
    other = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    other.put_facts([fact("f1")])
    other.create_memory(scoped("m1", "acme", "k"))
    interleaved = InterleavedClient(aws, [lambda: other.put_facts([fact("f1", summary="theirs")])])
    store = DynamoRecordStore(TABLE, client=interleaved, feed_horizon_seconds=0)

    store.put_facts([fact("f1", summary="ours")])  # its first try fails on the moved entry; it reads again

    assert interleaved.calls == 2
    assert store.get_facts(A, ["f1"])["f1"].summary == "ours"
    assert [i["id"]["S"] for i in _feed_items(aws)] == ["m1", "f1"]

    # Two same-version updates of a memory: the version alone would let both through.
    same_version = scoped("m1", "acme", "k", body="theirs")
    interleaved.before.append(lambda: other.update_memory(same_version, expected_version=1))
    with pytest.raises(Conflict):
        store.update_memory(scoped("m1", "acme", "k", body="ours"), expected_version=1)

    assert store.get_memory(A, "m1") == same_version
    assert [i["id"]["S"] for i in _feed_items(aws)] == ["f1", "m1"]
    memory_item = aws.get_item(TableName=TABLE, Key={"PK": {"S": f"T#{A}#MEMS"}, "SK": {"S": "MEM#m1"}})["Item"]
    assert memory_item["feed_position"] == _feed_items(aws)[-1]["position"]


def test_dynamodb_an_episode_written_between_read_and_write_is_not_reported_as_ours(aws: Any) -> None:
    other = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    interleaved = InterleavedClient(aws, [lambda: other.put_episodes([episode("e1")])])
    store = DynamoRecordStore(TABLE, client=interleaved, feed_horizon_seconds=0)

    stored, written = store.put_episodes([episode("e1"), episode("e2", minute=1)])  # its first try loses the race

    assert interleaved.calls == 1  # the retry writes e2 alone: two PutItems, no transaction
    assert stored == [episode("e1"), episode("e2", minute=1)]
    assert written == {"e2"}


def test_dynamodb_one_episode_is_two_plain_puts_and_a_lost_race_leaves_one_feed_entry(aws: Any) -> None:
    """One new episode is written without a transaction (half the write units): its feed entry, then the
    episode on condition. A writer that loses the race deletes its entry again; a crash between the two
    leaves an entry the feed skips, and the episode is then listed where it was written."""
    other = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    interleaved = InterleavedClient(aws, [lambda: other.put_episodes([episode("e1")])], operation="put_item")
    store = DynamoRecordStore(TABLE, client=interleaved, feed_horizon_seconds=0)

    stored, written = store.put_episodes([episode("e1")])  # its episode Put loses the race

    assert (stored, written) == ([episode("e1")], set())
    assert [i["id"]["S"] for i in _feed_items(aws)] == ["e1"]
    assert [(kind, i) for _, kind, i in other.list_changes(A, None, 10)] == [("episode", "e1")]

    class Crash(Exception):
        pass

    def crash_on_the_episode(**params: Any) -> Any:
        if params["Item"]["SK"]["S"].startswith("EP#"):
            raise Crash
        return aws.put_item(**params)

    crashing = InterleavedClient(aws, [], operation="put_item")
    crashing.__dict__["put_item"] = crash_on_the_episode
    with pytest.raises(Crash):
        DynamoRecordStore(TABLE, client=crashing, feed_horizon_seconds=0).put_episodes([episode("e2", minute=1)])
    assert [i["id"]["S"] for i in _feed_items(aws)] == ["e1", "e2"]  # the entry, without its episode
    assert other.get_episodes(A, ["e2"]) == {}
    other.put_episodes([episode("e2", minute=1)])  # the retry
    assert [i for _, _, i in other.list_changes(A, None, 10)] == ["e1", "e2", "e2"]  # at least once


def test_dynamodb_history_appended_concurrently_keeps_both_entries_in_commit_order(aws: Any) -> None:
    other = DynamoRecordStore(TABLE, client=aws)
    other.add_history(history("m1", 1, "created"))
    theirs, ours = history("m1", 2, "edited", actor="them"), history("m1", 2, "edited", actor="us")
    interleaved = InterleavedClient(aws, [lambda: other.add_history(theirs)], operation="put_item")
    store = DynamoRecordStore(TABLE, client=interleaved)

    store.add_history(ours)  # its sequence number was taken meanwhile: it reads again and appends after

    assert interleaved.calls == 2
    assert [entry.actor for entry in store.list_history(A, "m1")] == ["ada", "them", "us"]


def test_dynamodb_backfill_never_recreates_an_erased_turn_nor_overwrites_a_concurrent_write(aws: Any) -> None:
    other = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    other.put_episodes([turn("t0", 0), turn("t1", 1), turn("t2", 2)])
    forget_sessions(other, A, ["t0", "t1", "t2"])
    moved = {"session": "chat-2", "pk": f"T#{A}#SESSION#chat-2", "sk": f"{(T0 + timedelta(minutes=1)).isoformat()}#t1"}

    def meanwhile() -> None:  # between the backfill's read and its write: t0 erased, t1 rewritten with its keys
        aws.delete_item(TableName=TABLE, Key={"PK": {"S": f"T#{A}#EPISODES"}, "SK": {"S": "EP#t0"}})
        aws.update_item(
            TableName=TABLE,
            Key={"PK": {"S": f"T#{A}#EPISODES"}, "SK": {"S": "EP#t1"}},
            UpdateExpression="SET session_id = :session, GSI4PK = :pk, GSI4SK = :sk",
            ExpressionAttributeValues={f":{name}": {"S": value} for name, value in moved.items()},
        )

    interleaved = InterleavedClient(aws, [meanwhile])
    store = DynamoRecordStore(TABLE, client=interleaved, feed_horizon_seconds=0)

    assert store.backfill_sessions(A) == 1  # its transaction is cancelled; then one update at a time

    assert interleaved.calls == 1
    assert store.get_episodes(A, ["t0"]) == {}  # not brought back by an update
    later = T0 + timedelta(minutes=9)
    assert ids_of(store.session_episodes(A, "acme", "chat-1", said_before(later), 10)) == ["t2"]
    assert ids_of(store.session_episodes(A, "acme", "chat-2", said_before(later), 10)) == [
        "t1"
    ]  # the other writer's keys
    assert store.backfill_sessions(A) == 0


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_backfill_reads_only_what_lacks_keys_and_writes_a_hundred_updates_a_transaction(aws: Any) -> None:
    sizes: list[int] = []
    aws.meta.events.register(
        "before-parameter-build.dynamodb.TransactWriteItems",
        lambda params, **_: sizes.append(len(params["TransactItems"])),
    )
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    turns = [turn(f"t{n:03d}", n) for n in range(140)]
    store.put_episodes([*turns, *(turn(f"q{n}", n, session=None) for n in range(5))])
    forget_sessions(store, A, [t.episode_id for t in turns[:130]])  # the last 10 kept their keys
    sizes.clear()
    calls = _count_queries(aws)

    assert store.backfill_sessions(A) == 130

    assert sizes == [100, 30] and len(calls) == 1
    found = store.session_episodes(A, "acme", "chat-1", said_before(T0 + timedelta(days=1)), 200)
    assert ids_of(found) == [t.episode_id for t in reversed(turns)]
    paged = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0, page_size=40)
    forget_sessions(paged, A, ["t000", "t139"])
    calls.clear()
    assert paged.backfill_sessions(A) == 2 and len(calls) == 4  # 145 episodes, 40 a page


def _queries(client: Any) -> list[dict[str, Any]]:
    """The parameters of every Query the client makes from now on."""
    made: list[dict[str, Any]] = []
    client.meta.events.register("before-parameter-build.dynamodb.Query", lambda params, **_: made.append(dict(params)))
    return made


def test_dynamodb_list_runs_reads_only_the_newest_runs(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws)
    runs = [
        Run(tenant=A, run_id=f"run_{(n * 37) % 100:02d}", started_at=minutes(n), requested_by="ada") for n in range(30)
    ]
    for run in runs:
        store.put_run(run)
    queries = _queries(aws)
    read: list[int] = []
    aws.meta.events.register(
        "before-parameter-build.dynamodb.BatchGetItem",
        lambda params, **_: read.extend(len(spec["Keys"]) for spec in params["RequestItems"].values()),
    )

    assert store.list_runs(A, 3) == runs[::-1][:3]

    assert [(q.get("IndexName"), q.get("Limit"), q.get("ScanIndexForward")) for q in queries] == [("GSI2", 3, False)]
    assert read == [3]


def test_dynamodb_runs_written_before_they_were_listed_by_start_are_listed_then_backfilled(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws)
    runs = [Run(tenant=A, run_id=f"run_{9 - n}", started_at=minutes(n), requested_by="ada") for n in range(6)]
    for run in runs:
        store.put_run(run)
    store.put_run(Run(tenant=B, run_id="run_0", started_at=T0, requested_by="bo"))
    for tenant, run_id in [(A, "run_9"), (A, "run_8"), (A, "run_7"), (B, "run_0")]:  # as stored before GSI2 listed runs
        aws.update_item(
            TableName=TABLE,
            Key={"PK": {"S": f"T#{tenant}#RUNS"}, "SK": {"S": f"RUN#{run_id}"}},
            UpdateExpression="REMOVE GSI2PK, GSI2SK",
        )

    assert store.list_runs(A, 10) == runs[::-1]  # still listed, in order (the partition is read)
    assert store.list_runs(A, 4) == runs[::-1][:4]

    assert store.backfill_runs(A) == 3
    assert store.backfill_runs(A) == 0
    queries = _queries(aws)
    assert store.list_runs(A, 6) == runs[::-1]
    assert [q.get("IndexName") for q in queries] == ["GSI2"]  # now all through the index
    assert store.get_run(A, "run_9") == runs[0]
    assert store.backfill_runs(B) == 1 and store.list_runs(B, 1)[0].run_id == "run_0"


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_transactions_stay_within_a_hundred_items_with_their_feed_entries(aws: Any) -> None:
    sizes: list[int] = []
    aws.meta.events.register(
        "before-parameter-build.dynamodb.TransactWriteItems",
        lambda params, **_: sizes.append(len(params["TransactItems"])),
    )
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)

    store.put_episodes([episode(f"e{n:03d}", minute=n) for n in range(120)])
    assert sizes == [100, 100, 40]
    sizes.clear()
    store.put_facts([fact(f"f{n:03d}") for n in range(60)], [contradiction(f"c{n:03d}") for n in range(150)])
    # 25 new facts (3 items each) a transaction; the last one takes as many contradictions as fit (at 4 items a
    # fact), then the rest go a hundred at a time
    assert sizes == [75, 75, 30 + 60, 90]
    sizes.clear()
    store.put_facts([fact(f"f{n:03d}") for n in range(30)])
    assert sizes == [100, 20]  # moved: 4 items each
    assert len(_feed_items(aws)) == 180


def test_dynamodb_follows_every_page_of_the_feed_and_review_records(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, page_size=2, feed_horizon_seconds=0)
    store.put_episodes([episode(f"e{n}", minute=n) for n in range(7)])
    for n in range(5):
        store.put_revision(revision(f"m{n}", "bob"))
        store.put_revision(revision("m0", f"author{n}", status="approved"))
        store.add_history(history("m0", n, "edited"))
    calls = _count_queries(aws)

    assert [i for _, _, i in store.list_changes(A, None, 100)] == [f"e{n}" for n in range(7)]
    assert [i for _, _, i in store.list_changes(A, None, 5)] == [f"e{n}" for n in range(5)]
    assert len(store.list_revisions(A)) == 5
    assert len(store.list_revisions(A, author="bob")) == 5
    assert len(store.list_revisions(A, memory_id="m0", status=None)) == 6
    assert [entry.version for entry in store.list_history(A, "m0")] == list(range(5))
    assert len(calls) >= 5 * 2


def legacy_draft(aws: Any) -> tuple[DynamoRecordStore, Memory]:
    """DynamoDB with wendy's pending draft of "k" in scope acme stored as drafts were when they held the key's
    published slot (`KEY#<key>`), before each author had a slot of its own."""
    from mneme.adapters.dynamo.codec import published_slot_key, to_item

    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    draft = scoped("m1", "acme", "k", status="pending", author="wendy")
    store.create_memory(draft)
    legacy = published_slot_key(draft)
    assert legacy is not None
    aws.delete_item(TableName=TABLE, Key={"PK": legacy["PK"], "SK": {"S": "KEY#k#PENDING#wendy"}})
    aws.put_item(TableName=TABLE, Item=to_item(draft, legacy, item_type="memory_slot"))  # as the old code wrote it
    return store, draft


def test_a_draft_written_before_per_author_slots_can_still_be_edited_and_published(aws: Any, tmp_path: Path) -> None:
    """DynamoDB: a pending draft stored when drafts held the key's published slot (`KEY#<key>`)."""
    store, draft = legacy_draft(aws)

    store.update_memory(draft.model_copy(update={"version": 2, "body": "edited"}), 1)
    published = draft.model_copy(update={"version": 3, "body": "edited", "status": "published"})
    store.update_memory(published, 2)

    assert store.list_scoped_memories(A, "acme") == [published]
    with pytest.raises(Conflict):
        store.create_memory(scoped("m2", "acme", "k", status="pending", author="oscar"))


def test_a_sqlite_draft_written_before_per_author_keys_is_given_its_authors_key_on_open(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "mneme.db"
    SqliteRecordStore(path).create_memory(scoped("m1", "acme", "k", status="pending", author="wendy"))
    with sqlite3.connect(path) as conn:  # as the old code wrote it: the key's published uniqueness key
        conn.execute("UPDATE memories SET uniq='scoped#acme#k' WHERE memory_id='m1'")

    store = SqliteRecordStore(path)
    store.create_memory(scoped("m2", "acme", "k", status="pending", author="oscar"))

    assert ids(store.list_scoped_memories(A, "acme")) == ["m1", "m2"]


# -- one memory by scope and key ------------------------------------------------------------------


def test_find_scoped_memories_gives_the_authors_draft_then_the_published_memory(store: RecordStore) -> None:
    # Given drafts of a key by two writers, then its published memory (an approver's, written beside them),
    # other keys, scopes and tenants, and an archived memory
    wendy, oscar = (scoped(f"d-{who}", "acme", "k", status="pending", author=who) for who in ("wendy", "oscar"))
    published = scoped("m1", "acme", "k", author="ada")
    for memory in (wendy, oscar, published, scoped("m2", "acme", "k2"), scoped("m3", "other", "k")):
        store.create_memory(memory)
    store.create_memory(scoped("m4", "acme", "k", B))
    gone = scoped("m5", "acme", "gone")
    store.create_memory(gone)
    store.update_memory(gone.model_copy(update={"status": "archived", "version": 2}), expected_version=1)

    # Then each author finds its own draft first, then the published memory; never another's draft
    assert store.find_scoped_memories(A, "acme", "k", "wendy") == [wendy, published]
    assert store.find_scoped_memories(A, "acme", "k", "oscar") == [oscar, published]
    assert store.find_scoped_memories(A, "acme", "k", "ada") == [published]
    assert ids(store.find_scoped_memories(B, "acme", "k", "ada")) == ["m4"]  # the tenant's own only
    assert store.find_scoped_memories(A, "acme", "gone", "ada") == []  # archived: never
    assert store.find_scoped_memories(A, "acme", "nothing", "ada") == []
    assert store.find_scoped_memories(A, "nowhere", "k", "ada") == []


def test_find_scoped_memories_follows_edits_moves_and_a_draft_alone(store: RecordStore) -> None:
    draft = scoped("d1", "acme", "new", status="pending", author="wendy")
    store.create_memory(draft)
    assert store.find_scoped_memories(A, "acme", "new", "wendy") == [draft]
    assert store.find_scoped_memories(A, "acme", "new", "ada") == []
    published = draft.model_copy(update={"status": "published", "version": 2, "body": "approved"})
    store.update_memory(published, expected_version=1)
    assert store.find_scoped_memories(A, "acme", "new", "wendy") == [published]
    moved = published.model_copy(update={"scope_id": "other", "version": 3})
    store.update_memory(moved, expected_version=2)
    assert store.find_scoped_memories(A, "acme", "new", "wendy") == []
    assert store.find_scoped_memories(A, "other", "new", "ada") == [moved]


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_finds_a_memory_by_key_in_one_read_of_its_slots(aws: Any) -> None:
    # Given a scope with many memories
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    for n in range(60):
        store.create_memory(scoped(f"m{n}", "big", f"k{n}"))
    calls: list[str] = []
    aws.meta.events.register("after-call.dynamodb", lambda model, **_: calls.append(model.name))

    # When one is found by key
    (found,) = store.find_scoped_memories(A, "big", "k42", "ada")

    # Then one read of its key's slots, no query or scan of the scope
    assert found.memory_id == "m42" and calls == ["BatchGetItem"]


def test_dynamodb_finds_a_draft_written_before_per_author_slots_for_its_author_alone(aws: Any) -> None:
    store, draft = legacy_draft(aws)

    assert store.find_scoped_memories(A, "acme", "k", "wendy") == [draft]
    assert store.find_scoped_memories(A, "acme", "k", "oscar") == []
