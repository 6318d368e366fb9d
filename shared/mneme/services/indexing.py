"""Keeping the derived search index in step with the records.

Records are written first; `Indexer` then upserts their documents. A failed index write leaves
the episode marked unindexed, and `sweep` (run by the local server, `mneme reindex --pending`
and the scheduled repair in AWS) retries it until it lands. `rebuild` recreates a tenant's
index from records alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from mneme.errors import MnemeError
from mneme.language.text import date_words
from mneme.models import Episode, Memory, context_session, session_position
from mneme.observability import count, logger
from mneme.ports import ConsolidationStore, Embedder, EpisodeStore, FactStore, MemoryStore, SearchIndex
from mneme.records import Fact
from mneme.search_models import IndexDocument, metadata_terms, shared_terms
from mneme.services.scopes import ScopeService


class IndexingStore(EpisodeStore, MemoryStore, FactStore, ConsolidationStore, Protocol):
    """The record store's roles indexing reads (and the backfills it runs)."""


def speaker(episode: Episode) -> str | None:
    """Who said it: `metadata.speaker` (a string), given to `remember` for a conversation's turns."""
    value = episode.metadata.get("speaker")
    return value.strip() or None if isinstance(value, str) else None


# A conversational turn is indexed with the CONTEXT_TURNS turns said just before it in its session, those
# within CONTEXT_WINDOW of it: a reply follows what was just said (bench/conversations.py R@10 with 1, 2, 3
# turns: 0.719, 0.759, 0.756; none: 0.689). Observations hours apart that share a session id get none.
CONTEXT_TURNS = 2
CONTEXT_WINDOW = timedelta(hours=1)


def episode_text(episode: Episode, context: Sequence[str] = ()) -> str:
    """What is indexed for BM25: the content led by its speaker, when one is given ('Maya: I moved to
    Berlin'; a question naming Maya then matches her own turns, which rarely say her name), then the
    conversational context (the turns just before it in its session, see `Indexer.session_context`:
    'Which part of the city?' makes 'Kralingen, near the lake' findable by a question about the district),
    plus the date in words, so '4 March 2026' or '2026-03-04' in a query can match. The vector is the
    content's alone (the speaker in the embedded text measured worse on bench/conversations.py, and so did
    the context)."""
    text = episode.search_text or episode.content
    who = speaker(episode)
    before = "".join(f"\n{turn}" for turn in context)
    return f"{who + ': ' if who else ''}{text}{before}\n\n{date_words(episode.occurred_at)}"


def memory_text(memory: Memory) -> str:
    """What recall searches a memory by: its `search_text` when it has one, else its key, summary, tags,
    triggers and body."""
    if memory.search_text is not None:
        return memory.search_text
    parts = [
        memory.key.replace("-", " "),
        memory.summary or "",
        " ".join(memory.tags),
        " ".join(memory.triggers),
        memory.body,
    ]
    return "\n".join(part for part in parts if part)


def fact_text(fact: Fact) -> str:
    triple = " ".join(part for part in (fact.entity, fact.property, fact.value) if part)
    return f"{triple}\n{fact.summary}" if triple else fact.summary


@dataclass(frozen=True)
class Rebuilt:
    """What `Indexer.rebuild` did: documents written, episodes added to their store's session index, and
    consolidation runs listed by start time (records of older versions of a store, completed on the way)."""

    documents: int
    sessions: int
    runs: int = 0


