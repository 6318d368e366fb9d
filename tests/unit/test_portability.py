"""Export → import into a fresh tenant gives the same answers; a second import changes nothing; erasure."""

from __future__ import annotations

from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.errors import Conflict, InvalidInput, ScopeNotFound
from mneme.models import Role
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)
NEW = principal("acme-copy", "alice", Role.admin)


def seeded(services: Services, clock: Any) -> None:
    services.scopes.set_layers("acme", {1: "clients", 2: "services"})
    services.scopes.create("acme", "root.pennine.vat", parents=True)
    services.memories.create(ALICE, scope="root", key="style", body="Plain English.")
    services.memories.create(ALICE, tag="services=vat", key="flat-rate", body="Check flat-rate eligibility.")
    memory, _ = services.memories.create(ALICE, scope="root.pennine.vat", key="policy", body="Flat rate scheme.")
    services.memories.edit(ALICE, memory.memory_id, body="Flat rate scheme since 2024.")
    services.scopes.rename("acme", "root.pennine", "root.pennine-joinery")
    items = [
        RememberItem(
            scope="root.pennine-joinery.vat",
            content=f"Pennine Joinery's VAT scheme is flat rate. ({i})",
            metadata={"i": i},
        )
        for i in range(5)
    ]
    services.remember.remember(ALICE, items)
    clock.advance(seconds=5)
    services.consolidation.start(ALICE, None)


def answers(services: Services, caller: Any) -> tuple[str, list[tuple[str, str, str]]]:
    """The bundle byte for byte; the recalled set (BM25 statistics are index-wide, so close scores may swap)."""
    bundle = services.retrieval.retrieve(caller, "root.pennine.vat").markdown  # through the alias
    recalled = services.recall.recall(caller, RecallRequest(query="Pennine Joinery VAT scheme", limit=20))
    return bundle, sorted((r.kind, r.content, repr(r.metadata)) for r in recalled.results)


def test_export_import_into_a_fresh_tenant_answers_the_same(services: Services, clock: Any) -> None:
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root"))
    assert {line["type"] for line in lines} == {"header", "layers", "scope", "alias", "memory", "episode", "fact"}
    counts = services.portability.import_("acme-copy", lines).counts
    assert counts["memories"] == 3 and counts["episodes"] == 5 and counts["aliases"] == 1 and counts["facts"] >= 1
    assert answers(services, NEW) == answers(services, ALICE)
    history = services.review.history(NEW, next(line["memory_id"] for line in lines if line.get("key") == "policy"))
    assert [h.action for h in history] == ["created", "edited"]


def test_a_second_import_changes_nothing(services: Services, clock: Any) -> None:
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root"))
    services.portability.import_("acme-copy", lines)
    before = services.feed.changes(NEW, None, 1000)["changes"]
    again = services.portability.import_("acme-copy", lines).counts
    assert again["memories"] == again["episodes"] == again["facts"] == again["scopes"] == 0
    assert services.feed.changes(NEW, None, 1000)["changes"] == before


def test_export_of_a_subtree_without_vectors_is_re_embedded_on_import(services: Services, clock: Any) -> None:
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root.pennine-joinery"))
    assert all("vector" not in line for line in lines)
    assert not any(line["type"] == "memory" and line.get("key") == "flat-rate" for line in lines)  # tagged: root only
    services.portability.import_("acme-copy", lines)
    found = services.recall.recall(NEW, RecallRequest(query="Pennine Joinery VAT scheme", kinds=["episode"]))
    assert len(found.results) == 5


def test_a_foreign_file_is_refused(services: Services) -> None:
    with pytest.raises(InvalidInput):
        services.portability.import_("acme-copy", [{"type": "header", "format": "something-else"}])


