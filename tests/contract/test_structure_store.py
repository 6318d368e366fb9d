"""The RecordStore contract for aliases, erasure, structure drafts and publishing (SQLite and DynamoDB under
moto), and the DynamoDB publish journal: a publish interrupted after any step resumes to the same end state."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb import models as moto_dynamodb_models
from moto.dynamodb.models.table import Table as MotoTable
from pydantic import TypeAdapter

from mneme.adapters.dynamo import structure as dynamo_structure
from mneme.adapters.dynamo.store import DynamoRecordStore, create_table
from mneme.adapters.dynamo.structure import journal_steps
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import Conflict, ScopeNotFound
from mneme.ports import RecordStore
from mneme.records import Checkpoint
from mneme.services.curation.structure import StructureService
from mneme.services.scopes import ScopeService
from mneme.structure_models import Draft, Operation, Plan
from tests.conftest import FixedClock
from tests.contract.test_record_store import (
    T0,
    TABLE,
    A,
    B,
    contradiction,
    episode,
    fact,
    history,
    revision,
    scope,
    scoped,
    tagged,
)
from tests.support.legacy import forget_sessions
from tests.support.sessions import said_before
from tests.support.stored import contradictions

OTHER_TABLE = "mneme-contract-uninterrupted"
T1 = T0 + timedelta(hours=1)
OPS = TypeAdapter(list[Operation])


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


@pytest.fixture
def cheap_moto_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto deep-copies the whole table before every transaction item; skip that where none is cancelled."""
    real_deepcopy = copy.deepcopy

    def deepcopy(obj: Any, memo: Any = None) -> Any:
        return obj if isinstance(obj, MotoTable) else real_deepcopy(obj, memo)

    monkeypatch.setattr(moto_dynamodb_models, "copy", SimpleNamespace(deepcopy=deepcopy))


# -- a tenant's tree and its records -----------------------------------------------------------
def build(store: RecordStore, tenant: str = A) -> None:
    """root
    ├── clients (c) ── acme (ca) ── vat (cav)
    │              └── globex (cg)
    ├── prospects (p, first named "pros") ── initech (pi) ── notes (pin)
    ├── leads (l)
    └── archive (ar)"""
    root = scope("r", None, "root", tenant)
    store.create_scope(root)
    c, p = scope("c", root, "clients", tenant), scope("p", root, "pros", tenant)
    for node in (c, p, scope("l", root, "leads", tenant), scope("ar", root, "archive", tenant)):
        store.create_scope(node)
    store.rename_scope(tenant, "p", "prospects", T0)  # leaves the alias root.pros -> p
    ca, pi = scope("ca", c, "acme", tenant), scope("pi", p, "initech", tenant)
    for node in (ca, scope("cg", c, "globex", tenant), pi, scope("cav", ca, "vat", tenant)):
        store.create_scope(node)
    store.create_scope(scope("pin", pi, "notes", tenant))
    for memory_id, scope_id, key in (
        ("m-vat", "cav", "policy"),
        ("m-pros", "p", "pitch"),
        ("m-init", "pi", "intro"),
        ("m-note", "pin", "note"),
        ("m-arch", "ar", "old"),
    ):
        store.create_memory(scoped(memory_id, scope_id, key, tenant))
    store.create_memory(scoped("m-gone", "p", "pitch-v0", tenant, status="archived"))
    store.create_memory(tagged("t-vat", "services", "vat", "deadline", tenant))
    store.create_memory(tagged("t-all", "services", None, "style", tenant))
    store.put_episodes(
        [episode(f"e-{s}", minute=n, tenant=tenant, scope_id=s) for n, s in enumerate(("cav", "p", "pi", "pin", "ar"))]
    )
    store.put_facts(
        [fact(f"f-{s}", scope_id=s, tenant=tenant) for s in ("cav", "p", "pi", "ar")],
        [contradiction("x-pi", scope_id="pi", tenant=tenant)],
    )


def compiler(store: RecordStore) -> StructureService:
    clock = FixedClock(T0)
    return StructureService(store, clock, ScopeService(store, clock), indexer=cast(Any, None))


def draft_of(*ops: dict[str, Any], draft_id: str = "d1", tenant: str = A) -> Draft:
    return Draft(
        tenant=tenant, draft_id=draft_id, author="ada", operations=OPS.validate_python(list(ops)), created_at=T0
    )


def published(draft: Draft) -> Draft:
    return draft.model_copy(update={"status": "published", "published_at": T1, "published_by": "bob"})


def publish(store: RecordStore, *ops: dict[str, Any], draft_id: str = "d1") -> tuple[Plan, Draft]:
    draft = draft_of(*ops, draft_id=draft_id)
    plan, preview = compiler(store).compile(A, draft.operations)
    assert preview.conflicts == []
    store.put_draft(draft)
    store.apply_structure(A, plan, published(draft), T1)
    return plan, draft


