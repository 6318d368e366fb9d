"""Forgetting one episode (writer) or one fact (approver), and correcting a fact (approver).

Forgetting deletes the record for good, takes it out of the index at once, leaves a tombstone in the change
feed and a record of who forgot it, when and why, and settles what was derived from a forgotten episode:

- a fact whose every source is forgotten is retracted (forgotten too, its reason saying so);
- a claim (entity, property, value) whose remaining sources still state its entity and value is re-grounded on
  them; one they do not support is marked stale (its sources list keeps the forgotten id, so maintenance keeps
  it stale; recall ranks it lower) - forget it too if the knowledge must go;
- a summary is re-grounded when the remaining sources hold all its words, else rebuilt from them (the most
  central text, as the extractive reasoner would), or retracted when one source is left (a lone episode with no
  claim stays an episode);
- a roll-up is digested again from the claims still standing and the turns left in its period (no word of the
  forgotten turn stays in it), or retracted when none is left or only small talk.

The turns that followed a forgotten turn in its session are indexed again: their search text held it as context.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from mneme.errors import Forbidden
from mneme.grounding import central, confidence, digest, supported, utterance
from mneme.models import Episode, Forgotten, HistoryEntry, Principal, Role, SessionPosition, session_position
from mneme.ports import Clock, Embedder, EpisodeStore, ErasureStore, FactStore, MemoryStore
from mneme.records import Fact, is_claim
from mneme.services.indexing import CONTEXT_WINDOW, Indexer
from mneme.services.records import RecordsService, not_found
from mneme.text import terms

FOLLOWING_TURNS = 200  # turns after a forgotten one (within CONTEXT_WINDOW) indexed again, at most
CORRECTABLE = ("summary", "entity", "property", "value", "confidence", "valid_until")


class ForgettingStore(EpisodeStore, FactStore, ErasureStore, MemoryStore, Protocol):
    """The record store's roles forgetting and correcting use."""


