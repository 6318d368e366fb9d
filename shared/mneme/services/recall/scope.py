"""Engram's scope rule for curated memories in recall: local guidance outranks global guidance.

A memory attached below root (scoped to a deeper scope, or tagged to a layer) is workspace guidance and
scores SCOPE_FACTOR times higher than one attached to root. Memories with the same body (compared
without case or spacing) are one piece of guidance: a copy less local than another — by the priority
the bundle gives it (scoped 3d+3, value-targeted 3d+2, layer-wide 3d+1) — is omitted as
`duplicate_of:<id>` of the most local one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mneme.models import Memory
from mneme.services.curation.retrieval import priority

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

SCOPE_FACTOR = 1.1
GLOBAL = priority(0, "scoped")  # a memory scoped to root; anything more local is workspace guidance


def locality(memory: Memory, depth_of_scope: Callable[[str], int], layers: dict[int, str]) -> int:
    """The bundle priority the memory has where it applies: higher is more local (root-scoped is 3)."""
    if memory.kind == "scoped":
        return priority(depth_of_scope(memory.scope_id or ""), "scoped")
    depth = next((d for d, name in layers.items() if name == memory.layer), 0)
    return priority(depth, "value" if memory.value is not None else "layer")


def same_guidance(memory: Memory) -> str:
    return " ".join(memory.body.split()).casefold()


def less_local(where: dict[str, int], bodies: dict[str, str]) -> dict[str, str]:
    """`where`: memory id → locality; `bodies`: memory id → `same_guidance`. The copies to drop (a more
    local copy of the same guidance exists), each with the id of the most local copy (the smaller id
    among equals). Copies equally local (the same rule in two sibling scopes) all stay."""
    best: dict[str, str] = {}
    for memory_id in sorted(where, key=lambda i: (-where[i], i)):
        best.setdefault(bodies[memory_id], memory_id)
    return {i: best[bodies[i]] for i in where if where[i] < where[best[bodies[i]]]}


def local_over_global(run: Run, candidates: list[Candidate]) -> list[tuple[str, str]]:
    """The lifecycle stage's scope rule: local memories scored ×SCOPE_FACTOR; the less local copies, to drop."""
    memories = [c for c in candidates if isinstance(c.record, Memory)]
    if not memories:
        return []
    tenant = run.flt.tenant
    tagged = any(isinstance(c.record, Memory) and c.record.kind == "tagged" for c in memories)
    layers = run.deps.store.get_layers(tenant) if tagged else {}

    def depth(scope_id: str) -> int:  # the chains lifecycle read for every candidate at once
        found = run.chains.get(scope_id) or run.deps.scopes.chain_of(tenant, scope_id)
        return found.scope.depth

    where: dict[str, int] = {}
    bodies: dict[str, str] = {}
    for candidate in memories:
        assert isinstance(candidate.record, Memory)
        where[candidate.id] = locality(candidate.record, depth, layers)
        bodies[candidate.id] = same_guidance(candidate.record)
        if where[candidate.id] > GLOBAL:
            candidate.scores["scope"] = SCOPE_FACTOR
            candidate.score *= SCOPE_FACTOR
    return [(i, f"duplicate_of:{kept}") for i, kept in less_local(where, bodies).items()]