def path_of(store: RecordStore, path: str) -> str:
    return ScopeService(store, FixedClock(T0)).resolve(A, path).path


def scope_at(store: RecordStore, tenant: str, path: str) -> str:
    return ScopeService(store, FixedClock(T0)).resolve(tenant, path).scope.scope_id


def changed(store: RecordStore, tenant: str = A) -> set[tuple[str, str]]:
    return {(kind, record_id) for _, kind, record_id in store.list_changes(tenant, None, 1000)}


# -- aliases ------------------------------------------------------------------------------------
def test_aliases_are_listed_by_segment_and_put_only_on_a_free_slot(store: RecordStore) -> None:
    build(store)

    assert store.list_aliases(A, "r") == [("pros", "p")]
    assert store.put_alias(A, "r", "zeta", "l") is True
    assert store.put_alias(A, "r", "beta", "ca") is True
    assert store.put_alias(A, "r", "leads", "ar") is False  # a live scope holds the slot
    assert store.put_alias(A, "r", "pros", "ar") is False  # an alias holds it
    assert store.put_alias(A, "r", "zeta", "l") is False  # even the same alias again

    assert store.list_aliases(A, "r") == [("beta", "ca"), ("pros", "p"), ("zeta", "l")]
    assert store.find_alias(A, "r", "zeta") == "l"
    assert store.find_child(A, "r", "leads").scope_id == "l"  # type: ignore[union-attr]
    assert store.list_aliases(A, "c") == []
    assert store.list_aliases(B, "r") == []
    assert store.put_alias(B, "r", "zeta", "x") is True  # another tenant's slot
    assert store.find_alias(A, "r", "zeta") == "l"
    with pytest.raises(Conflict):
        store.create_scope(scope("z", scope("r", None, "root"), "beta"))  # an imported alias blocks the name


# -- erasure ------------------------------------------------------------------------------------
ERASED_SCOPES = ["p", "pi", "pin"]  # root.prospects, in the order the service lists a subtree


def test_erasure_dry_run_counts_and_deletes_nothing(store: RecordStore) -> None:
    build(store)
    before = changed(store)

    counts, erased = store.erase_scopes(A, ERASED_SCOPES, dry_run=True)

    assert counts == {"scopes": 3, "memories": 4, "episodes": 3, "facts": 2}  # m-gone is archived: still counted
    assert erased == []
    assert path_of(store, "root.prospects.initech.notes") == "root.prospects.initech.notes"
    assert store.get_memory(A, "m-gone") is not None and store.get_episodes(A, ["e-pin"])
    assert changed(store) == before


