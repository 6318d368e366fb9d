"""The review workflow: pending creates and revisions, approvals, rejections, the queue, history."""

from __future__ import annotations

import pytest

from mneme.bootstrap import Services
from mneme.errors import Conflict, Forbidden
from mneme.models import Role
from mneme.services.recall import RecallRequest
from tests.conftest import principal

APPROVER = principal("acme", "alice", Role.approver)
WENDY = principal("acme", "wendy", Role.writer)
OMAR = principal("acme", "omar", Role.writer)


@pytest.fixture
def published(services: Services) -> str:
    services.scopes.create("acme", "root.acme")
    memory, _ = services.memories.create(APPROVER, scope="root.acme", key="vat", body="Acme files VAT quarterly.")
    return memory.memory_id


def bodies(services: Services, who: object) -> list[tuple[str, bool]]:
    return [(b.body, b.pending) for b in services.retrieval.retrieve(who, "root.acme").blocks]  # type: ignore[arg-type]


def test_a_writers_edit_of_published_work_is_a_revision_seen_only_by_its_author(
    services: Services, published: str
) -> None:
    services.review.edit(WENDY, published, body="Acme files VAT monthly.")
    assert bodies(services, WENDY) == [("Acme files VAT monthly.", True)]
    assert bodies(services, OMAR) == [("Acme files VAT quarterly.", False)]
    header = services.retrieval.retrieve(WENDY, "root.acme").markdown
    assert "<!-- scoped: root.acme | priority: 6 | key: vat | pending -->" in header
    [mine] = services.recall.recall(WENDY, RecallRequest(query="Acme VAT")).results
    assert mine.content == "Acme files VAT monthly." and mine.status == "pending"
    [theirs] = services.recall.recall(OMAR, RecallRequest(query="Acme VAT")).results
    assert theirs.content == "Acme files VAT quarterly."


def test_a_second_edit_updates_the_same_revision(services: Services, published: str) -> None:
    services.review.edit(WENDY, published, body="Monthly.")
    services.review.edit(WENDY, published, summary="cadence")
    [revision] = services.store.list_revisions("acme", memory_id=published)
    assert revision.changes == {"body": "Monthly.", "summary": "cadence"}


def test_approval_publishes_bumps_the_version_and_records_history(services: Services, published: str) -> None:
    services.review.edit(WENDY, published, body="Acme files VAT monthly.")
    approved = services.review.approve(APPROVER, published)
    assert approved.version == 2 and approved.body == "Acme files VAT monthly."
    assert bodies(services, OMAR) == [("Acme files VAT monthly.", False)]
    history = services.review.history(APPROVER, published)
    assert [(h.action, h.actor, h.approved_by) for h in history] == [
        ("created", "alice", "alice"),
        ("revision_approved", "wendy", "alice"),  # the author made the edit; the approver approved it
    ]
    assert history[1].changes == {"body": ["Acme files VAT quarterly.", "Acme files VAT monthly."]}


def test_a_stale_revision_cannot_be_approved(services: Services, published: str) -> None:
    services.review.edit(WENDY, published, body="Monthly.")
    services.review.edit(APPROVER, published, body="Quarterly, confirmed.")  # the published version moves on
    with pytest.raises(Conflict) as raised:
        services.review.approve(APPROVER, published)
    assert raised.value.code == "stale_revision"


def test_rejection_keeps_a_reason_the_author_can_read(services: Services, published: str) -> None:
    services.review.edit(WENDY, published, body="Monthly.")
    services.review.reject(APPROVER, published, "Acme is still quarterly.")
    [mine] = services.review.mine(WENDY)
    assert (mine["kind"], mine["status"], mine["reason"], mine["decided_by"]) == (
        "revision",
        "rejected",
        "Acme is still quarterly.",
        "alice",
    )
    assert bodies(services, WENDY) == [("Acme files VAT quarterly.", False)]


def test_pending_creates_are_approved_or_rejected(services: Services, published: str) -> None:
    draft, _ = services.memories.create(WENDY, scope="root.acme", key="payroll", body="Payroll runs on the 25th.")
    assert ("Payroll runs on the 25th.", True) in bodies(services, WENDY)
    assert services.review.approve(APPROVER, draft.memory_id).status == "published"
    assert ("Payroll runs on the 25th.", False) in bodies(services, OMAR)
    other, _ = services.memories.create(OMAR, scope="root.acme", key="bank", body="Bank is Northern.")
    rejected = services.review.reject(APPROVER, other.memory_id, "Unverified.")["memory"]
    assert rejected.status == "archived"
    assert services.review.history(APPROVER, other.memory_id)[-1].reason == "Unverified."


def test_only_approvers_decide(services: Services, published: str) -> None:
    draft, _ = services.memories.create(WENDY, scope="root.acme", key="x", body="Mine.")
    with pytest.raises(Forbidden):
        services.review.approve(WENDY, draft.memory_id)


def test_the_queue_shows_diffs_authors_and_filters_by_subtree(services: Services, published: str, clock) -> None:  # type: ignore[no-untyped-def]
    services.scopes.create("acme", "root.globex")
    services.memories.create(OMAR, scope="root.globex", key="g", body="Globex note.")
    clock.advance(minutes=5)
    services.review.edit(WENDY, published, body="Monthly.")
    clock.advance(minutes=5)
    queue = services.review.queue(APPROVER)
    assert [(i["kind"], i["author"], i["target"]) for i in queue] == [
        ("create", "omar", "root.globex"),
        ("revision", "wendy", "root.acme"),
    ]
    assert queue[1]["diff"] == {"body": ["Acme files VAT quarterly.", "Monthly."]} and queue[1]["age_seconds"] == 300
    assert [i["target"] for i in services.review.queue(APPROVER, "root.acme")] == ["root.acme"]
