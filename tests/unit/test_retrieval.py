"""retrieve(path): walk, buckets, priorities, headers, aliases, visibility, determinism."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mneme.bootstrap import Services
from mneme.errors import Conflict, ScopeNotFound
from mneme.models import Role
from mneme.services.curation.retrieval import CONTRACT, priority
from tests.conftest import principal

GOLDEN = Path(__file__).parent / "golden"
ADMIN = principal("acme", "alice", Role.admin)


def seed_tree(services: Services) -> None:
    """The seed's tree: root → root.pennine-joinery → root.pennine-joinery.vat, with every bucket."""
    services.scopes.set_layers("acme", {1: "clients", 2: "services"})
    services.scopes.create("acme", "root.pennine-joinery.vat", parents=True)
    services.scopes.create("acme", "root.acme.vat", parents=True)
    create = services.memories.create
    create(ADMIN, scope="root", key="house-style", body="Write in plain British English.")
    create(ADMIN, scope="root", key="escalation", body="Escalate anything over £10k to a partner.")
    create(ADMIN, tag="clients=*", key="engagement-letter", body="Check the engagement letter first.")
    create(ADMIN, tag="clients=pennine-joinery", key="contact", body="Speak to Sam, the finance lead.")
    create(ADMIN, scope="root.pennine-joinery", key="year-end", body="Year end is 31 March.")
    create(ADMIN, tag="services=*", key="deadlines", body="Diary every filing deadline.")
    create(ADMIN, tag="services=vat", key="flat-rate-rule", body="Review flat-rate eligibility each April.")
    create(ADMIN, tag="services=vat", key="cash-accounting", body="Cash accounting applies below £1.35m.")
    create(
        ADMIN,
        scope="root.pennine-joinery.vat",
        key="vat-policy",
        body="Pennine Joinery is on the flat-rate scheme.",
    )
    create(ADMIN, scope="root.acme.vat", key="vat-policy", body="Acme files quarterly.")


def headers(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("<!-- ") and "priority:" in line]


def test_priorities_follow_depth_and_bucket() -> None:
    assert [priority(2, b) for b in ("layer", "value", "scoped")] == [7, 8, 9]
    assert [priority(0, b) for b in ("layer", "value", "scoped")] == [1, 2, 3]


def test_golden_bundle_for_the_seed_tree(services: Services) -> None:
    seed_tree(services)
    bundle = services.retrieval.retrieve(ADMIN, "root.pennine-joinery.vat")
    ids = {b.key: b.memory_id for b in bundle.blocks}
    expected = (GOLDEN / "pennine_joinery_vat.md").read_text()
    for key, memory_id in ids.items():
        expected = expected.replace(f"{{{key}}}", memory_id)
    assert bundle.markdown == expected


def test_emission_order_is_scoped_then_layer_wide_then_value_targeted_by_key(services: Services) -> None:
    seed_tree(services)
    blocks = services.retrieval.retrieve(ADMIN, "root.pennine-joinery.vat").blocks
    assert [(b.depth, b.priority, b.key) for b in blocks] == [
        (0, 3, "escalation"),
        (0, 3, "house-style"),
        (1, 6, "year-end"),
        (1, 4, "engagement-letter"),
        (1, 5, "contact"),
        (2, 9, "vat-policy"),
        (2, 7, "deadlines"),
        (2, 8, "cash-accounting"),
        (2, 8, "flat-rate-rule"),
    ]


def test_header_formats_are_verbatim(services: Services) -> None:
    seed_tree(services)
    bundle = services.retrieval.retrieve(ADMIN, "root.pennine-joinery.vat")
    flat = next(b for b in bundle.blocks if b.key == "flat-rate-rule")
    lines = headers(bundle.markdown)
    assert "<!-- scoped: root.pennine-joinery.vat | priority: 9 | key: vat-policy -->" in lines
    assert f"<!-- tagged: services=vat | priority: 8 | key: flat-rate-rule | memory_id: {flat.memory_id} -->" in lines
    assert any(
        line.startswith("<!-- tagged: services=* | priority: 7 | key: deadlines | memory_id: ") for line in lines
    )


