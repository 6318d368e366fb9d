"""The rollup stage: daily and weekly roll-ups a person can read (`mneme.language.digests.compose`), one per period
and partition.

A roll-up never mixes sources whose partition metadata differ (`ConsolidationSettings.partition_keys`:
each user of a shared scope gets their own), so a metadata filter on a partition key finds whole roll-ups
(a derived record is found only when every source matches). A day's roll-up covers the turns of its
earlier batches and this one; a week's covers its days' (read from their roll-ups), and is not written when
it would only repeat its one active day. The periods of a fact this batch superseded are composed again,
so a superseded value does not stay in a roll-up. A roll-up whose text and sources are unchanged (a
replay) is not written again. Roll-ups are for time: recall returns them when a query names a period or
asks for their tier, and they never stand in for the episodes.
"""

from __future__ import annotations

from datetime import datetime

from mneme.consolidation.batch import Batch, Deps, Working
from mneme.consolidation.windows import partition
from mneme.language.digests import Standing, compose, periods, rollup_id
from mneme.language.grounding import confidence
from mneme.models import Episode
from mneme.records import Fact

Period = tuple[str, str, str]  # tier, label, partition


def rollup(deps: Deps, batch: Batch, work: Working) -> Batch:
    facts = work.fact_map()
    keys = deps.settings.partition_keys
    replaced = {d.replaces for d in batch.decisions if d.action == "supersede" and d.replaces}
    again = [i for fact_id in replaced if fact_id in facts for i in facts[fact_id].source_episode_ids]
    new = work.episodes(batch.episode_ids)
    touched = {**work.episodes(again), **new}
    days: dict[Period, set[str]] = {}
    for episode in touched.values():
        ((_, day), _) = periods(episode)
        days.setdefault(("daily", day, partition(episode, keys)), set()).update(
            [episode.episode_id] if episode.episode_id in new else []
        )
    daily = {key: _sources(batch, facts, key, added) for key, added in days.items()}
    weeks = {("weekly", _week_of(day), part) for _, day, part in daily}
    weekly = {key: _week(batch, facts, key, daily) for key in weeks}
    standing = Standing.of(work.facts())
    now = deps.clock.now()
    rolled = []
    for key, ids in sorted({**daily, **weekly}.items()):
        if not ids or (key[0] == "weekly" and any(ids == d for (_, _, part), d in daily.items() if part == key[2])):
            continue  # a week with one active day would repeat it
        previous = facts.get(rollup_id(batch.tenant, batch.scope_id, *key))
        fact = _rolled(batch, key, ids, previous, standing, work, now)
        if fact is not None:
            rolled.append(fact)
    if rolled:
        vectors = deps.embedder.embed([f.summary for f in rolled])
        rolled = [
            f.model_copy(update={"vector": v.tolist(), "model_id": deps.embedder.model_id})
            for f, v in zip(rolled, vectors, strict=True)
        ]
        work.put_facts(rolled)
    batch.count("rollup", "rollups", len(rolled))
    return batch


def _sources(batch: Batch, facts: dict[str, Fact], key: Period, added: set[str]) -> set[str]:
    """A day's sources: those of its roll-up so far, and this batch's turns of that day and partition."""
    previous = facts.get(rollup_id(batch.tenant, batch.scope_id, *key))
    return set(previous.source_episode_ids if previous else []) | added


def _week_of(day: str) -> str:
    year, week, _ = datetime.strptime(day, "%Y-%m-%d").isocalendar()
    return f"{year}-W{week:02d}"


def _week(batch: Batch, facts: dict[str, Fact], key: Period, daily: dict[Period, set[str]]) -> set[str]:
    """A week's sources: its days' (this batch's, else their roll-ups')."""
    _, week, part = key
    year, number = (int(x) for x in week.split("-W"))
    ids: set[str] = set()
    for weekday in range(1, 8):
        day = f"{datetime.fromisocalendar(year, number, weekday):%Y-%m-%d}"
        found = daily.get(("daily", day, part))
        if found is None:
            previous = facts.get(rollup_id(batch.tenant, batch.scope_id, "daily", day, part))
            found = set(previous.source_episode_ids) if previous else set()
        ids |= found
    return ids


def _rolled(
    batch: Batch,
    key: Period,
    ids: set[str],
    previous: Fact | None,
    standing: Standing,
    work: Working,
    now: datetime,
) -> Fact | None:
    """The roll-up of one period and partition, or None when it is unchanged or has nothing to say."""
    found = work.episodes(sorted(ids))
    turns: list[Episode] = sorted(found.values(), key=lambda e: (e.occurred_at, e.created_at, e.sequence))
    if not turns:
        return None
    text = compose(key[0], standing, turns)
    source_ids = sorted(found)
    if not text or (previous is not None and previous.summary == text and previous.source_episode_ids == source_ids):
        return None  # small talk only, or rolled already (a replay writes nothing)
    return Fact(
        tenant=batch.tenant,
        fact_id=rollup_id(batch.tenant, batch.scope_id, *key),
        scope_id=batch.scope_id,
        tier=key[0],
        summary=text,
        confidence=confidence(len(source_ids), False),
        source_episode_ids=source_ids,
        valid_from=turns[0].occurred_at,
        created_at=previous.created_at if previous else now,
        updated_at=now,
        reinforced_at=previous.reinforced_at if previous else now,
    )
