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
- a roll-up is composed again from the claims still standing and the turns left in its period (no word of the
  forgotten turn stays in it), or retracted when none is left or only small talk.

Forgetting or correcting a fact settles what carried its value: each roll-up built from its sources is composed
again without the turns that stated the forgotten (or corrected) value, which it no longer quotes or counts as
sources, and a generative reasoner's summary of a conversation that states that value is retracted; they are
listed in `settled`. No forgotten or corrected value can be read back through a derived record.

The turns that followed a forgotten turn in its session are indexed again: their search text held it as context.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from mneme.errors import Forbidden
from mneme.language.digests import Standing, compose
from mneme.language.grounding import central, confidence, supported, utterance
from mneme.language.text import terms
from mneme.models import (
    Episode,
    Forgotten,
    HistoryEntry,
    Principal,
    Role,
    SessionPosition,
    context_session,
    session_position,
)
from mneme.ports import Clock, Embedder, EpisodeStore, ErasureStore, FactStore, MemoryStore
from mneme.records import Fact, is_claim
from mneme.services.indexing import CONTEXT_WINDOW, Indexer
from mneme.services.records import RecordsService, not_found

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
        fact = self.store.get_facts(caller.tenant, [fact_id]).get(fact_id)
        self._retract(caller, fact_id, reason)
        settled = self._unsay(caller, fact, f"fact {fact_id} forgotten") if fact is not None else []
        return {"id": fact_id, "kind": "fact", "forgotten": True, "settled": settled}

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
        settled = []
        if {"summary", "entity", "property", "value"} & diff.keys():
            settled = self._unsay(caller, fact, f"fact {fact_id} corrected", corrected)
        return {**self.records.fact_view(caller.tenant, corrected), "settled": settled}

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
            now = Standing.of([f for f in (standing.get(f.fact_id, f) for f in facts) if f is not None])
            action, update = _settlement(fact, left, now)
            if action == "retracted":
                standing[fact.fact_id] = None
                why = f"every episode it was drawn from was forgotten ({gone})"
                settled += self._retract(caller, fact.fact_id, why)
                continue
            settled.append({"id": fact.fact_id, "action": action})
            after = self._changed(caller, fact, update, f"{action}: source episode {gone} forgotten")
            standing[fact.fact_id] = after
            changed.append(after)
        for fact in facts:  # a claim marked changed by the forgotten turn stands as current again
            if fact.changed_by == gone and fact.fact_id not in standing:
                changed.append(fact.model_copy(update={"changed_by": None, "changed_at": None, "stale": False}))
        if changed:
            self.store.put_facts(changed)
            self.indexer.index_facts(changed)
        return settled

    # -- settling what carried a forgotten or corrected fact's value --------------------------
    def _unsay(self, caller: Principal, fact: Fact, why: str, corrected: Fact | None = None) -> list[dict[str, str]]:
        """Compose again every roll-up built from the fact's sources, and retract the conversation summaries that
        state its value. A forgotten fact's turns that state its value leave the roll-ups (neither quoted nor
        counted as their sources); a corrected one's stay, stated by its corrected claim (a roll-up never
        quotes the turns a standing claim rests on)."""
        tenant = caller.tenant
        facts = [f for f in self.store.list_facts(tenant, fact.scope_id) if f.fact_id != fact.fact_id]
        facts += [corrected] if corrected is not None else []
        withheld: set[str] = set()
        if corrected is None:
            sources = self.store.get_episodes(tenant, fact.source_episode_ids, vectors=False)
            stating = {i for i, e in sources.items() if _states(fact, utterance(e))}
            withheld = stating if is_claim(fact) else set(fact.source_episode_ids)
        settled: list[dict[str, str]] = []
        for summary in [f for f in facts if f.tier == "raw" and not f.entity and f.status == "active"]:
            if is_claim(fact) and _states(fact, summary.summary):
                settled += self._retract(caller, summary.fact_id, f"it stated the value of {why}")
                facts.remove(summary)
        standing, changed = Standing.of(facts), []
        carried = [f for f in facts if f.tier != "raw" and set(f.source_episode_ids) & set(fact.source_episode_ids)]
        for rollup in carried:
            kept = [i for i in rollup.source_episode_ids if i not in withheld]
            found = self.store.get_episodes(tenant, kept, vectors=False)
            left = sorted(found.values(), key=lambda e: (e.occurred_at, e.created_at, e.sequence))
            text = compose(rollup.tier, standing, left) if left else ""
            if not text:
                settled += self._retract(caller, rollup.fact_id, f"nothing of its period is left once {why}")
                continue
            update = {"summary": text, "source_episode_ids": [e.episode_id for e in left],
                      "confidence": confidence(len(left), False), "valid_from": left[0].occurred_at}  # fmt: skip
            changed.append(self._changed(caller, rollup, update, f"rebuilt: {why}"))
            settled.append({"id": rollup.fact_id, "action": "rebuilt"})
        if changed:
            self.store.put_facts(changed)
            self.indexer.index_facts(changed)
        return settled

    def _changed(self, caller: Principal, fact: Fact, update: dict[str, Any], reason: str) -> Fact:
        """The fact with `update` applied (a new version, embedded again when its summary changed), its history
        entry written."""
        now = self.clock.now()
        after = fact.model_copy(update={**update, "version": fact.version + 1, "updated_at": now})
        self.store.add_history(
            HistoryEntry(tenant=caller.tenant, memory_id=fact.fact_id, version=after.version, action="corrected",
                         actor=caller.principal, status=fact.status, at=now, reason=reason,
                         changes={"source_episode_ids": [fact.source_episode_ids, after.source_episode_ids]})
        )  # fmt: skip
        return self._embedded(after) if "summary" in update else after

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
        session_id = context_session(episode)
        if session_id is None:
            return
        try:
            until = episode.occurred_at + CONTEXT_WINDOW
        except OverflowError:  # a turn in the year 9999
            until = datetime.max.replace(tzinfo=UTC)
        session = (episode.tenant, episode.scope_id, session_id)
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


