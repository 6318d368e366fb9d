"""Session context helps a turn be found, never outrank: the rule recall's fuse stage applies last.

A turn is indexed with the turns said just before it (`Indexer.session_context`): 'Which part of the
city?' makes the reply 'Kralingen, near the lake' findable by a question about the district. But a turn
with no content of its own for the query — none of the query's anchors in what is indexed for the turn
itself (its speaker, words and date), and its own cosine under `hop.LINK_FLOOR`: 'Sure, let me
check' — never outranks a turn of its session whose own words have them: it ranks just below the weakest
of those (`scores.context_only`). A short reply that answers the question ('She's a nurse.') is close
enough in meaning to keep its place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mneme.models import Episode, context_session
from mneme.services.indexing import episode_text
from mneme.services.recall import anchors as anchor_rule
from mneme.services.recall.hop import LINK_FLOOR

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

CONTEXT_ONLY_BELOW = 0.99  # a context-only turn's score, under the weakest turn of its session with its own


def below_context_owners(run: Run, candidates: list[Candidate]) -> None:
    turns = [c for c in candidates if isinstance(c.record, Episode) and context_session(c.record)]
    own = {c.id: anchor_rule.anchor_hits(run.anchors, _own_words(c)) > 0 for c in turns}
    floor: dict[tuple[str, str | None], float] = {}
    for candidate in turns:
        where = _session(candidate)
        if own[candidate.id]:
            floor[where] = min(floor.get(where, candidate.score), candidate.score)
    for candidate in turns:
        below = floor.get(_session(candidate))
        borrowed = "lexical" in candidate.channels and not own[candidate.id] and candidate.vector < LINK_FLOOR
        if borrowed and below is not None and candidate.score >= below:
            candidate.scores["context_only"] = CONTEXT_ONLY_BELOW
            candidate.score = below * CONTEXT_ONLY_BELOW


def _session(candidate: Candidate) -> tuple[str, str | None]:
    assert isinstance(candidate.record, Episode)
    return candidate.record.scope_id, context_session(candidate.record)


def _own_words(candidate: Candidate) -> str:
    assert isinstance(candidate.record, Episode)
    return episode_text(candidate.record)