def test_erasure_deletes_every_kind_for_good_and_only_in_the_subtree(store: RecordStore) -> None:
    build(store)
    build(store, B)
    store.rename_scope(A, "pi", "initech-corp", T0)  # an alias under the erased subtree
    store.put_alias(A, "l", "initech", "pi")  # an alias elsewhere resolving into it
    store.put_alias(A, "pi", "old-client", "ca")  # an alias under it resolving outside
    for memory_id in ("m-pros", "m-vat"):
        store.put_revision(revision(memory_id, "bob"))
        store.put_revision(revision(memory_id, "eve", status="approved"))
        store.add_history(history(memory_id, 1, "created"))
    store.put_facts([], [contradiction("x-cav", scope_id="cav")])
    for scope_id in ("pi", "cav"):
        store.save_checkpoint(Checkpoint(tenant=A, scope_id=scope_id, version=1), expected_version=0)
        store.acquire_lease(A, scope_id, "w1", T0, timedelta(hours=1))
    store.mark_dirty(A, ["pi", "cav"], T0)
    other_tenant_feed = changed(store, B)

    counts, erased = store.erase_scopes(A, ERASED_SCOPES, dry_run=False)

    assert counts == {"scopes": 3, "memories": 4, "episodes": 3, "facts": 2}
    gone = {"p", "pi", "pin", "m-pros", "m-gone", "m-init", "m-note", "e-p", "e-pi", "e-pin", "f-p", "f-pi"}
    assert set(erased) == gone
    with pytest.raises(ScopeNotFound):
        path_of(store, "root.prospects")
    assert all(store.get_scope(A, s) is None for s in ERASED_SCOPES)
    assert store.find_child(A, "r", "prospects") is None and store.find_alias(A, "r", "pros") is None
    assert store.find_alias(A, "l", "initech") is None and store.list_aliases(A, "l") == []
    assert store.list_aliases(A, "pi") == [] and store.list_aliases(A, "p") == []
    assert store.list_children(A, "p") == [] and store.list_children(A, "pi") == []
    assert all(store.get_memory(A, m) is None for m in ("m-pros", "m-gone", "m-init", "m-note"))
    assert store.list_scoped_memories(A, "p") == [] and store.list_scoped_memories(A, "pi") == []
    assert store.list_revisions(A, memory_id="m-pros", status=None) == []
    assert {r.memory_id for r in store.list_revisions(A, author="bob")} == {"m-vat"}
    assert {r.memory_id for r in store.list_revisions(A, status="approved")} == {"m-vat"}
    assert store.list_history(A, "m-pros") == []
    assert store.get_episodes(A, ["e-p", "e-pi", "e-pin"]) == {}
    assert store.get_facts(A, ["f-p", "f-pi"]) == {}
    assert store.list_facts(A, "pi") == [] and contradictions(store, A, "pi") == []
    assert store.get_checkpoint(A, "pi").version == 0
    assert store.acquire_lease(A, "pi", "w2", T0, timedelta(hours=1)) is True  # the old lease is gone
    assert store.list_dirty(A, 10) == [(A, "cav")]
    kinds = {
        "p": "scope",
        "pi": "scope",
        "pin": "scope",
        "m-pros": "memory",
        "m-gone": "memory",
        "m-init": "memory",
        "m-note": "memory",
        "e-p": "episode",
        "e-pi": "episode",
        "e-pin": "episode",
        "f-p": "fact",
        "f-pi": "fact",
    }
    tombstones = [(kind, record_id) for _, kind, record_id in store.list_changes(A, None, 1000) if record_id in gone]
    assert sorted(tombstones) == sorted((f"deleted:{kinds[i]}", i) for i in gone)  # one tombstone each, ids only
    # the rest of the tenant is untouched
    assert path_of(store, "root.clients.acme.vat") == "root.clients.acme.vat"
    assert {m.memory_id for m in store.list_memories(A)} == {"m-vat", "m-arch", "t-vat", "t-all"}
    assert store.list_aliases(A, "r") == []
    assert set(store.get_episodes(A, ["e-cav", "e-ar"])) == {"e-cav", "e-ar"}
    assert [f.fact_id for f in store.list_facts(A)] == ["f-ar", "f-cav"]
    assert [x.contradiction_id for x in contradictions(store, A, "cav")] == ["x-cav"]
    assert store.get_checkpoint(A, "cav").version == 1
    assert store.acquire_lease(A, "cav", "w2", T0, timedelta(hours=1)) is False
    assert len(store.list_revisions(A, memory_id="m-vat", status=None)) == 2 and store.list_history(A, "m-vat")
    assert {record_id for kind, record_id in changed(store) if not kind.startswith("deleted:")} == {
        "r",
        "c",
        "ca",
        "cav",
        "cg",
        "l",
        "ar",
        "m-vat",
        "m-arch",
        "t-vat",
        "t-all",
        "e-cav",
        "e-ar",
        "f-cav",
        "f-ar",
    }
    # and so is every other tenant
    assert scope_at(store, B, "root.prospects.initech.notes") == "pin"
    assert store.get_memory(B, "m-pros") is not None and set(store.get_episodes(B, ["e-p", "e-pi"])) == {"e-p", "e-pi"}
    assert changed(store, B) == other_tenant_feed
    # erasing again finds nothing more and fails on nothing
    assert store.erase_scopes(A, ERASED_SCOPES, dry_run=False)[0] == {
        "scopes": 3,
        "memories": 0,
        "episodes": 0,
        "facts": 0,
    }


