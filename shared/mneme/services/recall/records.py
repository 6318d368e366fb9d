"""What recall ranks: episodes, facts and memories loaded from records, and their lifecycle factors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel

from mneme.models import Episode, Memory, Principal, Revision
from mneme.ports import EpisodeStore, ErasureStore, FactStore, MemoryStore, ScopeStore
from mneme.records import Fact
from mneme.search_models import DocKind
from mneme.services.indexing import episode_text, fact_text, memory_text

Record = Episode | Fact | Memory
REVIEW_DUE = 0.7  # Engram's lifecycle factors
STALE = 0.6
LOW_CONFIDENCE = 0.9
FACT_PREFIXES = ("fa_", "ro_")


class RecallStore(EpisodeStore, FactStore, MemoryStore, ScopeStore, ErasureStore, Protocol):
    """The record store's roles recall reads."""


class Result(BaseModel):
    id: str
    kind: DocKind
    scope: str
    content: str
    score: float
    scores: dict[str, float]
    occurred_at: datetime
    created_at: datetime
    metadata: dict[str, Any] = {}
    session_id: str | None = None
    sequence: int | None = None  # an episode's place among the turns its call gave (0, 1, 2, ...)
    tier: str | None = None
    key: str | None = None
    status: str | None = None
    requires: list[str] = []
    fact: dict[str, Any] | None = None  # entity, property, value, confidence, validity, superseded_by
    sources: list[dict[str, Any]] | None = None  # a fact's episodes: id, occurred_at, metadata
    sttp: dict[str, Any] | None = None  # an STTP episode's structured fields (AVEC, metrics, provenance...)
    since_changed: dict[str, str] | None = None  # earlier: a later statement updates it (by, at, why)


def record_text(record: Record) -> str:
    if isinstance(record, Episode):
        return episode_text(record)
    if isinstance(record, Fact):
        return fact_text(record)
    return memory_text(record)


def strong_text(record: Record) -> str:
    """Engram's strong fields: a memory's key, id, tags and triggers (episodes and facts have none)."""
    if not isinstance(record, Memory):
        return ""
    return " ".join([record.key.replace("-", " "), record.memory_id, *record.tags, *record.triggers])


def lifecycle(record: Record, now: datetime, as_of: datetime | None = None) -> tuple[float, str | None]:
    """Multiplier in [0, 1]; 0 means omitted, with the reason.

    Memories: expired (valid_until passed) omitted, review_due passed ×0.7, confidence < 0.5 ×0.9.
    Facts: superseded or expired omitted (unless valid at `as_of`), stale ×0.6 (its sources gone, or its
    value outgrown), confidence < 0.3 ×0.9; a fact a later turn changed (`changed_by`) is history, weighed by
    the question (`time._consolidated`: ×0.6 for a question about the present only). Episodes: 1.
    """
    if isinstance(record, Episode):
        return (0.0, "archived") if record.archived else (1.0, None)
    if isinstance(record, Fact):
        if as_of is not None:
            if not record.valid_at(as_of):
                return 0.0, "not_valid_at_as_of"
        elif record.status != "active":
            return 0.0, record.status
        factor = STALE if record.stale and record.changed_by is None else 1.0
        return factor * (LOW_CONFIDENCE if record.confidence < 0.3 else 1.0), None
    if record.valid_until is not None and record.valid_until <= now:
        return 0.0, "lifecycle"
    factor = REVIEW_DUE if record.review_due is not None and record.review_due <= now else 1.0
    if record.confidence is not None and record.confidence < 0.5:
        factor *= LOW_CONFIDENCE
    return factor, None


def load(
    store: RecallStore,
    caller: Principal,
    ids: list[str],
    *,
    vectors: bool = True,
    revisions: list[Revision] | None = None,
    consistent: bool = True,
) -> dict[str, Record]:
    """Records for ids, tenant-scoped, one read per kind; memories only when the caller may see them.
    `vectors=False`: episodes may come without their vector (`EpisodeStore.get_episodes`). `revisions`:
    the caller's open revisions when already read (else read here, if a memory is asked for).
    `consistent=False`: episodes (which never change) may come from a lagging read; facts and memories,
    which are corrected and edited, are always read strongly."""
    episodes = [i for i in ids if i.startswith("ep_")]
    found: dict[str, Record] = dict(store.get_episodes(caller.tenant, episodes, vectors=vectors, consistent=consistent))
    found.update(store.get_facts(caller.tenant, [i for i in ids if i.startswith(FACT_PREFIXES)]))
    memory_ids = [i for i in ids if not i.startswith(("ep_", *FACT_PREFIXES))]
    if not memory_ids:
        return found
    if revisions is None:
        revisions = store.list_revisions(caller.tenant, author=caller.principal)
    edits = {r.memory_id: r for r in revisions}
    memories = store.get_memories(caller.tenant, memory_ids)
    for memory_id in memory_ids:
        memory = memories.get(memory_id)
        if memory is None or not (
            memory.status == "published" or (memory.status == "pending" and memory.author == caller.principal)
        ):
            continue
        revision = edits.get(memory_id) if memory.status == "published" else None
        if revision is not None:  # the caller's own pending edit replaces the published body, for them only
            memory = memory.model_copy(update={"body": revision.changes.get("body", memory.body), "status": "pending"})
        found[memory_id] = memory
    return found


