"""Export a subtree to JSON lines, import it elsewhere idempotently, and erase a subtree for good.

Export keeps record ids, so importing the same file twice changes nothing, and tagged headers in
retrieve bundles stay byte-identical after a move to a fresh tenant. Vectors are optional: on
import they are reused when the model matches and recomputed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mneme import paths, sttp
from mneme.errors import InvalidInput
from mneme.models import Episode
from mneme.ports import Clock
from mneme.services.importing import FORMAT, Imported, Importer, PortableStore
from mneme.services.indexing import Indexer
from mneme.services.scopes import ScopeService

# What an export does not carry (the header lists it): credentials and the working state of the service.
LEAVES_OUT = [
    "API keys (create new ones for the tenant that imports)",
    "structure drafts not yet published",
    "consolidation runs, checkpoints and leases (the importing tenant's next run starts afresh)",
    "recall session deliveries (which ids a session was already given)",
]


@dataclass
class PortabilityService:
    store: PortableStore
    clock: Clock
    scopes: ScopeService
    indexer: Indexer

    def export(self, tenant: str, path: str = "root", *, vectors: bool = False) -> Iterator[dict[str, Any]]:
        tree = self.scopes.subtree(tenant, path)
        root_path = tree[0][0]
        by_id = {scope.scope_id: scope_path for scope_path, scope in tree}
        yield {
            "type": "header",
            "format": FORMAT,
            "root": root_path,
            "exported_at": self.clock.now().isoformat(),
            "model_id": self.indexer.embedder.model_id,
            "leaves_out": LEAVES_OUT,
        }
        yield {"type": "layers", "layers": self.store.get_layers(tenant)}
        for scope_path, _ in tree:
            yield {"type": "scope", "path": scope_path}
        for scope_path, scope in tree:
            for segment, target in self.store.list_aliases(tenant, scope.scope_id):
                if target in by_id:
                    yield {"type": "alias", "path": f"{scope_path}.{segment}", "target": by_id[target]}
        drop = {"tenant", "scope_id"} | (set() if vectors else {"vector"})
        exported: list[str] = []
        for memory in self.store.list_memories(tenant, archived=True):  # archived ones too: rejected, withdrawn
            if memory.scope_id in by_id or (memory.scope_id is None and root_path == paths.ROOT):
                exported.append(memory.memory_id)
                history = [
                    h.model_dump(mode="json", exclude={"tenant"})
                    for h in self.store.list_history(tenant, memory.memory_id)
                ]
                yield {
                    "type": "memory",
                    "scope": by_id.get(memory.scope_id or ""),
                    "history": history,
                    **memory.model_dump(mode="json", exclude={"tenant", "scope_id"}),
                }
        for memory_id in exported:  # every author's revisions of them: open, approved and rejected
            for revision in self.store.list_revisions(tenant, memory_id=memory_id, status=None):
                yield {"type": "revision", **revision.model_dump(mode="json", exclude={"tenant"})}
        for batch in self.store.iter_episodes(tenant):
            for episode in batch:
                if episode.scope_id in by_id:
                    yield {
                        "type": "episode",
                        "scope": by_id[episode.scope_id],
                        **episode.model_dump(mode="json", exclude=drop),
                    }
        for scope_path, scope in tree:
            for fact in self.store.list_facts(tenant, scope.scope_id):
                yield {"type": "fact", "scope": scope_path, **fact.model_dump(mode="json", exclude=drop)}

    def export_sttp(self, tenant: str, path: str = "root") -> Iterator[str]:
        """Every episode and roll-up of a subtree as a strict-valid STTP node (raw nodes kept verbatim)."""
        tree = self.scopes.subtree(tenant, path)
        in_tree = {scope.scope_id for _, scope in tree}
        for batch in self.store.iter_episodes(tenant):
            for episode in batch:
                if episode.scope_id in in_tree and not episode.archived:
                    yield episode_node(episode)
        for _, scope in tree:
            for fact in self.store.list_facts(tenant, scope.scope_id):
                if fact.tier != "raw" and fact.status == "active":
                    node = sttp.episode_to_node(fact.summary, fact.tier, f"rollup-{fact.fact_id}", fact.valid_from)
                    yield sttp.render(node)

    def import_(
        self,
        tenant: str,
        lines: Iterable[dict[str, Any]],
        progress: Callable[[dict[str, int]], None] | None = None,
        *,
        keep_going: bool = False,
    ) -> Imported:
        """Write what is missing, all or nothing (or, with `keep_going`, record by record: each record that fails
        is reported); records whose id exists are left alone. See `mneme.services.importing`."""
        return Importer(self.store, self.scopes, self.indexer, tenant, keep_going).run(lines, progress)

    def erase(self, tenant: str, path: str, *, dry_run: bool = True) -> dict[str, Any]:
        """Delete a subtree's scopes, memories, episodes and facts for good (right to erasure)."""
        tree = self.scopes.subtree(tenant, path)
        if tree[0][1].parent_id is None:
            raise InvalidInput("root cannot be erased; erase its children", code="invalid_erase")
        counts, ids = self.store.erase_scopes(tenant, [scope.scope_id for _, scope in tree], dry_run=dry_run)
        if ids:
            self.indexer.index.delete(tenant, ids)
        return {"path": tree[0][0], "dry_run": dry_run, "counts": counts}


def episode_node(episode: Episode) -> str:
    if episode.format == "sttp" and sttp.parse(episode.content, "strict").strict_valid:
        return episode.content
    node = sttp.episode_to_node(
        episode.search_text or episode.content,
        episode.tier,
        episode.session_id or f"episode-{episode.episode_id}",
        episode.occurred_at,
        episode.structured,
    )
    return sttp.render(node)
