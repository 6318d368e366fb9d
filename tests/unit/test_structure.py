"""Structure drafts: preview, conflicts, atomic publish, aliases afterwards, the index following."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from mneme.bootstrap import Services
from mneme.errors import Conflict, Forbidden, ScopeNotFound
from mneme.models import Role
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from mneme.structure_models import Operation
from tests.conftest import principal

APPROVER = principal("acme", "alice", Role.approver)
OPS = TypeAdapter(list[Operation])


def ops(*items: dict[str, Any]) -> list[Any]:
    return OPS.validate_python(list(items))


@pytest.fixture
def tree(services: Services) -> Services:
    for path in ("root.clients.acme.vat", "root.clients.globex.vat", "root.archive", "root.prospects.initech"):
        services.scopes.create("acme", path, parents=True)
    create = services.memories.create
    create(APPROVER, scope="root.clients.acme.vat", key="policy", body="Acme is on flat rate.")
    create(APPROVER, scope="root.clients.globex.vat", key="policy", body="Globex files monthly.")
    create(APPROVER, scope="root.prospects.initech", key="intro", body="Initech met us in May.")
    services.remember.remember(
        APPROVER, [RememberItem(scope="root.prospects.initech", content="Initech asked about payroll.")]
    )
    return services


def recall_ids(services: Services, scope: str, query: str) -> list[str]:
    return [r.content for r in services.recall.recall(APPROVER, RecallRequest(query=query, scope=scope)).results]


def test_a_move_previews_paths_and_aliases_then_publishes(tree: Services) -> None:
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"})
    )
    assert preview.path_changes == [("root.prospects.initech", "root.clients.initech")]
    assert preview.aliases == [("root.prospects.initech", "root.clients.initech")] and preview.conflicts == []
    tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert tree.scopes.resolve("acme", "root.prospects.initech").path == "root.clients.initech"
    assert "Initech asked about payroll." in recall_ids(tree, "root.clients", "Initech payroll")
    assert recall_ids(tree, "root.prospects", "Initech payroll") == []
    bundle = tree.retrieval.retrieve(APPROVER, "root.prospects.initech").markdown
    assert "<!-- scoped: root.clients.initech | priority: 9 | key: intro -->" in bundle


def test_a_merge_previews_key_collisions_and_refuses_to_publish_them(tree: Services) -> None:
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "merge", "path": "root.clients.globex", "into": "root.clients.acme"})
    )
    assert any("child named 'vat'" in c for c in preview.conflicts)
    with pytest.raises(Conflict) as raised:
        tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert raised.value.code == "draft_conflicts"


def test_merge_moves_memories_records_and_leaves_an_alias(tree: Services) -> None:
    tree.scopes.create("acme", "root.leads")
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "merge", "path": "root.prospects", "into": "root.leads"})
    )
    assert ("root.prospects.initech", "root.leads.initech") in preview.path_changes
    assert ("root.prospects", None) in preview.path_changes
    tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert tree.scopes.resolve("acme", "root.prospects").path == "root.leads"
    assert "Initech asked about payroll." in recall_ids(tree, "root.leads", "Initech payroll")


def test_delete_archives_memories_and_records_explicitly(tree: Services) -> None:
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "delete", "path": "root.prospects", "records": "archive"})
    )
    assert [m["to"] for m in preview.memories] == ["archived"]
    tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    with pytest.raises(ScopeNotFound):
        tree.scopes.resolve("acme", "root.prospects.initech")
    assert recall_ids(tree, "root", "Initech payroll") == []
    [episode] = [e for batch in tree.store.iter_episodes("acme") for e in batch]
    assert episode.archived  # kept, not dropped


def test_a_stale_preview_is_refused(tree: Services) -> None:
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"})
    )
    tree.scopes.create("acme", "root.clients.initech")  # the target now exists
    with pytest.raises(Conflict) as raised:
        tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert raised.value.code == "stale_preview"
    _, fresh = tree.structure.get(APPROVER, draft.draft_id)
    assert fresh.conflicts


def test_layer_changes_rename_tagged_targets(tree: Services) -> None:
    tree.scopes.set_layers("acme", {1: "groups", 2: "clients", 3: "services"})
    tree.memories.create(APPROVER, tag="services=vat", key="deadline", body="VAT due on the 7th.")
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "layers", "layers": {"1": "groups", "2": "clients", "3": "taxes"}})
    )
    tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    bundle = tree.retrieval.retrieve(APPROVER, "root.clients.acme.vat").markdown
    assert "<!-- tagged: taxes=vat | priority: 11 | key: deadline" in bundle


def test_an_interrupted_publish_applies_nothing_and_a_retry_completes(tree: Services) -> None:
    tree.scopes.create("acme", "root.leads")
    draft, preview = tree.structure.create(
        APPROVER,
        ops(
            {"op": "move", "path": "root.prospects.initech", "new_parent": "root.clients"},
            {"op": "merge", "path": "root.archive", "into": "root.leads"},
        ),
    )
    before = [p for p, _ in tree.scopes.subtree("acme", "root")]
    tree.store.fail_after_step = 3  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert [p for p, _ in tree.scopes.subtree("acme", "root")] == before
    tree.store.fail_after_step = None  # type: ignore[attr-defined]
    tree.structure.publish(APPROVER, draft.draft_id, preview.fingerprint)
    assert tree.scopes.resolve("acme", "root.prospects.initech").path == "root.clients.initech"
    assert tree.scopes.resolve("acme", "root.archive").path == "root.leads"


def test_only_approvers_publish(tree: Services) -> None:
    draft, preview = tree.structure.create(
        APPROVER, ops({"op": "move", "path": "root.archive", "new_parent": "root.clients"})
    )
    with pytest.raises(Forbidden):
        tree.structure.publish(principal("acme", "wendy", Role.writer), draft.draft_id, preview.fingerprint)