def _states(fact: Fact, text: str) -> bool:
    """Does the text state the fact's value about its entity (a claim), or hold its summary's words?"""
    if is_claim(fact):
        return supported(fact.entity, fact.value, [text])
    return terms(fact.summary) <= terms(text)


def _settlement(fact: Fact, left: list[Episode], standing: Standing | None = None) -> tuple[str, dict[str, Any]]:
    """What becomes of a fact one of whose sources was forgotten: (action, the fields to change). A roll-up
    is composed again from the facts standing and the turns left, so no word of the forgotten turn stays in it."""
    if not left:
        return "retracted", {}
    kept = [e.episode_id for e in left]
    texts = [utterance(e) for e in left]
    if fact.tier != "raw":
        turns = sorted(left, key=lambda e: (e.occurred_at, e.created_at, e.sequence))
        summary = compose(fact.tier, standing or Standing.of([]), turns)
        if not summary:  # nothing but small talk is left: no roll-up to keep
            return "retracted", {}
        return "rebuilt", {"summary": summary, "source_episode_ids": kept, "valid_from": turns[0].occurred_at,
                           "confidence": confidence(len(left), False)}  # fmt: skip
    if fact.entity and fact.value:
        if supported(fact.entity, fact.value, texts):
            return "regrounded", {"source_episode_ids": kept, "stale": fact.changed_by is not None}
        return "stale", {"stale": True}
    if terms(fact.summary) <= set().union(*(terms(t) for t in texts)):
        return "regrounded", {"source_episode_ids": kept}
    if len(left) < 2:
        return "retracted", {}
    rebuilt = {"summary": central(texts), "source_episode_ids": kept, "confidence": confidence(len(left), False)}
    return "rebuilt", rebuilt


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