def test_dynamodb_erasure_leaves_no_item_naming_an_erased_record(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    build(store)
    store.put_revision(revision("m-pros", "bob"))
    store.add_history(history("m-pros", 1, "created"))
    store.put_alias(A, "l", "initech", "pi")
    store.put_alias(A, "pi", "old-client", "ca")
    store.rename_scope(A, "pin", "notes-2024", T0)
    store.save_checkpoint(Checkpoint(tenant=A, scope_id="pi", version=1), expected_version=0)
    store.acquire_lease(A, "pi", "w1", T0, timedelta(hours=1))
    store.mark_dirty(A, ["pi"], T0)
    store.add_delivered(A, "bot", "s1", ["e-pi", "e-cav"])
    names = ("scope_id", "memory_id", "episode_id", "fact_id", "id", "parent_id")

    def naming(erased: set[str]) -> list[dict[str, Any]]:
        """Items with an erased id as a key part or as an id attribute (delivered ids aside)."""
        return [
            item
            for item in scan(aws)
            if item["item_type"]["S"] != "delivered"
            and (
                {item[n]["S"] for n in names if "S" in item.get(n, {})}
                | set(item["PK"]["S"].split("#"))
                | set(item["SK"]["S"].split("#"))
            )
            & erased
        ]

    assert len(naming({"p", "pi", "pin", "m-pros", "e-pi", "f-pi"})) > 30
    _, erased = store.erase_scopes(A, ERASED_SCOPES, dry_run=False)

    left = naming(set(erased))  # only the tombstones name them: a feed entry with the id, nothing else
    gone = [i for i in left if i["item_type"]["S"] == "gone"]  # and, for a day, the recent-forgetting marks
    tombstones = [i for i in left if i not in gone]
    assert sorted(i["kind"]["S"] for i in tombstones) == sorted(
        f"deleted:{kind}" for kind in ["episode"] * 3 + ["fact"] * 2 + ["memory"] * 4 + ["scope"] * 3
    )
    assert all(set(i) == {"PK", "SK", "item_type", "kind", "id", "position"} for i in tombstones)
    assert len(gone) == 3 + 2 and all(set(i) == {"PK", "SK", "item_type", "id", "expires_at"} for i in gone)
    day = datetime.now(UTC) + timedelta(days=1, minutes=1)
    assert all(int(i["expires_at"]["N"]) <= day.timestamp() for i in gone)  # the table's TTL deletes them
    assert store.get_delivered(A, "bot", "s1") == {"e-pi", "e-cav"}  # documented: delivered ids are not erased


# -- drafts -------------------------------------------------------------------------------------
def test_drafts_round_trip_and_are_replaced(store: RecordStore) -> None:
    draft = draft_of(
        {"op": "move", "path": "root.prospects", "new_parent": "root.leads"},
        {"op": "layers", "layers": {"1": "groups"}},
    )

    assert store.get_draft(A, "d1") is None
    store.put_draft(draft)
    assert store.get_draft(A, "d1") == draft
    discarded = draft.model_copy(update={"status": "discarded"})
    store.put_draft(discarded)
    assert store.get_draft(A, "d1") == discarded
    assert store.get_draft(B, "d1") is None


def test_a_draft_is_closed_only_while_it_is_still_open(store: RecordStore) -> None:
    # Given a draft, and a discard prepared while it was open
    build(store)
    draft = draft_of({"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients.acme"})
    store.put_draft(draft)
    discarded = draft.model_copy(update={"status": "discarded"})
    # When a publish of the same draft wins the race
    plan, _ = compiler(store).compile(A, draft.operations)
    store.apply_structure(A, plan, published(draft), T1)

    # Then the late discard is refused and the draft stays published
    with pytest.raises(Conflict) as refused:
        store.close_draft(discarded)
    assert refused.value.code == "draft_closed"
    assert store.get_draft(A, "d1") == published(draft)

    # And an open draft is closed, in its own tenant only
    other = draft_of({"op": "layers", "layers": {"1": "groups"}}, draft_id="d2")
    store.put_draft(other)
    with pytest.raises(Conflict):
        store.close_draft(other.model_copy(update={"tenant": B, "status": "discarded"}))
    store.close_draft(other.model_copy(update={"status": "discarded"}))
    assert store.get_draft(A, "d2") == other.model_copy(update={"status": "discarded"})


# -- publishing ---------------------------------------------------------------------------------
def test_a_move_reparents_the_subtree_and_leaves_an_alias(store: RecordStore) -> None:
    build(store)

    _, draft = publish(store, {"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients.acme"})

    moved = store.get_scope(A, "pi")
    assert moved is not None
    assert (moved.parent_id, moved.segment, moved.depth, moved.updated_at) == ("ca", "initech", 3, T1)
    assert store.find_child(A, "ca", "initech") == moved  # the slot holds the new record
    assert store.get_scope(A, "pin").depth == 4  # type: ignore[union-attr]
    assert [s.depth for s in store.list_children(A, "pi")] == [4]
    assert store.find_child(A, "p", "initech") is None and store.find_alias(A, "p", "initech") == "pi"
    assert path_of(store, "root.prospects.initech.notes") == "root.clients.acme.initech.notes"
    assert [m.memory_id for m in store.list_scoped_memories(A, "pi")] == ["m-init"]  # scoped by id: unmoved
    assert store.get_memory(A, "m-init").version == 1  # type: ignore[union-attr]
    assert {("scope", "pi"), ("scope", "pin")} <= changed(store)
    assert store.get_draft(A, "d1") == published(draft)


def test_a_rename_changes_the_segment_and_leaves_the_old_one_as_an_alias(store: RecordStore) -> None:
    build(store)

    _, draft = publish(store, {"op": "rename", "path": "root.prospects.initech", "new_path": "root.prospects.init"})

    renamed = store.get_scope(A, "pi")
    assert renamed is not None and (renamed.parent_id, renamed.segment, renamed.depth) == ("p", "init", 2)
    assert store.find_child(A, "p", "init") == renamed and store.find_child(A, "p", "initech") is None
    assert store.find_alias(A, "p", "initech") == "pi"
    assert path_of(store, "root.prospects.initech.notes") == "root.prospects.init.notes"
    assert ("scope", "pi") in changed(store) and store.get_draft(A, "d1") == published(draft)


def test_a_merge_moves_children_memories_and_records_and_repoints_aliases(store: RecordStore) -> None:
    build(store)
    store.save_checkpoint(Checkpoint(tenant=A, scope_id="p", version=1), expected_version=0)
    store.mark_dirty(A, ["p"], T0)
    before = changed(store)

    publish(store, {"op": "merge", "path": "root.prospects", "into": "root.leads"})

    assert store.get_scope(A, "p") is None and store.find_child(A, "r", "prospects") is None
    assert store.find_alias(A, "r", "prospects") == "l"  # the merged name resolves to the target
    assert store.find_alias(A, "r", "pros") == "l"  # an older alias of the merged scope is repointed
    assert path_of(store, "root.pros.initech") == "root.leads.initech"
    assert store.get_scope(A, "pi").parent_id == "l"  # type: ignore[union-attr]
    pitch = store.get_memory(A, "m-pros")
    assert pitch is not None and (pitch.scope_id, pitch.version, pitch.updated_at) == ("l", 2, T1)
    assert [m.memory_id for m in store.list_scoped_memories(A, "l")] == ["m-pros"]
    assert store.list_scoped_memories(A, "p") == []
    assert store.get_memory(A, "m-gone").scope_id == "p"  # type: ignore[union-attr]  # archived: not in the plan
    assert store.get_episodes(A, ["e-p"])["e-p"].scope_id == "l"
    assert [e.episode_id for e in store.list_episodes_after(A, "l", (None, ""), T1 + timedelta(days=1), 10)] == ["e-p"]
    assert [f.fact_id for f in store.list_facts(A, "l")] == ["f-p"] and store.list_facts(A, "p") == []
    assert store.get_facts(A, ["f-p"])["f-p"].scope_id == "l"
    assert (A, "l") in store.list_dirty(A, 10) and (A, "p") not in store.list_dirty(A, 10)
    assert store.get_checkpoint(A, "p").version == 0
    feed = changed(store)
    assert ("scope", "p") in before and ("scope", "p") not in feed and ("deleted:scope", "p") in feed  # tombstone
    assert {("scope", "pi"), ("scope", "pin"), ("memory", "m-pros"), ("episode", "e-p"), ("fact", "f-p")} <= feed


def test_dynamodb_a_publish_that_moves_turns_stored_before_gsi4_gives_them_their_session_keys(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    build(store)
    said = {"scope_id": "p", "session_id": "chat"}
    store.put_episodes([episode("t0", 10, occurred_at=T0, **said), episode("t1", 11, occurred_at=T1, **said)])
    forget_sessions(store, A, ["t0"])

    publish(store, {"op": "merge", "path": "root.prospects", "into": "root.leads"})

    found = store.session_episodes(A, "l", "chat", said_before(T1 + timedelta(days=1)), 10)
    assert [e.episode_id for e in found] == ["t1", "t0"]
    assert store.backfill_sessions(A) == 0


def test_a_delete_archives_memories_and_records_and_removes_the_subtree(store: RecordStore) -> None:
    build(store)

    publish(store, {"op": "delete", "path": "root.prospects", "records": "archive"})

    with pytest.raises(ScopeNotFound):
        path_of(store, "root.prospects")
    with pytest.raises(ScopeNotFound):
        path_of(store, "root.pros")  # the aliases of a deleted scope go with it
    assert all(store.get_scope(A, s) is None for s in ERASED_SCOPES)
    for memory_id in ("m-pros", "m-init", "m-note"):
        memory = store.get_memory(A, memory_id)
        assert memory is not None and (memory.status, memory.version, memory.updated_at) == ("archived", 2, T1)
    assert store.list_scoped_memories(A, "pi") == []  # their keys are free
    episodes = store.get_episodes(A, ["e-p", "e-pi", "e-pin", "e-cav"])
    assert {i: e.archived for i, e in episodes.items()} == {"e-p": True, "e-pi": True, "e-pin": True, "e-cav": False}
    facts = store.get_facts(A, ["f-p", "f-pi", "f-cav"])
    assert {i: f.status for i, f in facts.items()} == {"f-p": "archived", "f-pi": "archived", "f-cav": "active"}
    assert [f.status for f in store.list_facts(A, "pi")] == ["archived"]  # kept where they were
    feed = changed(store)
    assert not {("scope", s) for s in ERASED_SCOPES} & feed
    assert {("deleted:scope", s) for s in ERASED_SCOPES} <= feed  # a connector learns the scopes are gone
    assert {("memory", "m-init"), ("episode", "e-pin"), ("fact", "f-pi")} <= feed


def test_a_delete_can_move_its_records_instead(store: RecordStore) -> None:
    build(store)

    publish(store, {"op": "delete", "path": "root.prospects", "records": "move", "into": "root.archive"})

    assert store.get_scope(A, "pi") is None
    assert store.get_memory(A, "m-init").status == "archived"  # type: ignore[union-attr]
    assert {e.scope_id for e in store.get_episodes(A, ["e-p", "e-pi", "e-pin"]).values()} == {"ar"}
    assert [f.fact_id for f in store.list_facts(A, "ar")] == ["f-ar", "f-p", "f-pi"]
    assert store.find_alias(A, "r", "prospects") is None  # a delete leaves no alias of its own
    assert store.find_alias(A, "r", "pros") == "ar"  # but aliases of a scope whose records moved follow them
    assert (A, "ar") in store.list_dirty(A, 10)


def test_a_layer_rename_moves_tagged_memories_and_their_keys(store: RecordStore) -> None:
    build(store)
    store.put_layers(A, {1: "groups", 2: "clients", 3: "services"})
    store.create_memory(tagged("t-old", "services", "vat", "old", status="archived"))

    publish(store, {"op": "layers", "layers": {"1": "groups", "2": "clients", "3": "taxes"}})

    assert store.get_layers(A) == {1: "groups", 2: "clients", 3: "taxes"}
    assert [m.memory_id for m in store.list_tagged_memories(A, "taxes", "vat")] == ["t-vat"]
    assert [m.memory_id for m in store.list_tagged_memories(A, "taxes", None)] == ["t-all"]
    assert store.list_tagged_memories(A, "services", "vat") == []
    assert store.get_memory(A, "t-old").layer == "taxes"  # type: ignore[union-attr]  # archived ones too
    assert store.get_memory(A, "t-vat").version == 1  # type: ignore[union-attr]
    assert {("memory", "t-vat"), ("memory", "t-all"), ("memory", "t-old")} <= changed(store)
    with pytest.raises(Conflict):
        store.create_memory(tagged("t-dup", "taxes", "vat", "deadline"))  # the key moved with it


def test_a_stale_plan_is_refused_and_nothing_is_written(store: RecordStore) -> None:
    build(store)
    draft = draft_of({"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"})
    plan, _ = compiler(store).compile(A, draft.operations)
    store.put_draft(draft)
    store.create_scope(scope("late", store.get_scope(A, "c"), "initech"))  # type: ignore[arg-type]

    with pytest.raises(Conflict) as raised:
        store.apply_structure(A, plan, published(draft), T1)

    assert raised.value.code == "stale_preview"
    assert path_of(store, "root.prospects.initech") == "root.prospects.initech"
    assert store.get_draft(A, "d1") == draft
    assert isinstance(store, SqliteRecordStore) or store.get_journal(A, "d1") is None  # type: ignore[attr-defined]


# -- interrupted publishes -----------------------------------------------------------------------
BIG_DRAFT = (
    {"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients.acme"},
    {"op": "merge", "path": "root.prospects", "into": "root.leads"},
    {"op": "merge", "path": "root.archive", "into": "root.clients.globex"},
    {"op": "layers", "layers": {"1": "groups", "2": "clients", "3": "taxes"}},
)


def test_sqlite_an_interrupted_publish_applies_nothing_and_a_retry_completes(tmp_path: Path) -> None:
    store, reference = SqliteRecordStore(tmp_path / "a.db"), SqliteRecordStore(tmp_path / "b.db")
    for each in (store, reference):
        build(each)
        each.put_layers(A, {1: "groups", 2: "clients", 3: "services"})
    draft = draft_of(*BIG_DRAFT)
    plan, _ = compiler(store).compile(A, draft.operations)
    store.put_draft(draft)
    before = sqlite_state(store)

    store.fail_after_step = 4
    with pytest.raises(RuntimeError, match="after step 4"):
        store.apply_structure(A, plan, published(draft), T1)

    assert sqlite_state(store) == before
    assert store.get_draft(A, "d1") == draft
    store.fail_after_step = None
    store.apply_structure(A, plan, published(draft), T1)
    reference.put_draft(draft)
    reference.apply_structure(A, plan, published(draft), T1)
    assert sqlite_state(store) == sqlite_state(reference)
    assert path_of(store, "root.pros") == "root.leads"


def sqlite_state(store: SqliteRecordStore) -> dict[str, list[tuple[Any, ...]]]:
    tables = [row[0] for row in store._rows("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {table: sorted(store._rows(f"SELECT * FROM {table}"), key=repr) for table in tables if table != "feed"}


def scan(client: Any, table: str = TABLE) -> list[dict[str, Any]]:
    items, params = [], {"TableName": table}
    while True:
        page = client.scan(**params)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def snapshot(client: Any, table: str) -> list[str]:
    """Every item, with feed positions (the writer's clock) replaced by what they point at."""
    out = []
    for item in scan(client, table):
        item = {name: value for name, value in item.items() if name != "feed_position"}
        if item["item_type"]["S"] == "feed":
            item = {"feed": {"S": f"{item['kind']['S']}#{item['id']['S']}"}}
        out.append(json.dumps(item, sort_keys=True, default=lambda b: bytes(b).hex()))
    return sorted(out)


def dynamo_pair(aws: Any) -> tuple[DynamoRecordStore, DynamoRecordStore, Plan, Draft]:
    """Two tables built alike; the plan of BIG_DRAFT, compiled once, published whole on the second. (Tests
    using it run with cheap_moto_transactions: none of their transactions is cancelled.)"""
    create_table(aws, OTHER_TABLE)
    interrupted = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    reference = DynamoRecordStore(OTHER_TABLE, client=aws, feed_horizon_seconds=0)
    for each in (interrupted, reference):
        build(each)
        each.put_layers(A, {1: "groups", 2: "clients", 3: "services"})
        each.put_draft(draft_of(*BIG_DRAFT))
    plan, _ = compiler(interrupted).compile(A, draft_of(*BIG_DRAFT).operations)
    reference.apply_structure(A, plan, published(draft_of(*BIG_DRAFT)), T1)
    return interrupted, reference, plan, draft_of(*BIG_DRAFT)


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_the_big_draft_takes_many_steps(aws: Any) -> None:
    _, reference, plan, _ = dynamo_pair(aws)

    kinds = [kind for kind, _ in journal_steps(plan)]

    assert kinds == [
        "vacate",
        "place",
        "repoint",
        "repoint",
        "remove",
        "alias",
        "move_memories",
        "move_records",
        "move_records",
        "layers",
        "rename_layer",
    ]
    assert reference.get_journal(A, "d1") == {
        "draft_id": "d1",
        "status": "done",
        "cursor": 11,
        "steps": 11,
        "next_step": "",
        "now": T1,
    }


@pytest.mark.usefixtures("cheap_moto_transactions")
@pytest.mark.parametrize("crash_after", range(1, 12))
def test_dynamodb_a_publish_interrupted_after_any_step_resumes_to_the_uninterrupted_result(
    aws: Any, crash_after: int
) -> None:
    store, _, plan, draft = dynamo_pair(aws)
    store.fail_after_step = crash_after

    with pytest.raises(RuntimeError, match=f"after step {crash_after}$"):
        store.apply_structure(A, plan, published(draft), T1)

    assert store.get_draft(A, "d1") == draft  # still open: nothing reads as published
    journal = store.get_journal(A, "d1")
    assert journal is not None and (journal["status"], journal["cursor"]) == ("applying", crash_after - 1)
    assert journal["next_step"].startswith(journal_steps(plan)[crash_after - 1][0])  # it redoes step N (idempotent)
    assert snapshot(aws, TABLE) != snapshot(aws, OTHER_TABLE)

    store.fail_after_step = None
    store.apply_structure(A, plan, published(draft), T1)

    assert snapshot(aws, TABLE) == snapshot(aws, OTHER_TABLE)
    assert store.get_draft(A, "d1") == published(draft)
    assert path_of(store, "root.clients.acme.initech.notes") == "root.clients.acme.initech.notes"
    assert path_of(store, "root.prospects") == "root.leads"  # old paths resolve as aliases
    assert path_of(store, "root.pros") == "root.leads"
    assert path_of(store, "root.archive") == "root.clients.globex"


class CrashAfter:
    """A DynamoDB client whose process dies right after its `after`-th transaction commits."""

    def __init__(self, client: Any, after: int) -> None:
        self.client, self.after, self.calls = client, after, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def transact_write_items(self, **params: Any) -> Any:
        response = self.client.transact_write_items(**params)
        self.calls += 1
        if self.calls == self.after:
            raise RuntimeError(f"crash after transaction {self.after}")
        return response


@pytest.mark.usefixtures("cheap_moto_transactions")
@pytest.mark.parametrize("crash_after", [1, 4, 8, 12, 13])  # of the 13 transactions the whole publish takes
def test_dynamodb_a_publish_crashing_inside_a_step_resumes_to_the_uninterrupted_result(
    aws: Any, crash_after: int
) -> None:
    _, _, plan, draft = dynamo_pair(aws)
    crashing = DynamoRecordStore(TABLE, client=CrashAfter(aws, crash_after), feed_horizon_seconds=0)

    with pytest.raises(RuntimeError, match="crash after transaction"):
        crashing.apply_structure(A, plan, published(draft), T1)

    restarted = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    restarted.apply_structure(A, plan, published(draft), T1)
    assert snapshot(aws, TABLE) == snapshot(aws, OTHER_TABLE)


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_resume_journals_completes_an_interrupted_publish(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dynamo_structure, "PLAN_PART", 200)  # the plan is stored in several parts
    store, _, plan, draft = dynamo_pair(aws)
    store.fail_after_step = 5
    with pytest.raises(RuntimeError):
        store.apply_structure(A, plan, published(draft), T1)
    store.fail_after_step = None

    assert store.resume_journals(B) == []
    fresh = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)  # e.g. another process, later
    assert fresh.resume_journals(A) == ["d1"]

    assert snapshot(aws, TABLE) == snapshot(aws, OTHER_TABLE)
    assert len([row for row in snapshot(aws, TABLE) if "journal_plan" in row]) >= 2
    assert fresh.resume_journals(A) == []
    fresh.apply_structure(A, plan, published(draft), T1)  # a published draft: nothing more happens
    assert snapshot(aws, TABLE) == snapshot(aws, OTHER_TABLE)


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_another_publish_completes_the_interrupted_one_then_asks_for_a_new_preview(aws: Any) -> None:
    store, _, plan, draft = dynamo_pair(aws)
    store.fail_after_step = 2
    with pytest.raises(RuntimeError):
        store.apply_structure(A, plan, published(draft), T1)
    store.fail_after_step = None
    other = draft_of({"op": "move", "path": "root.clients.globex", "new_parent": "root.leads"}, draft_id="d2")
    store.put_draft(other)

    with pytest.raises(Conflict) as raised:
        store.apply_structure(A, Plan(), published(other), T1)

    assert raised.value.code == "stale_preview" and raised.value.details == {"draft_id": "d1"}
    assert [row for row in snapshot(aws, TABLE) if "DRAFT#d2" not in row] == snapshot(aws, OTHER_TABLE)
    assert store.get_draft(A, "d1") == published(draft) and store.get_draft(A, "d2") == other
    assert store.get_journal(A, "d2") is None


@pytest.mark.usefixtures("cheap_moto_transactions")
def test_dynamodb_a_big_merge_stays_within_a_hundred_items_a_transaction(aws: Any) -> None:
    store = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0, page_size=25)
    build(store)
    store.put_episodes([episode(f"e{n:03d}", minute=n, scope_id="p") for n in range(80)])
    store.put_facts([fact(f"f{n:03d}", scope_id="p") for n in range(45)])
    for n in range(45):
        store.create_memory(scoped(f"m{n:03d}", "p", f"k{n:03d}"))
    prospects = store.get_scope(A, "p")
    assert prospects is not None
    for n in range(30):
        store.create_scope(scope(f"s{n:03d}", prospects, f"child-{n:03d}"))
    sizes: list[int] = []
    aws.meta.events.register(
        "before-parameter-build.dynamodb.TransactWriteItems",
        lambda params, **_: sizes.append(len(params["TransactItems"])),
    )

    publish(store, {"op": "merge", "path": "root.prospects", "into": "root.leads"})

    assert max(sizes) <= 100 and len(sizes) > 10
    assert len(store.list_scoped_memories(A, "l")) == 46
    assert len(store.list_facts(A, "l")) == 46
    assert len(store.list_episodes_after(A, "l", (None, ""), T1 + timedelta(days=1), 1000)) == 81
    assert len(store.list_children(A, "l")) == 31
    assert store.get_scope(A, "p") is None


# -- both adapters, one plan, one result ----------------------------------------------------------
ALL_SCOPES = ["r", "c", "ca", "cav", "cg", "p", "pi", "pin", "l", "ar"]
ALL_MEMORIES = ["m-vat", "m-pros", "m-init", "m-note", "m-arch", "m-gone", "t-vat", "t-all"]


def logical_state(store: RecordStore) -> dict[str, Any]:
    """What a caller can read through the port (feed positions aside)."""
    return {
        "scopes": {s: store.get_scope(A, s) for s in ALL_SCOPES},
        "children": {s: store.list_children(A, s) for s in ALL_SCOPES},
        "aliases": {s: store.list_aliases(A, s) for s in ALL_SCOPES},
        "memories": {m: store.get_memory(A, m) for m in ALL_MEMORIES},
        "scoped": {s: store.list_scoped_memories(A, s) for s in ALL_SCOPES},
        "tagged": {layer: store.list_tagged_memories(A, layer, "vat") for layer in ("services", "taxes")},
        "episodes": store.get_episodes(A, [f"e-{s}" for s in ALL_SCOPES]),
        "facts": store.list_facts(A),
        "scope_facts": {s: store.list_facts(A, s) for s in ALL_SCOPES},
        "dirty": sorted(store.list_dirty(A, 100)),
        "layers": store.get_layers(A),
        "feed": changed(store),
        "drafts": store.get_draft(A, "d1"),
    }


@pytest.mark.parametrize(
    "ops",
    [
        BIG_DRAFT,
        ({"op": "delete", "path": "root.prospects", "records": "archive"},),
        ({"op": "delete", "path": "root.prospects", "records": "move", "into": "root.clients.globex"},),
    ],
    ids=["moves-merges-layers", "delete-archive", "delete-move"],
)
def test_sqlite_and_dynamodb_publish_the_same_plan_to_the_same_state(
    aws: Any, tmp_path: Path, ops: tuple[dict[str, Any], ...]
) -> None:
    dynamodb = DynamoRecordStore(TABLE, client=aws, feed_horizon_seconds=0)
    stores: list[RecordStore] = [SqliteRecordStore(tmp_path / "mneme.db"), dynamodb]
    draft = draft_of(*ops)
    for each in stores:
        build(each)
        each.put_layers(A, {1: "groups", 2: "clients", 3: "services"})
        each.put_draft(draft)
    plan, _ = compiler(stores[0]).compile(A, draft.operations)

    for each in stores:
        each.apply_structure(A, plan, published(draft), T1)

    on_sqlite, on_dynamodb = (logical_state(each) for each in stores)
    assert on_sqlite == on_dynamodb