@dataclass
class Indexer:
    store: IndexingStore
    scopes: ScopeService
    embedder: Embedder
    index: SearchIndex

    def _ancestors(self, tenant: str, scope_id: str) -> list[str]:
        return [scope.scope_id for scope in self.scopes.chain_of(tenant, scope_id).chain]

    def ancestors_of(self, scopes: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
        """The ancestor ids (root first, the scope last) of every (tenant, scope_id) in `scopes`: one store
        read per tree level and tenant (`ScopeService.chains_of`), not one per scope and level."""
        by_tenant: dict[str, list[str]] = {}
        for tenant, scope_id in scopes:
            by_tenant.setdefault(tenant, []).append(scope_id)
        ancestors = {}
        for tenant, scope_ids in by_tenant.items():
            chains = self.scopes.chains_of(tenant, scope_ids)
            for scope_id in dict.fromkeys(scope_ids):
                chain = chains.get(scope_id) or self.scopes.chain_of(tenant, scope_id)  # raises ScopeNotFound
                ancestors[(tenant, scope_id)] = [scope.scope_id for scope in chain.chain]
        return ancestors

    def episode_documents(self, episodes: Sequence[Episode]) -> list[IndexDocument]:
        """Their documents; vectors of another model (or none) are embedded afresh."""
        stale = [e for e in episodes if e.vector is None or e.model_id != self.embedder.model_id]
        fresh: dict[str, list[float]] = {}
        if stale:
            vectors = self.embedder.embed([e.search_text or e.content for e in stale])
            fresh = {e.episode_id: v.tolist() for e, v in zip(stale, vectors, strict=True)}
        return self._documents(episodes, fresh)

    def draft_documents(self, episodes: Sequence[Episode]) -> dict[str, IndexDocument]:
        """The documents of episodes not yet stored, by id, but their vectors: what `remember` builds while
        the model embeds them, and hands to `index_episodes` once they are stored with their vectors.
        Empty when a read fails (`index_episodes` then builds them itself, and reports the failure)."""
        try:
            return {doc.doc_id: doc for doc in self._documents(episodes, {})}
        except MnemeError:
            return {}

    def _documents(self, episodes: Sequence[Episode], vectors: dict[str, list[float]]) -> list[IndexDocument]:
        context = self.session_context(episodes)
        ancestors = self.ancestors_of((e.tenant, e.scope_id) for e in episodes)
        return [
            IndexDocument(
                tenant=episode.tenant,
                doc_id=episode.episode_id,
                kind="episode",
                scope_id=episode.scope_id,
                ancestor_ids=ancestors[(episode.tenant, episode.scope_id)],
                text=episode_text(episode, context.get(episode.episode_id, ())),
                dates=date_words(episode.occurred_at),
                vector=vectors.get(episode.episode_id, episode.vector),
                model_id=self.embedder.model_id,
                occurred_at=episode.occurred_at,
                tier=episode.tier,
                session_id=episode.session_id,
                metadata_terms=metadata_terms(episode.metadata),
            )
            for episode in episodes
        ]

    def session_context(self, episodes: Sequence[Episode]) -> dict[str, list[str]]:
        """The texts of the CONTEXT_TURNS turns before each episode that has a `session_id`: the same
        tenant, scope and session, before it in the session's order (`SessionPosition`: said earlier, or at
        the same time and given before it) and said at most CONTEXT_WINDOW before it, oldest first. A short
        reply ('Sage green, and the trim white.') is indexed with the question it answers, also in a chat
        log that gives every turn of a session one time. From the batch and the records (a turn remembered
        alone finds the ones remembered before it): one store read per session in the batch, and one more
        per episode that read did not reach below."""
        groups: dict[tuple[str, str, str], list[Episode]] = {}
        for episode in episodes:
            if (session := context_session(episode)) is not None:
                groups.setdefault((episode.tenant, episode.scope_id, session), []).append(episode)
        context: dict[str, list[str]] = {}
        for (tenant, scope_id, session_id), group in groups.items():
            known = {e.episode_id: e for e in group}
            limit = len(group) + CONTEXT_TURNS
            found = self.store.session_episodes(
                tenant, scope_id, session_id, max(session_position(e) for e in group), limit
            )
            known.update((e.episode_id, e) for e in found)
            for episode in group:
                at = session_position(episode)
                reached = sum(session_position(e) < at for e in found) >= CONTEXT_TURNS
                if len(found) == limit and not reached:  # the read stopped above this turn's predecessors
                    more = self.store.session_episodes(tenant, scope_id, session_id, at, CONTEXT_TURNS)
                    known.update((e.episode_id, e) for e in more)
            timeline = sorted(
                (e for e in known.values() if not e.archived), key=lambda e: (session_position(e), e.episode_id)
            )
            for episode in group:
                at, when = session_position(episode), episode.occurred_at
                # differences, not `when - CONTEXT_WINDOW` (no overflow at year 1)
                before = [e for e in timeline if session_position(e) < at and when - e.occurred_at <= CONTEXT_WINDOW]
                before = before[-CONTEXT_TURNS:]
                if before:
                    context[episode.episode_id] = [e.search_text or e.content for e in before]
        return context

    def index_episodes(self, episodes: Sequence[Episode], drafts: Mapping[str, IndexDocument] = {}) -> bool:
        """Upsert and mark indexed; False (logged, left for the sweep) when the index fails."""
        if not self.upsert_episodes(episodes, drafts):
            return False
        by_tenant: dict[str, list[str]] = {}
        for episode in episodes:
            by_tenant.setdefault(episode.tenant, []).append(episode.episode_id)
        for tenant, ids in by_tenant.items():
            self.store.mark_indexed(tenant, ids)
        return True

    def upsert_episodes(self, episodes: Sequence[Episode], drafts: Mapping[str, IndexDocument] = {}) -> bool:
        """Their documents into the index, the store untouched; False (logged) when the index fails.
        `drafts`: the documents of some of them built before they had vectors (`draft_documents`, from the
        very episodes given here), which then only take their vectors."""
        if not episodes:
            return True
        try:
            built = self.episode_documents([e for e in episodes if e.episode_id not in drafts])
            ready = [
                drafts[e.episode_id].model_copy(update={"vector": e.vector}) for e in episodes if e.episode_id in drafts
            ]
            self.index.upsert([*ready, *built])
        except MnemeError as e:
            logger.warning("index write failed; left for the sweep", extra={"code": e.code, "count": len(episodes)})
            return False
        return True

    def index_facts(
        self,
        facts: Sequence[Fact],
        sources: Mapping[str, Episode] | None = None,
        ancestors: Mapping[tuple[str, str], list[str]] | None = None,
    ) -> None:
        """Facts carry their vectors (embedded at commit) and the metadata of their source episodes (a
        metadata filter finds the facts drawn from what it selects); `sources`: those episodes when the caller
        has read them (a source absent from it is gone), else they are read here; `ancestors`: their scopes'
        ancestor ids (`ancestors_of`) when the caller has them. A failed write is repaired by `rebuild`."""
        ancestors = ancestors or self.ancestors_of((f.tenant, f.scope_id) for f in facts)
        try:
            found: dict[str, Episode] = dict(sources or {})
            for tenant in {f.tenant for f in facts} if sources is None else ():
                wanted = [i for f in facts if f.tenant == tenant for i in f.source_episode_ids]
                found.update(self.store.get_episodes(tenant, wanted, vectors=False))
            docs = [
                IndexDocument(
                    tenant=fact.tenant, doc_id=fact.fact_id, kind="fact", scope_id=fact.scope_id,
                    ancestor_ids=ancestors[(fact.tenant, fact.scope_id)], text=fact_text(fact), vector=fact.vector,
                    model_id=fact.model_id, occurred_at=fact.valid_from, tier=fact.tier,
                    metadata_terms=shared_terms([found[i].metadata for i in fact.source_episode_ids if i in found]),
                )
                for fact in facts
            ]  # fmt: skip
            self.index.upsert(docs)
        except MnemeError as e:
            logger.warning("fact index write failed", extra={"code": e.code, "count": len(facts)})

    def memory_document(self, memory: Memory) -> IndexDocument:
        if memory.kind == "scoped":
            assert memory.scope_id is not None
            scope_id = memory.scope_id
        else:
            scope_id = self.scopes.root(memory.tenant).scope_id  # tagged guidance is tenant-wide
        vector = self.embedder.embed([memory_text(memory)])[0].tolist()
        return IndexDocument(
            tenant=memory.tenant,
            doc_id=memory.memory_id,
            kind="memory",
            scope_id=scope_id,
            ancestor_ids=self._ancestors(memory.tenant, scope_id),
            text=memory_text(memory),
            vector=vector,
            model_id=self.embedder.model_id,
            occurred_at=memory.updated_at,
            visible_to=None if memory.status == "published" else memory.author,
        )

    def on_memory_change(self, memory: Memory) -> None:
        """Called after every memory write; archived memories, and those with nothing to search by (an empty
        `search_text`), leave the index."""
        try:
            if memory.status == "archived" or not memory_text(memory).strip():
                self.index.delete(memory.tenant, [memory.memory_id])
            else:
                self.index.upsert([self.memory_document(memory)])
        except MnemeError as e:  # the record is the truth; `rebuild` restores the index
            logger.warning("memory index write failed", extra={"code": e.code, "memory_id": memory.memory_id})

    def sweep(self, limit: int = 500, progress: Callable[[int], None] | None = None) -> int:
        """Index every episode stored but not confirmed in the index. Returns how many landed, and
        reports what is still waiting as the `IndexRepairBacklog` metric."""
        done = 0
        while batch := self.store.list_unindexed(limit):
            if not self.index_episodes(batch):
                break
            done += len(batch)
            if progress:
                progress(done)
        backlog = len(self.store.list_unindexed(1000))
        count("IndexRepairBacklog", backlog)
        return done

    def rebuild(self, tenant: str, progress: Callable[[int], None] | None = None) -> Rebuilt:
        """Recreate a tenant's documents from records (re-embedding vectors of another model). First the
        store's session index is completed (`backfill_sessions`), so that turns written before it existed
        are indexed with the turns said before them, and give context to the turns after them; and older
        runs are listed by start time (`backfill_runs`)."""
        sessions, runs = self.store.backfill_sessions(tenant), self.store.backfill_runs(tenant)
        self.index.clear_tenant(tenant)
        count = 0
        for batch in self.store.iter_episodes(tenant):
            batch = [e for e in batch if not e.archived]
            self.index.upsert(self.episode_documents(batch))
            self.store.mark_indexed(tenant, [e.episode_id for e in batch if not e.indexed])
            count += len(batch)
            if progress:
                progress(count)
        facts = [f for f in self.store.list_facts(tenant) if f.status != "archived"]
        stale = [f for f in facts if f.vector is None or f.model_id != self.embedder.model_id]
        if stale:
            vectors = self.embedder.embed([f.summary for f in stale])
            fresh = {f.fact_id: v.tolist() for f, v in zip(stale, vectors, strict=True)}
            facts = [f.model_copy(update={"vector": fresh[f.fact_id], "model_id": self.embedder.model_id})
                     if f.fact_id in fresh else f for f in facts]  # fmt: skip
        for start in range(0, len(facts), 500):
            self.index_facts(facts[start : start + 500])
        count += len(facts)
        for memory in self.store.list_memories(tenant):
            if memory_text(memory).strip():
                self.index.upsert([self.memory_document(memory)])
                count += 1
        return Rebuilt(documents=count, sessions=sessions, runs=runs)
