"""Structure drafts: moves, merges, deletes and layer changes, previewed then published atomically.

A draft's operations compile, against the current state, into a `Plan` (every record change) and
a `Preview` (every path, alias, memory and record affected, every conflict). Publishing recompiles:
if the preview's fingerprint changed since the approver saw it, the publish is refused (409).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from mneme import paths
from mneme.errors import Conflict, Forbidden, InvalidInput, NotFound
from mneme.models import Episode, Memory, Principal, ResolvedScope, Role
from mneme.ports import Clock, ConsolidationStore, FactStore, MemoryStore, ScopeStore, StructureStore
from mneme.services.indexing import Indexer
from mneme.services.scopes import ScopeService, renamed_segment, validate_layers
from mneme.structure_models import (
    Delete,
    Draft,
    Layers,
    Merge,
    Move,
    Operation,
    Plan,
    Preview,
    Rename,
    ScopeChange,
)


class StructuringStore(StructureStore, ScopeStore, MemoryStore, FactStore, ConsolidationStore, Protocol):
    """The record store's roles structure drafts use."""


@dataclass
class _Tree:
    """The tenant's tree in memory, changed op by op."""

    nodes: dict[str, list[Any]]  # scope_id -> [parent_id, segment]
    before: dict[str, str]  # scope_id -> path before the draft
    removed: set[str] = field(default_factory=set)

    def path(self, scope_id: str) -> str:
        parts = []
        current: str | None = scope_id
        while current is not None:
            parent, segment = self.nodes[current]
            parts.append(segment)
            current = parent
        return ".".join(reversed(parts))

    def chain(self, scope_id: str) -> list[str]:
        ids: list[str] = []
        current: str | None = scope_id
        while current is not None:
            ids.append(current)
            current = self.nodes[current][0]
        return ids[::-1]

    def children(self, scope_id: str) -> list[str]:
        return sorted(i for i, (p, _) in self.nodes.items() if p == scope_id and i not in self.removed)

    def subtree(self, scope_id: str) -> list[str]:
        out, stack = [], [scope_id]
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(self.children(current))
        return out

    def child_named(self, parent: str, segment: str) -> str | None:
        return next((i for i in self.children(parent) if self.nodes[i][1] == segment), None)


