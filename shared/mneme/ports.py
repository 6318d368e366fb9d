"""The ports the domain talks to. Adapters live in `mneme.adapters`; `mneme.bootstrap` picks them.

Every method takes the tenant explicitly and every key an adapter writes starts with it:
isolation is part of the key, not a filter a caller can forget.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mneme.models import (
    ApiKey,
    Episode,
    Forgotten,
    HistoryEntry,
    Memory,
    Principal,
    Revision,
    Scope,
    SessionPosition,
)
from mneme.records import Checkpoint, Contradiction, Fact, Run
from mneme.search_models import Hit, IndexDocument, SearchFilter
from mneme.structure_models import Draft, Plan

if TYPE_CHECKING:  # vectors are numpy arrays, but a function that never embeds must not import numpy
    import numpy as np
    from numpy.typing import NDArray


class Clock(Protocol):
    def now(self) -> datetime:
        """Timezone-aware UTC now."""
        ...


class ScopeStore(Protocol):
    """The scope tree: scopes, the aliases a rename or an import leaves, and the tenant's layers."""

    def get_scope(self, tenant: str, scope_id: str) -> Scope | None: ...

    def get_scopes(self, tenant: str, scope_ids: Sequence[str]) -> dict[str, Scope]:
        """The tenant's scopes among `scope_ids`, by id, in one read (a batch); absent ids are left out."""
        ...

    def find_child(self, tenant: str, parent_id: str | None, segment: str) -> Scope | None:
        """The live scope named `segment` under `parent_id` (None for the tenant's root)."""
        ...

    def find_alias(self, tenant: str, parent_id: str, segment: str) -> str | None:
        """scope_id that the old name `segment` under `parent_id` now resolves to, if any."""
        ...

    def list_children(self, tenant: str, parent_id: str) -> list[Scope]:
        """Children of a scope, ordered by segment."""
        ...

    def create_scope(self, scope: Scope) -> None:
        """Create atomically; Conflict if the (parent, segment) slot holds a scope or an alias."""
        ...

    def rename_scope(self, tenant: str, scope_id: str, new_segment: str, now: datetime) -> Scope:
        """Atomically change a scope's segment and leave (parent, old segment) as an alias.

        Conflict if the new slot holds another scope or another scope's alias. An alias the
        scope itself left earlier under the new name is consumed (renaming back is allowed).
        """
        ...

    def get_layers(self, tenant: str) -> dict[int, str]: ...

    def put_layers(self, tenant: str, layers: dict[int, str]) -> None: ...

    def list_aliases(self, tenant: str, parent_id: str) -> list[tuple[str, str]]:
        """(old segment, scope_id) of the aliases left under a parent, by segment."""
        ...

    def put_alias(self, tenant: str, parent_id: str, segment: str, scope_id: str) -> bool:
        """Add an alias unless the slot is taken (by a scope or an alias); True when written."""
        ...