@dataclass
class ForgetService:
    store: ForgettingStore
    clock: Clock
    embedder: Embedder
    indexer: Indexer
    records: RecordsService

    def forget_episode(self, caller: Principal, episode_id: str, reason: str | None = None) -> dict[str, Any]:
        if not caller.has(Role.writer):
            raise Forbidden("forgetting an episode needs the writer role")
        tenant = caller.tenant
        episode = self.store.get_episodes(tenant, [episode_id], vectors=False).get(episode_id)
        gone = None
        if episode is not None:
            record = self._record(caller, episode_id, "episode", episode.scope_id, reason)
            gone = self.store.forget_episode(tenant, episode_id, record)
        self.indexer.index.delete(tenant, [episode_id])  # also when already forgotten: a retry repairs the index
        if gone is None:
            raise not_found("episode", episode_id, self.store.get_forgotten(tenant, episode_id))
        settled = self._settle(caller, gone)
        self._reindex_following(gone)
        return {"id": episode_id, "kind": "episode", "forgotten": True, "settled": settled}

    def forget_fact(self, caller: Principal, fact_id: str, reason: str | None = None) -> dict[str, Any]:
        if not caller.has(Role.approver):
            raise Forbidden("forgetting a fact needs the approver role")
        self._retract(caller, fact_id, reason)
        return {"id": fact_id, "kind": "fact", "forgotten": True, "settled": []}  # nothing derives from a fact

    def correct_fact(self, caller: Principal, fact_id: str, version: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Change a fact's fields (summary, entity, property, value, confidence, valid_until) at `version`;
        the history keeps each correction (who, when, before and after, why: `changes["reason"]`). A new value
        given without a summary replaces the old value where the summary states it."""
        if not caller.has(Role.approver):
            raise Forbidden("correcting a fact needs the approver role")
        reason = changes.pop("reason", None)
        fact = self.records.fact(caller, fact_id)
        if "summary" not in changes and changes.get("value") and fact.value and fact.value in fact.summary:
            changes["summary"] = fact.summary.replace(fact.value, changes["value"])  # the sentence says the new value
        diff = {k: [getattr(fact, k), v] for k, v in changes.items() if k in CORRECTABLE and getattr(fact, k) != v}
        now = self.clock.now()
        update: dict[str, Any] = {k: after for k, (_, after) in diff.items()}
        update.update(version=version + 1, updated_at=now)
        corrected = fact.model_copy(update=update)
        if {"summary", "entity", "property", "value"} & diff.keys():
            corrected = self._embedded(corrected)
        self.store.update_fact(corrected, version)  # Conflict stale_version when another change came first
        self.store.add_history(
            HistoryEntry(tenant=caller.tenant, memory_id=fact_id, version=corrected.version, action="corrected",
                         actor=caller.principal, status=corrected.status, at=now, reason=reason,
                         changes={k: [_plain(b), _plain(a)] for k, (b, a) in diff.items()})
        )  # fmt: skip
        self.indexer.index_facts([corrected])
        return self.records.fact_view(caller.tenant, corrected)

    # -- settling what derives from a forgotten episode -------------------------------------
    def _settle(self, caller: Principal, episode: Episode) -> list[dict[str, str]]:
        tenant, gone = caller.tenant, episode.episode_id
        facts = self.store.list_facts(tenant, episode.scope_id)
        touched = [f for f in facts if gone in f.source_episode_ids and f.status != "archived"]
        touched.sort(key=lambda f: f.tier != "raw")  # claims first: a roll-up restates those still standing
        standing: dict[str, Fact | None] = {}  # the settled state of each touched fact (None: retracted)
        settled: list[dict[str, str]] = []
        changed: list[Fact] = []
        for fact in touched:
            present = self.store.get_episodes(tenant, [i for i in fact.source_episode_ids if i != gone], vectors=False)
            left = [present[i] for i in fact.source_episode_ids if i in present]
            claims = () if fact.tier == "raw" else _claims_standing(facts, standing, left)
            action, update = _settlement(fact, left, claims)
            if action == "retracted":
                standing[fact.fact_id] = None
                why = f"every episode it was drawn from was forgotten ({gone})"
                settled += self._retract(caller, fact.fact_id, why)
                continue
            settled.append({"id": fact.fact_id, "action": action})
            after = fact.model_copy(update={**update, "version": fact.version + 1, "updated_at": self.clock.now()})
            standing[fact.fact_id] = after
            changed.append(self._embedded(after) if "summary" in update else after)
            self.store.add_history(
                HistoryEntry(tenant=tenant, memory_id=fact.fact_id, version=fact.version + 1, action="corrected",
                             actor=caller.principal, status=fact.status, at=self.clock.now(),
                             reason=f"{action}: source episode {gone} forgotten",
                             changes={"source_episode_ids": [fact.source_episode_ids, after.source_episode_ids]})
            )  # fmt: skip
        if changed:
            self.store.put_facts(changed)
            self.indexer.index_facts(changed)
        return settled

    def _retract(self, caller: Principal, fact_id: str, reason: str | None) -> list[dict[str, str]]:
        tenant = caller.tenant
        fact = self.store.get_facts(tenant, [fact_id]).get(fact_id)
        gone = None
        if fact is not None:
            gone = self.store.forget_fact(tenant, fact_id, self._record(caller, fact_id, "fact", fact.scope_id, reason))
        self.indexer.index.delete(tenant, [fact_id])
        if gone is None:
            raise not_found("fact", fact_id, self.store.get_forgotten(tenant, fact_id))
        return [{"id": fact_id, "action": "retracted"}]

    def _reindex_following(self, episode: Episode) -> None:
        """The turns after it in its session were indexed with it as context: index them again without it."""
        if episode.session_id is None:
            return
        try:
            until = episode.occurred_at + CONTEXT_WINDOW
        except OverflowError:  # a turn in the year 9999
            until = datetime.max.replace(tzinfo=UTC)
        session = (episode.tenant, episode.scope_id, episode.session_id)
        latest = SessionPosition(until, datetime.max.replace(tzinfo=UTC), 0)  # every turn said by `until`
        turns = self.store.session_episodes(*session, latest, FOLLOWING_TURNS)
        after = session_position(episode)
        following = [e for e in turns if session_position(e) > after and not e.archived]
        if following:
            self.indexer.index_episodes(following)

    # -- helpers --------------------------------------------------------------------------
    def _record(self, caller: Principal, record_id: str, kind: str, scope_id: str, reason: str | None) -> Forgotten:
        return Forgotten.model_validate(
            {"tenant": caller.tenant, "record_id": record_id, "kind": kind, "scope_id": scope_id,
             "forgotten_by": caller.principal, "forgotten_at": self.clock.now(), "reason": reason}
        )  # fmt: skip

    def _embedded(self, fact: Fact) -> Fact:
        vector = self.embedder.embed([fact.summary])[0].tolist()
        return fact.model_copy(update={"vector": vector, "model_id": self.embedder.model_id})


def _claims_standing(facts: list[Fact], standing: dict[str, Fact | None], left: list[Episode]) -> tuple[str, ...]:
    """The claims a roll-up rebuilt on `left` states: active, not stale, drawn from one of those episodes, as
    settled by this forgetting (a retracted or stale claim is not restated), oldest first."""
    ids = {e.episode_id for e in left}
    now = [standing.get(f.fact_id, f) for f in facts]
    stated = [f for f in now if f is not None and f.tier == "raw" and f.status == "active" and not f.stale]
    stated = [f for f in stated if is_claim(f) and ids & set(f.source_episode_ids)]
    return tuple(f.summary for f in sorted(stated, key=lambda f: (f.valid_from, f.fact_id)))


def _settlement(fact: Fact, left: list[Episode], claims: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """What becomes of a fact one of whose sources was forgotten: (action, the fields to change). A roll-up
    is digested again from `claims` and the turns left, so no word of the forgotten turn stays in it."""
    if not left:
        return "retracted", {}
    kept = [e.episode_id for e in left]
    texts = [utterance(e) for e in left]
    if fact.tier != "raw":
        summary = digest(list(claims), texts)
        if not summary:  # nothing but small talk is left: no digest to keep
            return "retracted", {}
        valid_from = min(e.occurred_at for e in left)
        return "rebuilt", {"summary": summary, "source_episode_ids": kept, "valid_from": valid_from,
                           "confidence": confidence(len(left), False)}  # fmt: skip
    if fact.entity and fact.value:
        if supported(fact.entity, fact.value, texts):
            return "regrounded", {"source_episode_ids": kept, "stale": False}
        return "stale", {"stale": True}
    if terms(fact.summary) <= set().union(*(terms(t) for t in texts)):
        return "regrounded", {"source_episode_ids": kept}
    if len(left) < 2:
        return "retracted", {}
    rebuilt = {"summary": central(texts), "source_episode_ids": kept, "confidence": confidence(len(left), False)}
    return "rebuilt", rebuilt


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
