"""The rollup stage: daily and weekly digests of the batch's episodes."""

from __future__ import annotations

from mneme.consolidation.batch import Batch, Deps, Working
from mneme.grounding import confidence, digest, utterance
from mneme.models import Episode
from mneme.records import Fact, derived_id, is_claim


def _periods(episode: Episode) -> list[tuple[str, str]]:
    year, week, _ = episode.occurred_at.isocalendar()
    return [("daily", f"{episode.occurred_at:%Y-%m-%d}"), ("weekly", f"{year}-W{week:02d}")]


def rollup(deps: Deps, batch: Batch, work: Working) -> Batch:
    """Daily and weekly digests of the batch's episodes, merged with earlier ones of the period: the
    active claims stated in the period and its topics (`digest`). Roll-ups are for time: recall returns
    them when a query names a period or asks for their tier, and they never stand in for the episodes.

    A superseded value does not stay in a roll-up as current: the periods of a fact this batch
    superseded are re-rolled, from the active claims and the turns that are not the sources of a
    superseded (or expired) claim. A period whose episodes were all rolled already (a replay) is left
    as it is. An STTP episode contributes its node's text."""
    facts = work.facts()
    outdated = {i for f in facts if f.tier == "raw" and f.status != "active" and f.entity for i in f.source_episode_ids}
    replaced = {d.replaces for d in batch.decisions if d.action == "supersede" and d.replaces}
    rerolled = {i for f in facts if f.fact_id in replaced for i in f.source_episode_ids}
    wanted = set(batch.episode_ids) | rerolled
    periods: dict[tuple[str, str], set[str]] = {}
    for episode in work.episodes(sorted(wanted)).values():
        for key in _periods(episode):
            periods.setdefault(key, set()).add(episode.episode_id)
    ids = {key: derived_id("ro_", batch.tenant, batch.scope_id, *key) for key in periods}
    existing = work.fact_map()
    claims = sorted((f for f in facts if f.tier == "raw" and f.status == "active" and is_claim(f)),
                    key=lambda f: (f.valid_from, f.fact_id))  # fmt: skip
    now = deps.clock.now()
    rolled = []
    for (tier, label), members in sorted(periods.items()):
        previous = existing.get(ids[tier, label])
        if previous is not None and members <= set(previous.source_episode_ids) and not members & rerolled:
            continue  # rolled already: a replay writes nothing
        source_ids = sorted({*(previous.source_episode_ids if previous else []), *members})
        found = work.episodes(source_ids)
        present = [i for i in source_ids if i in found]
        if not present:
            continue
        stated = [f.summary for f in claims if set(f.source_episode_ids) & set(present)]
        current = [i for i in present if i not in outdated]
        text = digest(stated, [utterance(found[i]) for i in current])
        if not text and current:
            continue  # nothing but small talk ("Lol.", "Night!"): no digest to write
        rolled.append(
            Fact(
                tenant=batch.tenant,
                fact_id=ids[tier, label],
                scope_id=batch.scope_id,
                tier=tier,
                summary=text or "every claim of the period has been superseded since",
                confidence=confidence(len(source_ids), False),
                source_episode_ids=source_ids,
                valid_from=min(found[i].occurred_at for i in present),
                created_at=previous.created_at if previous else now,
                updated_at=now,
                reinforced_at=previous.reinforced_at if previous else now,
            )
        )
    if rolled:
        vectors = deps.embedder.embed([f.summary for f in rolled])
        rolled = [
            f.model_copy(update={"vector": v.tolist(), "model_id": deps.embedder.model_id})
            for f, v in zip(rolled, vectors, strict=True)
        ]
        work.put_facts(rolled)
    batch.count("rollup", "rollups", len(rolled))
    return batch
