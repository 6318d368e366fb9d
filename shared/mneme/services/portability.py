"""Export a subtree to JSON lines, import it elsewhere idempotently, and erase a subtree for good.

Export keeps record ids, so importing the same file twice changes nothing, and tagged headers in
retrieve bundles stay byte-identical after a move to a fresh tenant. Vectors are optional: on
import they are reused when the model matches and recomputed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from mneme import paths, sttp
from mneme.errors import InvalidInput, ScopeNotFound
from mneme.models import Episode, HistoryEntry, Memory, Revision
from mneme.ports import Clock, EpisodeStore, ErasureStore, FactStore, MemoryStore, ScopeStore
from mneme.records import Fact
from mneme.services.indexing import Indexer
from mneme.services.scopes import ScopeService

FORMAT = "mneme-export/1"
# What an export does not carry (the header lists it): credentials and the working state of the service.
LEAVES_OUT = [
    "API keys (create new ones for the tenant that imports)",
    "structure drafts not yet published",
    "consolidation runs, checkpoints and leases (the importing tenant's next run starts afresh)",
    "recall session deliveries (which ids a session was already given)",
]


class PortableStore(ScopeStore, MemoryStore, EpisodeStore, FactStore, ErasureStore, Protocol):
    """The record store's roles export, import and erasure use."""


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
        self, tenant: str, lines: Iterable[dict[str, Any]], progress: Callable[[dict[str, int]], None] | None = None
    ) -> dict[str, int]:
        """Write what is missing; records whose id exists are left alone (a second import changes nothing)."""
        counts = {"scopes": 0, "aliases": 0, "memories": 0, "revisions": 0, "episodes": 0, "facts": 0, "skipped": 0}
        scope_ids: dict[str, str] = {}
        pending_episodes: list[Episode] = []
        pending_facts: list[Fact] = []

        def scope_id(path: str) -> str:
            if path not in scope_ids:
                scope_ids[path] = self._scope(tenant, path, counts)
            return scope_ids[path]

        for number, line in enumerate(lines, start=1):
            kind = line.get("type")
            if kind == "header":
                _check_header(number, line)
            elif kind == "layers":
                self._layers(tenant, line)
            elif kind == "scope":
                scope_id(line["path"])
            elif kind == "alias":
                parent_path, _, segment = line["path"].rpartition(".")
                counts["aliases"] += self.store.put_alias(
                    tenant, scope_id(parent_path), segment, scope_id(line["target"])
                )
            elif kind == "memory":
                self._memory(tenant, line, scope_id, counts)
            elif kind == "revision":
                self._revision(tenant, line, counts)
            elif kind == "episode":
                pending_episodes.append(
                    Episode.model_validate(
                        {**_fields(line), "tenant": tenant, "scope_id": scope_id(line["scope"]), "indexed": False}
                    )
                )
                if len(pending_episodes) >= 100:
                    self._episodes(tenant, pending_episodes, counts)
            elif kind == "fact":
                self._episodes(tenant, pending_episodes, counts)
                pending_facts.append(
                    Fact.model_validate({**_fields(line), "tenant": tenant, "scope_id": scope_id(line["scope"])})
                )
                if len(pending_facts) >= 100:
                    self._facts(tenant, pending_facts, counts)
            else:
                raise InvalidInput(f"line {number}: unknown record type {kind!r}", code="invalid_export")
            if progress and number % 100 == 0:
                progress(counts)
        self._episodes(tenant, pending_episodes, counts)
        self._facts(tenant, pending_facts, counts)
        return counts

    def _scope(self, tenant: str, path: str, counts: dict[str, int]) -> str:
        """The id of the scope at `path`, created (with its parents) when missing."""
        try:
            return self.scopes.resolve(tenant, path).scope.scope_id
        except ScopeNotFound:
            created = self.scopes.create(tenant, path, parents=True).scope.scope_id
            counts["scopes"] += 1
            return created

    def _layers(self, tenant: str, line: dict[str, Any]) -> None:
        if not self.store.get_layers(tenant):
            self.scopes.set_layers(tenant, {int(k): v for k, v in line["layers"].items()})

    def _revision(self, tenant: str, line: dict[str, Any], counts: dict[str, int]) -> None:
        revision = Revision.model_validate({**_fields(line), "tenant": tenant})
        if self.store.get_revision(tenant, revision.memory_id, revision.author) is not None:
            counts["skipped"] += 1
            return
        self.store.put_revision(revision)
        counts["revisions"] += 1

    def _memory(
        self, tenant: str, line: dict[str, Any], scope_id: Callable[[str], str], counts: dict[str, int]
    ) -> None:
        fields = _fields(line, drop={"history", "scope", "target"})
        memory = Memory.model_validate(
            {**fields, "tenant": tenant, "scope_id": scope_id(line["scope"]) if line.get("scope") else None}
        )
        if self.store.get_memory(tenant, memory.memory_id) is not None:
            counts["skipped"] += 1
            return
        self.store.create_memory(memory)
        for entry in line.get("history", []):
            self.store.add_history(HistoryEntry.model_validate({**entry, "tenant": tenant}))
        self.indexer.on_memory_change(memory)
        counts["memories"] += 1

    def _episodes(self, tenant: str, episodes: list[Episode], counts: dict[str, int]) -> None:
        if not episodes:
            return
        existing = self.store.get_episodes(tenant, [e.episode_id for e in episodes])
        new = [e for e in episodes if e.episode_id not in existing]
        counts["skipped"] += len(episodes) - len(new)
        stored, _ = self.store.put_episodes(new)
        self.indexer.index_episodes(stored)
        counts["episodes"] += len(new)
        episodes.clear()

    def _facts(self, tenant: str, facts: list[Fact], counts: dict[str, int]) -> None:
        """Store the new ones, embedded when the export carried no vectors of this model (else recall's
        vector channel and consolidation's reconcile would never see them)."""
        existing = self.store.get_facts(tenant, [f.fact_id for f in facts]) if facts else {}
        new = [f for f in facts if f.fact_id not in existing]
        counts["skipped"] += len(facts) - len(new)
        model = self.indexer.embedder.model_id
        stale = [i for i, f in enumerate(new) if f.vector is None or f.model_id != model]
        if stale:
            vectors = self.indexer.embedder.embed([new[i].summary for i in stale])
            for i, vector in zip(stale, vectors, strict=True):
                new[i] = new[i].model_copy(update={"vector": vector.tolist(), "model_id": model})
        if new:
            self.store.put_facts(new)
            self.indexer.index_facts(new)
        counts["facts"] += len(new)
        facts.clear()

    def erase(self, tenant: str, path: str, *, dry_run: bool = True) -> dict[str, Any]:
        """Delete a subtree's scopes, memories, episodes and facts for good (right to erasure)."""
        tree = self.scopes.subtree(tenant, path)
        if tree[0][1].parent_id is None:
            raise InvalidInput("root cannot be erased; erase its children", code="invalid_erase")
        counts, ids = self.store.erase_scopes(tenant, [scope.scope_id for _, scope in tree], dry_run=dry_run)
        if ids:
            self.indexer.index.delete(tenant, ids)
        return {"path": tree[0][0], "dry_run": dry_run, "counts": counts}


def _check_header(number: int, line: dict[str, Any]) -> None:
    if line.get("format") != FORMAT:
        raise InvalidInput(f"line {number}: not a {FORMAT} file", code="invalid_export")


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


def _fields(line: dict[str, Any], drop: set[str] | None = None) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k not in {"type", "scope", *(drop or set())}}
