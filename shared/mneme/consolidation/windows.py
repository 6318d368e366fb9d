"""The cluster stage: a batch's episodes as conversation windows, the unit a reasoner reads in one call.

A window is one scope's turns in the order they were said (`session_position`: time, then the order they
were given in), from one session, or from one day for episodes without a session, and from one partition
(`ConsolidationSettings.partition_keys`: turns whose metadata differ on a partition key never share a
window, so no fact or roll-up mixes them), cut into consecutive pieces of at most `window_tokens` tokens.
With its speakers and times the reasoner can tell who "I" is and what "it" or "that" refers to.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from mneme.consolidation.backoff import offered
from mneme.consolidation.batch import Batch, Deps, Working
from mneme.consolidation.reasoning import TURN_OVERHEAD, tokens
from mneme.models import Episode, session_position


def partition(episode: Episode, keys: Sequence[str]) -> str:
    """The episode's partition: its values of the partition keys, as canonical JSON ("" when it has none).
    Two episodes of one partition agree on every key (a key one of them lacks is a difference too)."""
    metadata = episode.metadata if isinstance(episode.metadata, dict) else {}
    values = {key: metadata[key] for key in keys if key in metadata}
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False) if values else ""


def group(episode: Episode, keys: Sequence[str]) -> tuple[str, str]:
    """(its session, or its day when it has none; its partition): the turns one window may hold."""
    where = f"session:{episode.session_id}" if episode.session_id is not None else f"day:{episode.occurred_at:%Y-%m-%d}"
    return where, partition(episode, keys)


def windows(episodes: Sequence[Episode], budget: int, keys: Sequence[str]) -> list[list[Episode]]:
    """The episodes as windows: grouped (`group`), each group in the order its turns were said, cut where the
    next turn would take the window over `budget` tokens; groups in the order of their first turn."""
    groups: dict[tuple[str, str], list[Episode]] = {}
    for episode in episodes:
        groups.setdefault(group(episode, keys), []).append(episode)
    ordered = [sorted(g, key=lambda e: (session_position(e), e.episode_id)) for g in groups.values()]
    ordered.sort(key=lambda g: (session_position(g[0]), g[0].episode_id))
    out: list[list[Episode]] = []
    for turns in ordered:
        window: list[Episode] = []
        used = 0
        for episode in turns:
            cost = tokens(episode.search_text or episode.content) + TURN_OVERHEAD
            if window and used + cost > budget:
                out.append(window)
                window, used = [], 0
            window.append(episode)
            used += cost
        out.append(window)
    return out


def cluster(deps: Deps, batch: Batch, work: Working) -> Batch:
    """The batch's windows (`windows`). A full batch (more episodes are waiting) whose last episodes are one
    conversation (a session, or a day's turns, given one after the other) ends before it: that conversation
    may go on in the next batch and is read whole there, not in two halves (unless it began the batch: a
    conversation longer than a batch is read in pieces; nor when it is interleaved with others)."""
    found = work.episodes(batch.episode_ids)
    collected = [found[i] for i in batch.episode_ids if i in found]
    keys = deps.settings.partition_keys
    if batch.full and collected:
        tail = group(collected[-1], keys)
        cut = len(collected)
        while cut > 0 and group(collected[cut - 1], keys) == tail:
            cut -= 1
        if cut > 0 and all(group(e, keys) != tail for e in collected[:cut]):
            batch.count("cluster", "held_back", len(collected) - cut)
            collected = collected[:cut]
            batch.episode_ids = batch.episode_ids[: batch.episode_ids.index(collected[-1].episode_id) + 1]
            batch.last = (collected[-1].created_at, collected[-1].episode_id)
    batch.clusters = [[e.episode_id for e in w] for w in windows(collected, deps.settings.window_tokens, keys)]
    batch.returning_from = len(batch.clusters)  # windows set aside before and due again come after the new ones
    batch.clusters += [w.episode_ids for w in batch.returning]
    offered(batch)
    batch.count("cluster", "clusters", len(batch.clusters))
    return batch