def test_erasure_counts_first_then_deletes_for_good(services: Services, clock: Any) -> None:
    seeded(services, clock)
    dry = services.portability.erase("acme", "root.pennine-joinery")
    assert dry["dry_run"] and dry["counts"]["episodes"] == 5 and dry["counts"]["memories"] == 1
    assert len(services.recall.recall(ALICE, RecallRequest(query="Pennine Joinery VAT")).results) > 0
    done = services.portability.erase("acme", "root.pennine-joinery", dry_run=False)
    assert done["counts"] == dry["counts"]
    with pytest.raises(ScopeNotFound):
        services.scopes.resolve("acme", "root.pennine.vat")  # the alias went too
    results = services.recall.recall(
        ALICE, RecallRequest(query="Pennine Joinery VAT", scoring={"strictness": "recall"})
    )
    assert {r.kind for r in results.results} <= {"memory"} and all("Pennine" not in r.content for r in results.results)
    assert all(c["deleted"] for c in services.feed.changes(ALICE, None, 1000)["changes"] if c["kind"] == "episode")
    with pytest.raises(InvalidInput):
        services.portability.erase("acme", "root", dry_run=False)


# -- all or nothing, or record by record with a report -------------------------------------------------------


def taken(services: Services) -> list[dict[str, Any]]:
    """acme-copy before the import: its own `style` memory at root (the export's has another id: a conflict)."""
    services.memories.create(NEW, scope="root", key="style", body="Our own house style.")
    return services.feed.changes(NEW, None, 1000)["changes"]


def recalled(services: Services, caller: Any) -> set[str]:
    request = RecallRequest(query="Pennine Joinery VAT scheme", limit=50, scoring={"strictness": "recall"})
    return {r.content for r in services.recall.recall(caller, request).results}


def test_an_import_that_fails_writes_nothing_and_names_the_line(services: Services, clock: Any) -> None:
    # Given an export whose `style` memory is taken in the importing tenant
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root"))
    before = taken(services)
    # When it is imported
    with pytest.raises(Conflict) as refused:
        services.portability.import_("acme-copy", lines)
    # Then the error names the line and says nothing was imported, and nothing was: no scope, layer, memory,
    # episode or fact, in the records or the index
    where = next(n for n, line in enumerate(lines, 1) if line.get("key") == "style")
    assert refused.value.code == "memory_exists"
    assert (
        refused.value.message.startswith(f"line {where} (memory ") and "nothing was imported" in refused.value.message
    )
    assert services.feed.changes(NEW, None, 1000)["changes"] == before
    assert services.store.get_layers("acme-copy") == {}
    assert not any("Pennine" in text or "flat" in text.lower() for text in recalled(services, NEW))


def test_a_malformed_line_fails_the_import_before_anything_is_kept(services: Services, clock: Any) -> None:
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root"))
    broken = next(n for n, line in enumerate(lines) if line["type"] == "episode")
    lines[broken] = {k: v for k, v in lines[broken].items() if k != "content"}
    with pytest.raises(InvalidInput, match=rf"^line {broken + 1} \(episode ep_\w+\): .*content.*nothing was imported"):
        services.portability.import_("acme-copy", lines)
    assert services.feed.changes(NEW, None, 1000)["changes"] == []


def test_an_import_that_continues_reports_exactly_what_it_wrote(services: Services, clock: Any) -> None:
    # Given the same conflict, imported with keep_going
    seeded(services, clock)
    lines = list(services.portability.export("acme", "root"))
    before = {c["id"] for c in taken(services)}
    imported = services.portability.import_("acme-copy", lines, keep_going=True)
    # Then the one record that could not be written is reported, with its line and error
    where = next(n for n, line in enumerate(lines, 1) if line.get("key") == "style")
    assert [(f["line"], f["type"], f["code"]) for f in imported.failed] == [(where, "memory", "memory_exists")]
    # And the counts are exactly what the tenant gained
    gained: dict[str, int] = {}
    for change in services.feed.changes(NEW, None, 1000)["changes"]:
        if change["id"] not in before:
            gained[change["kind"]] = gained.get(change["kind"], 0) + 1
    counts = imported.counts
    assert gained == {"scope": counts["scopes"], "memory": counts["memories"], "episode": counts["episodes"],
                      "fact": counts["facts"]}  # fmt: skip
    assert counts["memories"] == 2 and counts["episodes"] == 5 and counts["aliases"] == 1
    # And what it wrote is searchable: everything the source tenant finds but its `style` memory
    assert recalled(services, ALICE) - {"Plain English."} <= recalled(services, NEW)