def fact_sources(store: RecallStore, tenant: str, records: Iterable[Record | None]) -> dict[str, Episode]:
    """The source episodes of every fact among `records`, in one read (`to_result` lists them)."""
    wanted = [i for r in records if isinstance(r, Fact) for i in r.source_episode_ids]
    return store.get_episodes(tenant, wanted, vectors=False) if wanted else {}


def sources_metadata(metadata: list[dict[str, Any]]) -> dict[str, Any]:
    """A fact's metadata: its source episodes', each key with the value every source that has it agrees on
    (a key the sources disagree on is left out; each source's own is in `sources`)."""
    values: dict[str, Any] = {}
    conflicting: set[str] = set()
    for each in metadata:
        for key, value in each.items():
            if values.setdefault(key, value) != value:
                conflicting.add(key)
    return {key: value for key, value in values.items() if key not in conflicting}


FACT_FIELDS = {"entity", "property", "value", "confidence", "valid_from", "valid_until", "superseded_by", "status",
               "stale"}  # fmt: skip


def to_result(
    record: Record,
    score: float,
    scores: dict[str, float],
    path_of: Callable[[str], str],
    episodes: Mapping[str, Episode],
    grounding: list[str] | None = None,
) -> Result:
    """The result of a record. A fact's `sources` list its episodes found in `episodes` (`fact_sources`);
    those in `grounding` (the turns that state it, shown beside it) carry their `text`."""
    common: dict[str, Any] = {
        "scope": _scope_path(record, path_of),
        "created_at": record.created_at,
        "score": round(score, 6),
        "scores": scores,
    }
    if isinstance(record, Episode):
        return _episode_result(record, common)
    if isinstance(record, Fact):
        return _fact_result(record, episodes, grounding or [], common)
    return Result(
        id=record.memory_id,
        kind="memory",
        content=record.body,
        occurred_at=record.updated_at,
        key=record.key,
        status=record.status,
        metadata={"summary": record.summary, "tags": record.tags, "depends_on": record.depends_on},
        **common,
    )


def _scope_path(record: Record, path_of: Callable[[str], str]) -> str:
    """Where a record is filed: its scope's path, or `layer=value` for a memory tagged to a layer."""
    if isinstance(record, Memory) and not record.scope_id:
        return f"{record.layer}={record.value or '*'}"
    assert record.scope_id is not None  # every episode and fact, and a scoped memory, has a scope
    return path_of(record.scope_id)


def _episode_result(record: Episode, common: dict[str, Any]) -> Result:
    return Result(
        id=record.episode_id,
        kind="episode",
        content=record.content,
        occurred_at=record.occurred_at,
        metadata=record.metadata,
        session_id=record.session_id,
        sequence=record.sequence,
        tier=record.tier,
        sttp=record.structured,
        **common,
    )


def _fact_result(record: Fact, episodes: Mapping[str, Episode], grounding: list[str], common: dict[str, Any]) -> Result:
    own = set(record.source_episode_ids)
    sources = {i: e for i, e in episodes.items() if i in own}  # in the store's order, as read alone
    return Result(
        id=record.fact_id,
        kind="fact",
        content=record.summary,
        occurred_at=record.valid_from,
        tier=record.tier,
        status=record.status,
        fact=record.model_dump(mode="json", include=FACT_FIELDS),
        metadata=sources_metadata([e.metadata for e in sources.values()]),
        sources=[
            {
                "id": e.episode_id,
                "occurred_at": e.occurred_at.isoformat(),
                "metadata": e.metadata,
                **({"text": e.content} if e.episode_id in grounding else {}),
            }
            for e in sources.values()
        ],
        **common,
    )
