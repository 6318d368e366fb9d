"""What the consolidation stages share: their dependencies (`Deps`), the batch state they pass on (`Batch`,
ids and small records only, so a Step Functions state carrying it stays far below its 256 KiB) and the
working set of one batch (`Working`: what the stages read, read once)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel

from mneme.consolidation.reasoning import Reasoner
from mneme.models import Episode
from mneme.observability import count
from mneme.ports import Clock, ConsolidationStore, Embedder, EpisodeStore, FactStore
from mneme.records import MAX_SET_ASIDE, Fact, Proposal, Waiting, listed
from mneme.services.indexing import Indexer
from mneme.settings import ConsolidationSettings

MAX_ERRORS = 20  # errors a batch lists (all are counted)


class ConsolidatingStore(ConsolidationStore, EpisodeStore, FactStore, Protocol):
    """The record store's roles consolidation uses."""


@dataclass
class Deps:
    store: ConsolidatingStore
    clock: Clock
    embedder: Embedder
    reasoner: Reasoner
    indexer: Indexer
    settings: ConsolidationSettings


class Decision(BaseModel):
    """What reconcile decided for one grounded proposal, `Batch.proposals[window][item]`."""

    action: str  # create | reinforce | supersede | unresolved
    fact_id: str
    window: int
    item: int
    replaces: str | None = None
    rivals: list[str] = []


class Batch(BaseModel):
    tenant: str
    scope_id: str
    run_id: str
    started_at: datetime
    base_version: int = 0  # the checkpoint version collected from; the checkpoint stage expects it
    episode_ids: list[str] = []
    last: tuple[datetime | None, str] | None = None
    clusters: list[list[str]] = []  # the windows: each a list of episode ids in the order they were said
    proposals: dict[int, list[Proposal]] = {}  # per window, its grounded proposals (sources: turn numbers)
    decisions: list[Decision] = []
    counters: dict[str, dict[str, int]] = {}
    errors: list[dict[str, Any]] = []
    full: bool = False  # the batch hit batch_size: more episodes may be waiting
    collected_before: datetime | None = None  # collect read episodes created strictly before this
    leased_elsewhere: bool = False  # another run holds the scope's lease: every stage leaves it alone
    holds: int = 0  # runs in a row that held the checkpoint before this one (`Checkpoint.held`)
    set_aside: list[dict[str, Any]] = []  # windows set aside, listed for the run (the first MAX_SET_ASIDE)
    aside: dict[int, str] = {}  # every window set aside: its index and why (`backoff.settle` makes it wait)
    returning: list[Waiting] = []  # windows set aside before and due again, read after the new ones
    returning_from: int = 0  # the index of the first of them among `clusters`
    returned: list[dict[str, Any]] = []  # what became of them (`backoff.settle`), for the run record

    def count(self, stage: str, name: str, value: int = 1) -> None:
        self.counters.setdefault(stage, {}).setdefault(name, 0)
        self.counters[stage][name] += value

    def fail(self, stage: str, message: str, *, episode_ids: list[str] | None = None, **context: Any) -> None:
        """Record an error (it holds the checkpoint); episodes are listed bounded (`listed`), and the first
        MAX_ERRORS errors are kept (all are counted)."""
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(
                {"stage": stage, "message": message, **(listed(episode_ids) if episode_ids else {}), **context}
            )
        self.count(stage, "errors")

    def cited(self, window: int, proposal: Proposal) -> list[str]:
        """The episode ids a proposal of `window` cites (its turn numbers, from 1), in the window's order."""
        ids = self.clusters[window]
        return [ids[n - 1] for n in sorted(set(proposal.sources)) if 1 <= n <= len(ids)]

    def proposal(self, decision: Decision) -> Proposal:
        return self.proposals[decision.window][decision.item]

    def size(self) -> int:
        """Its size as a Step Functions state (JSON, ASCII-escaped as the Lambda runtime writes it)."""
        return len(json.dumps(self.model_dump(mode="json")))


def set_aside(batch: Batch, window: int, reason: str, stage: str = "extract") -> None:
    """Give up on a window for now: its episodes stay episodes (recall finds them), the batch goes on, and the
    window is offered again after a backoff (`mneme.consolidation.backoff`)."""
    if len(batch.set_aside) < MAX_SET_ASIDE:
        entry = {"scope_id": batch.scope_id, "stage": stage, "reason": reason[:300], **listed(batch.clusters[window])}
        batch.set_aside.append(entry)
    batch.aside[window] = reason[:160]
    batch.count(stage, "set_aside")
    count("ConsolidationClustersSetAside")


@dataclass
class Working:
    """One batch's working set: its episodes (without vectors) and the scope's facts, each read once and then
    kept up to date by the stages' own writes (`put_facts`). Locally one working set serves every stage of a
    batch (`run_batch`); a Step Functions task builds its own (`run_stage`): stages pass ids, never records."""

    deps: Deps
    tenant: str
    scope_id: str
    _episodes: dict[str, Episode] = field(default_factory=dict)
    _absent: set[str] = field(default_factory=set)
    _facts: dict[str, Fact] | None = None
    _ancestors: dict[tuple[str, str], list[str]] | None = None

    @classmethod
    def of(cls, deps: Deps, batch: Batch) -> Working:
        return cls(deps, batch.tenant, batch.scope_id)

    def keep(self, episodes: list[Episode]) -> None:
        """Episodes read by another call (collect's), kept without their vectors."""
        self._episodes.update((e.episode_id, e.model_copy(update={"vector": None})) for e in episodes)

    def episodes(self, ids: list[str]) -> dict[str, Episode]:
        """The episodes of `ids` that exist (one read for those not read yet)."""
        wanted = [i for i in dict.fromkeys(ids) if i not in self._episodes and i not in self._absent]
        if wanted:
            found = self.deps.store.get_episodes(self.tenant, wanted, vectors=False)
            self._episodes.update(found)
            self._absent.update(i for i in wanted if i not in found)
        return {i: self._episodes[i] for i in ids if i in self._episodes}

    def facts(self) -> list[Fact]:
        """The scope's facts, every status and tier (one read)."""
        if self._facts is None:
            self._facts = {f.fact_id: f for f in self.deps.store.list_facts(self.tenant, self.scope_id)}
        return list(self._facts.values())

    def fact_map(self) -> dict[str, Fact]:
        self.facts()
        assert self._facts is not None
        return self._facts

    def put_facts(self, facts: list[Fact], contradictions: list[Any] | None = None) -> None:
        """Write facts (and contradictions) and index them with their sources' metadata, read from the set."""
        if not facts:
            return
        self.deps.store.put_facts(facts, contradictions or [])
        if self._facts is not None:
            self._facts.update((f.fact_id, f) for f in facts)
        sources = self.episodes([i for f in facts for i in f.source_episode_ids])
        if self._ancestors is None:
            self._ancestors = self.deps.indexer.ancestors_of([(self.tenant, self.scope_id)])
        self.deps.indexer.index_facts(facts, sources, self._ancestors)