class MemoryStore(Protocol):
    """Curated memories, their authors' revisions under review, and their history."""

    def create_memory(self, memory: Memory) -> None:
        """Conflict if a non-archived memory with the same uniqueness key exists."""
        ...

    def update_memory(self, memory: Memory, expected_version: int) -> None:
        """Replace the record if its stored version equals `expected_version`, else Conflict.

        Archiving (status `archived`) frees the memory's uniqueness key.
        """
        ...

    def get_memory(self, tenant: str, memory_id: str) -> Memory | None: ...

    def get_memories(self, tenant: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """The memories found, by id, as `get_memory` reads each (archived ones included), in batched reads."""
        ...

    def list_scoped_memories(self, tenant: str, scope_id: str) -> list[Memory]:
        """Non-archived scoped memories of one scope, ordered by key then memory_id."""
        ...

    def find_scoped_memories(self, tenant: str, scope_id: str, key: str, author: str) -> list[Memory]:
        """The non-archived memories keyed `key` in scope `scope_id` that `author` may see, in one read of
        the store (never a listing of the scope): `author`'s own pending draft first, then the published
        memory; each when it exists. Another author's draft is never returned; expiry is not checked.
        """
        ...

    def list_tagged_memories(self, tenant: str, layer: str, value: str | None) -> list[Memory]:
        """Non-archived tagged memories of a layer; value None selects the layer-wide ones.

        Ordered by key then memory_id.
        """
        ...

    def list_memories(self, tenant: str, *, archived: bool = False) -> list[Memory]:
        """Every non-archived memory of a tenant (for rebuilding the index), ordered by memory_id;
        `archived=True` includes the archived ones (an author's rejected proposals)."""
        ...

    def put_revision(self, revision: Revision) -> None:
        """Upsert by (tenant, memory_id, author): one revision per author per memory."""
        ...

    def get_revision(self, tenant: str, memory_id: str, author: str) -> Revision | None: ...

    def list_revisions(
        self, tenant: str, *, memory_id: str | None = None, author: str | None = None, status: str | None = "open"
    ) -> list[Revision]: ...

    def add_history(self, entry: HistoryEntry) -> None:
        """Append; history is never rewritten."""
        ...

    def list_history(self, tenant: str, memory_id: str) -> list[HistoryEntry]:
        """Oldest first."""
        ...


class EpisodeStore(Protocol):
    """Episodes an agent remembered: writes, reads, sessions, the index's backlog, and what a session was
    already delivered."""

    def put_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        """Write, atomically, every episode whose id is new; return the stored record for each and the
        ids this call wrote.

        Ids derive from idempotency keys, so a retried batch returns the first records and writes
        nothing. An existing id whose `content_hash` differs is a Conflict (a reused key). The write is
        conditional: of concurrent calls putting the same id, exactly one has it in its written ids.
        """
        ...

    def get_episodes(
        self, tenant: str, episode_ids: Sequence[str], *, vectors: bool = True, consistent: bool = True
    ) -> dict[str, Episode]:
        """The episodes found, by id. `vectors=False`: the caller does not read `vector`, so a store may
        leave it out (None); parsing its floats is most of the cost of reading an episode. `consistent=False`:
        a store may answer from a read that lags writes by about a second (on DynamoDB, half the read units;
        an episode never changes, so only a forgetting that recent could be missed)."""
        ...

    def mark_indexed(self, tenant: str, episode_ids: Sequence[str]) -> None: ...

    def list_recent_episodes(
        self, tenant: str, since: datetime, limit: int, scope_ids: Sequence[str] | None = None
    ) -> list[Episode]:
        """Episodes written (created_at) at or after `since`, newest first, at most `limit` (a store may
        choose them by when they were stored, which is their creation but for a clock's skew); with
        `scope_ids`, only theirs and at most `limit` of each scope (a busy scope hides none of a quiet one's)."""
        ...

    def session_episodes(
        self, tenant: str, scope_id: str, session_id: str, before: SessionPosition, limit: int
    ) -> list[Episode]:
        """Up to `limit` episodes of one session in one scope that stand strictly before `before` in the
        session's order (`SessionPosition`: occurred_at, created_at, sequence), latest first: the turns a
        conversation's turn follows."""
        ...

    def backfill_sessions(self, tenant: str) -> int:
        """Make every episode of the tenant that has a `session_id` reachable by `session_episodes` (an
        episode a store wrote before it kept its session index is not); returns how many it added.
        Idempotent, tenant-scoped, and it never overwrites a concurrent write of the episode."""
        ...

    def list_unindexed(self, limit: int) -> list[Episode]:
        """Episodes of any tenant stored but not yet confirmed in the index, oldest first."""
        ...

    def iter_episodes(self, tenant: str, batch: int = 500) -> Iterator[list[Episode]]:
        """Every episode of a tenant, in pages (for rebuilding the index)."""
        ...

    def list_episodes(
        self, tenant: str, scope_ids: Sequence[str], before: tuple[datetime, str] | None, limit: int
    ) -> list[Episode]:
        """Up to `limit` episodes of these scopes, newest remembered first: (created_at, episode_id) descending,
        strictly below `before`. Vectors may be left out (None)."""
        ...

    def get_delivered(self, tenant: str, principal: str, session_id: str) -> set[str]:
        """Ids whose bodies a recall already delivered in this session (session delta)."""
        ...

    def add_delivered(self, tenant: str, principal: str, session_id: str, ids: Sequence[str]) -> None: ...


class ConsolidationStore(Protocol):
    """What consolidation keeps between runs: dirty scopes, per-scope checkpoints and leases, run records."""

    def mark_dirty(self, tenant: str, scope_ids: Sequence[str], now: datetime) -> None:
        """Note that scopes have episodes to consolidate (idempotent; `now` refreshes the mark)."""
        ...

    def list_dirty(self, tenant: str | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, scope_id) pairs with work, oldest mark first; None lists every tenant's."""
        ...

    def clear_dirty(self, tenant: str, scope_id: str, dirtied_before: datetime) -> None:
        """Remove the mark unless it was refreshed after `dirtied_before` (a write during the run)."""
        ...

    def list_episodes_after(
        self, tenant: str, scope_id: str, after: tuple[datetime | None, str], before: datetime, limit: int
    ) -> list[Episode]:
        """A scope's episodes ordered by (created_at, episode_id), strictly after `after`, created before
        `before`."""
        ...

    def get_checkpoint(self, tenant: str, scope_id: str) -> Checkpoint: ...

    def save_checkpoint(self, checkpoint: Checkpoint, expected_version: int) -> None:
        """Conflict unless the stored version equals `expected_version` (0 when none is stored)."""
        ...

    def acquire_lease(self, tenant: str, scope_id: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        """Take or renew a scope's consolidation lease; False while another owner holds a live one."""
        ...

    def release_lease(self, tenant: str, scope_id: str, owner: str) -> None: ...

    def put_run(self, run: Run) -> None: ...

    def get_run(self, tenant: str, run_id: str) -> Run | None: ...

    def list_runs(self, tenant: str, limit: int) -> list[Run]:
        """The tenant's most recent runs, newest first (by `started_at`, then `run_id`), at most `limit`."""
        ...

    def backfill_runs(self, tenant: str) -> int:
        """List by start time the tenant's runs a store wrote before it listed them so (`list_runs` reads
        them meanwhile, at more cost); returns how many. Idempotent, never overwrites a concurrent write."""
        ...


class FactStore(Protocol):
    """Facts consolidation wrote (and corrections to them), with the contradictions it found."""

    def put_facts(self, facts: Sequence[Fact], contradictions: Sequence[Contradiction] = ()) -> None:
        """Upsert facts by their derived ids and add contradictions, atomically. Contradictions are a record
        kept for an operator (erased with their scope, moved with it): nothing reads them through a port."""
        ...

    def get_facts(self, tenant: str, fact_ids: Sequence[str]) -> dict[str, Fact]: ...

    def list_facts(self, tenant: str, scope_id: str | None = None) -> list[Fact]:
        """Every fact of a scope (or tenant), any status, ordered by fact_id."""
        ...

    def update_fact(self, fact: Fact, expected_version: int) -> None:
        """Replace a stored fact (moved to the feed's head) if its stored version equals `expected_version`;
        Conflict `stale_version` otherwise, `fact_not_found` when it is gone."""
        ...


class ErasureStore(Protocol):
    """Forgetting one episode or fact, the record of who forgot it, and erasing whole scopes."""

    def forget_episode(self, tenant: str, episode_id: str, record: Forgotten) -> Episode | None:
        """Delete one episode for good (and its session entry), move its feed entry to the head as a tombstone
        (`deleted:episode`) and keep `record` (who, when, why), atomically. The episode deleted; None (and
        nothing written) when the tenant has none by that id."""
        ...

    def forget_fact(self, tenant: str, fact_id: str, record: Forgotten) -> Fact | None:
        """The same for a fact (its corrections' history goes too: it holds former values)."""
        ...

    def get_forgotten(self, tenant: str, record_id: str) -> Forgotten | None:
        """Who forgot this record, when and why; None when it was never forgotten (or its scope was erased)."""
        ...

    def list_forgotten_since(self, tenant: str, since: datetime) -> set[str]:
        """Ids of the episodes and facts forgotten at or after `since`, at least the last day's: what a search
        index that lags its writes may still return (read-your-writes for recall). A store whose index lags
        (DynamoDB beside OpenSearch Serverless) also lists those erased with their scope."""
        ...

    def erase_scopes(self, tenant: str, scope_ids: Sequence[str], *, dry_run: bool) -> tuple[dict[str, int], list[str]]:
        """Delete for good the scopes and every memory (with revisions and history), episode, fact (with its
        corrections), record of a forgotten episode or fact, checkpoint and alias attached to them; a dry
        run only counts. Each erased record's feed entry becomes a tombstone at the head of the feed (kind
        `deleted:<kind>`, the id, nothing else), so a connector learns the data is gone. Returns the
        counts and the erased record ids."""
        ...


class StructureStore(Protocol):
    """Structure drafts and publishing them."""

    def put_draft(self, draft: Draft) -> None: ...

    def get_draft(self, tenant: str, draft_id: str) -> Draft | None: ...

    def close_draft(self, draft: Draft) -> None:
        """Store a draft that leaves `open` without publishing (discarded), only while the stored one is still
        open: a discard that raced a publish of the same draft raises Conflict `draft_closed` and changes nothing."""
        ...

    def apply_structure(self, tenant: str, plan: Plan, draft: Draft, now: datetime) -> None:
        """Apply every change of the plan and store the published draft, all or nothing; a crash
        mid-way leaves nothing applied, or (adapters that need several transactions) a journal
        that the next call resumes to completion."""
        ...


class ApiKeyStore(Protocol):
    """API keys (looked up before the tenant is known, so keyed by hash)."""

    def put_api_key(self, key: ApiKey) -> None: ...

    def get_api_key(self, key_hash: str) -> ApiKey | None: ...

    def list_api_keys(self, tenant: str) -> list[ApiKey]: ...

    def revoke_api_key(self, tenant: str, key_id: str, now: datetime) -> bool:
        """Mark revoked; False if no such key in this tenant."""
        ...


class KeyAuthenticator(Protocol):
    """A bearer secret to the caller it names: what the authorizer holds (`mneme.auth.authorize`)."""

    def authenticate(self, secret: str | None) -> Principal:
        """Raises `Unauthorized` for a missing, unknown or revoked key (code `key_revoked`); never returns
        a caller for one."""
        ...


class ChangeFeed(Protocol):
    """The change feed connectors page through."""

    def list_changes(self, tenant: str, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str, str]]:
        """(position, kind, id) of changed records strictly after `after` = (position, id), in (position, id)
        order. Each record sits once, at its latest change (kind: scope | memory | episode | fact, or
        `deleted:<kind>` for an erased record's tombstone).
        Positions are UTC timestamp text that never go backwards in commit order as seen by a reader: a
        reader paging from any cursor sees every change exactly once. Adapters without serialised
        writes hide changes younger than a settle horizon to keep that promise."""
        ...


@runtime_checkable
class RowCounts(Protocol):
    """What a store holds, for an operator (`mneme status`). Optional, and no part of `RecordStore`: only a
    store that counts without a scan has it (the embedded one); without it `status` shows "?"."""

    def row_counts(self) -> dict[str, dict[str, int]]:
        """{tenant: {table: rows}} over every table with a tenant column."""
        ...


@runtime_checkable
class Atomic(Protocol):
    """Writes of many records that commit together. Optional, and no part of `RecordStore`: only a store with
    transactions across records has it (the embedded one); `mneme import` is all or nothing with it."""

    def atomic(self) -> AbstractContextManager[None]:
        """Every write this thread makes inside the block commits at its end, or none does (an exception
        rolls all of them back, and propagates); reads inside see those writes."""
        ...


@runtime_checkable
class Closeable(Protocol):
    """A part that holds what a process must give back when it ends (connections, files, model threads).
    Optional, and no part of any port: the embedded store and index, the local models."""

    def close(self) -> None:
        """Release it. A store or index reopens on its next call; a local model refuses further work."""
        ...


class RecordStore(
    ScopeStore,
    MemoryStore,
    EpisodeStore,
    ConsolidationStore,
    FactStore,
    ErasureStore,
    StructureStore,
    ApiKeyStore,
    ChangeFeed,
    Protocol,
):
    """Source of truth for every record: the union of the role ports above, which each adapter implements
    in full (`mneme.bootstrap` builds one and hands each service the roles it asks for).

    Errors: uniqueness or optimistic-concurrency violations raise `mneme.errors.Conflict`;
    vendor failures are translated to `StoreUnavailable`, and a full, read-only or damaged disk to `StorageFull`,
    `StoreReadOnly` or `StoreDamaged`. Reads of absent records return None.
    """


class Embedder(Protocol):
    """Text to vectors: float32, L2-normalised, shape (len(texts), dimension).

    `model_id` names the model and its dimension (e.g. `all-MiniLM-L6-v2@384`); a vector is
    only ever compared with vectors carrying the same `model_id`.
    """

    model_id: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An asymmetric model: stored texts go through `embed`, search queries through `embed_queries`
    (e5's "passage: " and "query: " prefixes). Same shape, normalisation and `model_id`."""

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def embed_query(embedder: Embedder, text: str) -> NDArray[np.float32]:
    """The vector of one search query: `embed_queries` where the model has it, else `embed`."""
    vectors = embedder.embed_queries([text]) if isinstance(embedder, QueryEmbedder) else embedder.embed([text])
    first: NDArray[np.float32] = vectors[0]
    return first


class SearchIndex(Protocol):
    """Derived, rebuildable search over episodes, facts and memories.

    Documents are keyed by (tenant, doc_id); `upsert` is idempotent. Every query is filtered by
    tenant and subtree (`SearchFilter.ancestor_id` must be in the document's `ancestor_ids`)
    *inside* the search, so a small subtree still gets its true top-k. Results are ordered by
    score, highest first; ties broken by doc_id ascending.
    """

    @property
    def visibility_lag(self) -> float:
        """Seconds until a write is searchable: 0 when `upsert` returns only once its documents are
        (SQLite, managed OpenSearch domains); the refresh window of an eventually consistent index
        (OpenSearch Serverless). Readers cover the lag from records (recall's fresh tail)."""
        ...

    def upsert(self, docs: Sequence[IndexDocument]) -> None:
        """Read-after-write when `visibility_lag` is 0; otherwise searchable within `visibility_lag` seconds."""
        ...

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None: ...

    def search_text(self, flt: SearchFilter, query: str, k: int) -> list[Hit]:
        """BM25 over `text`; scores are positive, larger is better."""
        ...

    def search_vector(self, flt: SearchFilter, vector: NDArray[np.float32], model_id: str, k: int) -> list[Hit]:
        """Cosine similarity in [-1, 1] against documents embedded by `model_id` only."""
        ...

    def get_vectors(self, tenant: str, model_id: str, doc_ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """The stored vectors of `model_id` of these documents, by doc id, L2-normalised as searched. An
        index may leave any out (the caller then reads the records' own)."""
        ...

    def clear_tenant(self, tenant: str) -> None:
        """Drop every document of a tenant (before a rebuild)."""
        ...

    def update_ancestors(self, tenant: str, scope_id: str, ancestor_ids: Sequence[str]) -> None:
        """Rewrite the ancestors of every document of a scope (after a structure move)."""
        ...

    def count(self, tenant: str) -> int: ...

    def doc_ids(self, tenant: str) -> set[str]: ...