def test_bundle_opens_with_the_contract(services: Services) -> None:
    services.scopes.create("acme", "root.empty")
    bundle = services.retrieval.retrieve(ADMIN, "root.empty")
    assert bundle.blocks == []
    assert bundle.markdown == CONTRACT.format(path="root.empty", walk="root → root.empty")
    assert "3d+1" in bundle.markdown and "3d+3" in bundle.markdown and "conflict" in bundle.markdown


def test_unknown_path_is_scope_not_found(services: Services) -> None:
    with pytest.raises(ScopeNotFound):
        services.retrieval.retrieve(ADMIN, "root.nowhere")


def test_expired_memories_are_left_out(services: Services, clock) -> None:  # type: ignore[no-untyped-def]
    services.memories.create(
        ADMIN, scope="root", key="soon", body="Temporary.", valid_until=clock.now() + timedelta(hours=1)
    )
    services.memories.create(ADMIN, scope="root", key="always", body="Permanent.")
    assert [b.key for b in services.retrieval.retrieve(ADMIN, "root").blocks] == ["always", "soon"]
    clock.advance(hours=2)
    assert [b.key for b in services.retrieval.retrieve(ADMIN, "root").blocks] == ["always"]


def test_chained_renames_keep_old_paths_resolving_to_canonical_headers(services: Services) -> None:
    seed_tree(services)
    services.scopes.rename("acme", "root.pennine-joinery", "root.pennine")
    services.scopes.rename("acme", "root.pennine", "root.pj")
    services.scopes.rename("acme", "root.pj.vat", "root.pj.tax")
    for old in (
        "root.pennine-joinery.vat",
        "root.pennine.vat",
        "root.pj.vat",
        "root.pj.tax",
        "root.pennine.tax",
    ):
        bundle = services.retrieval.retrieve(ADMIN, old)
        assert bundle.canonical_path == "root.pj.tax"
        assert "<!-- scoped: root.pj.tax | priority: 9 | key: vat-policy -->" in bundle.markdown
        assert "pennine-joinery.vat |" not in bundle.markdown


def test_renaming_onto_an_existing_path_or_alias_conflicts(services: Services) -> None:
    services.scopes.create("acme", "root.a")
    services.scopes.create("acme", "root.b")
    with pytest.raises(Conflict):
        services.scopes.rename("acme", "root.a", "root.b")
    services.scopes.rename("acme", "root.a", "root.c")
    with pytest.raises(Conflict):
        services.scopes.rename("acme", "root.b", "root.a")  # root.a is now root.c's alias
    services.scopes.rename("acme", "root.c", "root.a")  # renaming back consumes its own alias
    assert services.scopes.resolve("acme", "root.c").path == "root.a"


def test_pending_work_is_visible_only_to_its_author(services: Services) -> None:
    writer = principal("acme", "wendy", Role.writer)
    other = principal("acme", "omar", Role.writer)
    services.memories.create(writer, scope="root", key="draft", body="Unreviewed idea.")
    assert headers(services.retrieval.retrieve(writer, "root").markdown) == [
        "<!-- scoped: root | priority: 3 | key: draft | pending -->"
    ]
    assert services.retrieval.retrieve(other, "root").blocks == []


def test_archived_memories_leave_the_bundle(services: Services) -> None:
    memory, _ = services.memories.create(ADMIN, scope="root", key="old", body="Obsolete.")
    services.memories.archive(ADMIN, memory.memory_id)
    assert services.retrieval.retrieve(ADMIN, "root").blocks == []
    services.memories.create(ADMIN, scope="root", key="old", body="Replacement.")  # the key is free again


keys = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(keys, st.sampled_from(["root", "root.x", "root.x.y"])), max_size=12, unique=True))
def test_same_state_gives_byte_identical_bundles(services: Services, entries: list[tuple[str, str]]) -> None:
    tenant = f"t{abs(hash(tuple(entries))) % 10**9}"
    caller = principal(tenant, "alice", Role.admin)
    services.scopes.create(tenant, "root.x.y", parents=True)
    for key, scope in entries:
        services.memories.create(caller, scope=scope, key=key, body=f"body of {key}")
    first = services.retrieval.retrieve(caller, "root.x.y").markdown
    assert services.retrieval.retrieve(caller, "root.x.y").markdown == first
    sorted_keys = [b.key for b in services.retrieval.retrieve(caller, "root.x.y").blocks if b.depth == 2]
    assert sorted_keys == sorted(sorted_keys)