@dataclass
class StructureService:
    store: StructuringStore
    clock: Clock
    scopes: ScopeService
    indexer: Indexer

    def create(self, caller: Principal, operations: list[Operation]) -> tuple[Draft, Preview]:
        draft = Draft(
            tenant=caller.tenant,
            draft_id=f"draft_{uuid.uuid4().hex[:16]}",
            author=caller.principal,
            operations=operations,
            created_at=self.clock.now(),
        )
        preview = self.compile(caller.tenant, operations)[1]
        self.store.put_draft(draft)
        return draft, preview

    def get(self, caller: Principal, draft_id: str) -> tuple[Draft, Preview]:
        draft = self._draft(caller, draft_id)
        return draft, self.compile(caller.tenant, draft.operations)[1]

    def publish(self, caller: Principal, draft_id: str, fingerprint: str) -> tuple[Draft, Preview]:
        if not caller.has(Role.approver):
            raise Forbidden("publishing a structure draft needs the approver role")
        draft = self._draft(caller, draft_id)
        if draft.status == "open" and self._resume(caller.tenant):  # a publish interrupted by a crash
            draft = self._draft(caller, draft_id)
            if draft.status == "published":
                empty = Preview(
                    path_changes=[], aliases=[], memories=[], records=[], conflicts=[], fingerprint=fingerprint
                )
                return draft, empty
        if draft.status != "open":
            raise Conflict(f"draft {draft_id} is {draft.status}", code="draft_closed")
        plan, preview = self.compile(caller.tenant, draft.operations)
        if preview.fingerprint != fingerprint:
            raise Conflict(
                "the tree changed since this preview: GET the draft again and review the new preview",
                code="stale_preview",
                details={"fingerprint": preview.fingerprint},
            )
        if preview.conflicts:
            raise Conflict("the draft has conflicts", code="draft_conflicts", details={"conflicts": preview.conflicts})
        published = draft.model_copy(
            update={"status": "published", "published_at": self.clock.now(), "published_by": caller.principal}
        )
        # No window: documents carry old and new ancestors while the records switch, then only the new.
        index = self.indexer.index
        archived = self._archived_ids(caller.tenant, plan)
        for scope_id, new in plan.ancestors.items():
            old = self._ancestors(caller.tenant, scope_id)
            index.update_ancestors(caller.tenant, scope_id, [*old, *(a for a in new if a not in old)])
        self.store.apply_structure(caller.tenant, plan, published, self.clock.now())
        for scope_id, new in plan.ancestors.items():
            index.update_ancestors(caller.tenant, scope_id, new)
        self._reindex_moved(caller.tenant, plan)
        if archived:
            index.delete(caller.tenant, archived)
        return published, preview

    def discard(self, caller: Principal, draft_id: str) -> tuple[Draft, Preview]:
        """Close an open draft without applying it; its preview is empty (nothing will change)."""
        if not caller.has(Role.approver):
            raise Forbidden("discarding a structure draft needs the approver role")
        draft = self._draft(caller, draft_id)
        if draft.status != "open":
            raise Conflict(f"draft {draft_id} is {draft.status}", code="draft_closed")
        discarded = draft.model_copy(update={"status": "discarded"})
        self.store.close_draft(discarded)  # conditional: a publish that won the race keeps its record
        return discarded, Preview(path_changes=[], aliases=[], memories=[], records=[], conflicts=[], fingerprint="")

    def _resume(self, tenant: str) -> bool:
        """Finish publishes a crash left half-applied (stores that publish through a journal), then
        rebuild the tenant's index from records so it follows them. True when one was finished."""
        resume = getattr(self.store, "resume_journals", None)
        if resume is None or not resume(tenant):
            return False
        self.indexer.rebuild(tenant)
        return True

    def _archived_ids(self, tenant: str, plan: Plan) -> list[str]:
        ids = list(plan.memory_archives)
        for scope_id in plan.record_archives:
            ids += [e.episode_id for e in self._episodes(tenant, scope_id)]
            ids += [f.fact_id for f in self.store.list_facts(tenant, scope_id)]
        return ids

    def _reindex_moved(self, tenant: str, plan: Plan) -> None:
        """Records that changed scope get documents under their new scope (vectors are reused)."""
        for target in sorted(set(plan.record_moves.values())):
            episodes = self._episodes(tenant, target)
            for start in range(0, len(episodes), 500):
                self.indexer.index.upsert(self.indexer.episode_documents(episodes[start : start + 500]))
            self.indexer.index_facts(self.store.list_facts(tenant, target))
        for memory_id in plan.memory_moves:
            memory = self.store.get_memory(tenant, memory_id)
            if memory is not None:
                self.indexer.on_memory_change(memory)

    def _episodes(self, tenant: str, scope_id: str) -> list[Episode]:
        return self.store.list_episodes_after(tenant, scope_id, (None, ""), datetime.max.replace(tzinfo=UTC), 10**7)

    def _ancestors(self, tenant: str, scope_id: str) -> list[str]:
        return [s.scope_id for s in self.scopes.chain_of(tenant, scope_id).chain]

    def _draft(self, caller: Principal, draft_id: str) -> Draft:
        draft = self.store.get_draft(caller.tenant, draft_id)
        if draft is None:
            raise NotFound(f"draft {draft_id} does not exist", code="draft_not_found")
        return draft

    # -- compiling ---------------------------------------------------------------------------
    def compile(self, tenant: str, operations: list[Operation]) -> tuple[Plan, Preview]:
        listing = self.scopes.subtree(tenant, paths.ROOT)
        tree = _Tree(
            nodes={s.scope_id: [s.parent_id, s.segment] for _, s in listing}, before={s.scope_id: p for p, s in listing}
        )
        plan, conflicts = Plan(), []
        memories_moved: list[dict[str, str]] = []
        records: list[dict[str, object]] = []
        for index, op in enumerate(operations):
            try:
                if isinstance(op, Move):
                    self._move(tenant, tree, op, plan)
                elif isinstance(op, Rename):
                    self._rename(tenant, tree, op, plan)
                elif isinstance(op, Merge):
                    self._merge(tenant, tree, op, plan, memories_moved, records)
                elif isinstance(op, Delete):
                    self._delete(tenant, tree, op, plan, memories_moved, records)
                elif isinstance(op, Layers):
                    self._layers(tenant, op, plan)
            except Conflict as e:
                conflicts.append(f"operation {index + 1} ({op.op}): {e.message}")
        changes: list[tuple[str, str | None]] = []
        for scope_id, old_path in sorted(tree.before.items(), key=lambda kv: kv[1]):
            if scope_id in tree.removed:
                changes.append((old_path, None))
                continue
            new_path = tree.path(scope_id)
            if new_path != old_path:
                changes.append((old_path, new_path))
                parent, segment = tree.nodes[scope_id]
                plan.scope_updates.append(
                    ScopeChange(scope_id=scope_id, parent_id=parent, segment=segment, depth=new_path.count("."))
                )
                plan.reindex_scopes.append(scope_id)
                plan.ancestors[scope_id] = tree.chain(scope_id)
        aliases = [(self._alias_path(tree, alias), tree.path(alias[2])) for alias in plan.aliases]
        layers = self.store.get_layers(tenant)
        after = plan.layers if plan.layers is not None else layers
        body = {
            "path_changes": changes,
            "aliases": aliases,
            "memories": memories_moved,
            "records": records,
            "conflicts": conflicts,
            "tagged": self._tagged_changes(tenant, tree, layers, after, plan.layer_renames),
        }
        fingerprint = hashlib.sha256(
            json.dumps([body, plan.model_dump(mode="json")], sort_keys=True).encode()
        ).hexdigest()[:24]
        return plan, Preview(**body, fingerprint=fingerprint)

    def _tagged_changes(
        self, tenant: str, tree: _Tree, before: dict[int, str], after: dict[int, str], renames: dict[str, str]
    ) -> list[dict[str, str]]:
        """Every tagged memory that starts or stops applying to a scope that stays, by the retrieval rule:
        at depth d, the memories of the layer named for d, layer-wide or valued with the segment at d."""
        tagged = [m for m in self.store.list_memories(tenant) if m.kind == "tagged"]
        old_targets = _targets(tagged, {})
        new_targets = _targets(tagged, renames)
        out: list[dict[str, str]] = []
        for scope_id, old_path in tree.before.items():
            if scope_id in tree.removed:
                continue
            new_path = tree.path(scope_id)
            was, now = _applying(old_path, before, old_targets), _applying(new_path, after, new_targets)
            for applies, memories in (("stops", was.keys() - now.keys()), ("starts", now.keys() - was.keys())):
                for memory_id in memories:
                    memory = was.get(memory_id) or now[memory_id]
                    tag = f"{renames.get(memory.layer or '', memory.layer)}={memory.value or '*'}"
                    out.append({"memory_id": memory_id, "key": memory.key, "tag": tag, "scope": new_path,
                                "applies": applies})  # fmt: skip
        return sorted(out, key=lambda e: (e["scope"], e["applies"], e["tag"], e["key"], e["memory_id"]))

    def layers_without_draft(self, caller: Principal, layers: dict[int, str]) -> dict[int, str]:
        """`PUT /v1/layers`: naming layers applies at once while no tagged guidance changes where it applies
        (first naming, a new depth, a name no memory uses); otherwise it is a structure change and needs a
        draft (409 `draft_required`, with the operation to post and the memories it would affect)."""
        validate_layers(layers)
        listing = self.scopes.subtree(caller.tenant, paths.ROOT)
        tree = _Tree(
            nodes={s.scope_id: [s.parent_id, s.segment] for _, s in listing}, before={s.scope_id: p for p, s in listing}
        )
        affected = self._tagged_changes(caller.tenant, tree, self.store.get_layers(caller.tenant), layers, {})
        if affected:
            operation = {"op": "layers", "layers": {str(d): n for d, n in sorted(layers.items())}}
            raise Conflict(
                f"this layer change would change where {len({a['memory_id'] for a in affected})} tagged "
                "memories apply: propose it as a structure draft (POST /v1/structure/drafts), review the "
                "preview, then publish it",
                code="draft_required",
                details={"draft_route": "POST /v1/structure/drafts", "operations": [operation],
                         "tagged": affected[:100]},
            )  # fmt: skip
        return self.scopes.set_layers(caller.tenant, layers)

    def rename_without_draft(
        self, caller: Principal, path: str, new_path: str, *, dry_run: bool = False
    ) -> Preview | tuple[ResolvedScope, str]:
        """`POST /v1/scopes/rename`: the preview a draft of it would show (`dry_run`), else the rename at once
        while it keeps every tagged memory where it applies; one that would not (a value-targeted tag names
        the old segment or the new one) needs a draft (409 `draft_required`, like a layer change)."""
        operation = Rename(op="rename", path=path, new_path=new_path)
        if dry_run:
            return self.compile(caller.tenant, [operation])[1]
        self.scopes.renaming(caller.tenant, path, new_path)  # its 400s first
        preview = self.compile(caller.tenant, [operation])[1]
        if preview.tagged:
            raise Conflict(
                f"this rename would change where {len({t['memory_id'] for t in preview.tagged})} tagged memories "
                "apply: propose it as a structure draft (POST /v1/structure/drafts), review the preview, then "
                "publish it",
                code="draft_required",
                details={"draft_route": "POST /v1/structure/drafts", "operations": [operation.model_dump()],
                         "tagged": preview.tagged[:100]},
            )  # fmt: skip
        return self.scopes.rename(caller.tenant, path, new_path)

    def _alias_path(self, tree: _Tree, alias: tuple[str, str, str]) -> str:
        parent, segment, _ = alias
        return f"{tree.before[parent]}.{segment}"

    def _find(self, tenant: str, tree: _Tree, path: str) -> str:
        scope_id = self.scopes.resolve(tenant, path).scope.scope_id
        if scope_id in tree.removed:
            raise Conflict(f"{path} is removed by an earlier operation")
        return scope_id

    def _place(self, tree: _Tree, scope_id: str, parent: str, plan: Plan) -> None:
        old_parent, segment = tree.nodes[scope_id]
        if tree.child_named(parent, segment) not in (None, scope_id):
            raise Conflict(f"{tree.path(parent)} already has a child named {segment!r}")
        if old_parent != parent:
            plan.aliases.append((old_parent, segment, scope_id))
            tree.nodes[scope_id][0] = parent

    def _move(self, tenant: str, tree: _Tree, op: Move, plan: Plan) -> None:
        scope_id, parent = self._find(tenant, tree, op.path), self._find(tenant, tree, op.new_parent)
        if tree.nodes[scope_id][0] is None:
            raise Conflict("root cannot move")
        if parent in tree.subtree(scope_id):
            raise Conflict(f"{op.path} cannot move under itself")
        deepest = max(tree.path(s).count(".") for s in tree.subtree(scope_id)) - tree.path(scope_id).count(".")
        if tree.path(parent).count(".") + 1 + deepest > paths.MAX_DEPTH:
            raise Conflict(f"the move would make paths deeper than {paths.MAX_DEPTH}")
        self._place(tree, scope_id, parent, plan)

    def _rename(self, tenant: str, tree: _Tree, op: Rename, plan: Plan) -> None:
        scope_id = self._find(tenant, tree, op.path)
        try:
            segment = renamed_segment(tree.path(scope_id), op.new_path)
        except InvalidInput as e:
            raise Conflict(e.message) from None
        parent, old_segment = tree.nodes[scope_id]
        if segment == old_segment:
            return
        if tree.child_named(parent, segment) is not None:
            raise Conflict(f"{tree.path(parent)} already has a child named {segment!r}")
        aliased = self.store.find_alias(tenant, parent, segment)
        if aliased not in (None, scope_id):
            raise Conflict(f"cannot rename onto {segment!r}: it is an alias of another scope")
        plan.aliases.append((parent, old_segment, scope_id))
        tree.nodes[scope_id][1] = segment

    def _merge(
        self,
        tenant: str,
        tree: _Tree,
        op: Merge,
        plan: Plan,
        moved: list[dict[str, str]],
        records: list[dict[str, object]],
    ) -> None:
        source, target = self._find(tenant, tree, op.path), self._find(tenant, tree, op.into)
        if source == target or target in tree.subtree(source) or tree.nodes[source][0] is None:
            raise Conflict(f"{op.path} cannot merge into {op.into}")
        for child in tree.children(source):
            self._place(tree, child, target, plan)
        taken = {m.key for m in self.store.list_scoped_memories(tenant, target)}
        for memory in self.store.list_scoped_memories(tenant, source):
            if memory.key in taken:
                raise Conflict(f"key collision: {memory.key!r} exists in both {op.path} and {op.into}")
            plan.memory_moves[memory.memory_id] = target
            moved.append(
                {"memory_id": memory.memory_id, "key": memory.key, "from": tree.path(source), "to": tree.path(target)}
            )
        parent, segment = tree.nodes[source]
        plan.record_moves[source] = target
        records.append({"from": tree.path(source), "to": tree.path(target), "action": "move"})
        plan.scope_removals.append(source)
        plan.aliases.append((parent, segment, target))
        tree.removed.add(source)

    def _delete(
        self,
        tenant: str,
        tree: _Tree,
        op: Delete,
        plan: Plan,
        moved: list[dict[str, str]],
        records: list[dict[str, object]],
    ) -> None:
        root = self._find(tenant, tree, op.path)
        if tree.nodes[root][0] is None:
            raise Conflict("root cannot be deleted")
        doomed = tree.subtree(root)
        into = self._find(tenant, tree, op.into) if op.records == "move" and op.into else None
        if op.records == "move" and (into is None or into in doomed):
            raise Conflict("records: move needs 'into', a scope outside the deleted subtree")
        for scope_id in doomed:
            for memory in self.store.list_scoped_memories(tenant, scope_id):
                plan.memory_archives.append(memory.memory_id)
                moved.append(
                    {"memory_id": memory.memory_id, "key": memory.key, "from": tree.path(scope_id), "to": "archived"}
                )
            if into is not None:
                plan.record_moves[scope_id] = into
            else:
                plan.record_archives.append(scope_id)
            records.append({"from": tree.path(scope_id), "to": tree.path(into) if into else None, "action": op.records})
        plan.scope_removals.extend(doomed)
        tree.removed.update(doomed)

    def _layers(self, tenant: str, op: Layers, plan: Plan) -> None:
        for depth, name in op.layers.items():
            if not 1 <= depth <= paths.MAX_DEPTH:
                raise Conflict(f"layer depth {depth} must be between 1 and {paths.MAX_DEPTH}")
            paths.validate_segment(name, field="layer name")
        if len(set(op.layers.values())) != len(op.layers):
            raise Conflict("layer names must be distinct")
        current = self.store.get_layers(tenant)
        plan.layers = dict(sorted(op.layers.items()))
        plan.layer_renames = {
            current[d]: op.layers[d] for d in current if d in op.layers and current[d] != op.layers[d]
        }


def _targets(tagged: list[Memory], renames: dict[str, str]) -> dict[tuple[str, str | None], list[Memory]]:
    """Tagged memories by (layer name, value); value None is layer-wide."""
    out: dict[tuple[str, str | None], list[Memory]] = {}
    for memory in tagged:
        layer = memory.layer or ""
        out.setdefault((renames.get(layer, layer), memory.value), []).append(memory)
    return out


def _applying(
    path: str, layers: dict[int, str], targets: dict[tuple[str, str | None], list[Memory]]
) -> dict[str, Memory]:
    """The tagged memories that apply at `path` under `layers`, by id."""
    out: dict[str, Memory] = {}
    for depth, segment in enumerate(path.split(".")[1:], start=1):
        layer = layers.get(depth)
        if layer is not None:
            for memory in (*targets.get((layer, None), ()), *targets.get((layer, segment), ())):
                out[memory.memory_id] = memory
    return out
