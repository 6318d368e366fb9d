"""What a roll-up says: a text a person can read, composed from the facts standing and the turns of its
period, the one place both consolidation (`consolidation.rollup`) and forgetting (`services.forgetting`)
write a roll-up's text.

A roll-up states the period's current claims ("Maya lives in Berlin."), then either the summaries a
generative reasoner wrote of its conversations or, without one, its most informative sentences with their
speakers ("Maya: The flat has a balcony over the canal."), where a sentence a claim was drawn from is quoted
only when it says more than its claims (and never from a turn whose claim was corrected: it says the old
value). Never a word list. A value that is no longer current (a claim
superseded, expired or marked stale since) is not restated, and the turns that stated it are not quoted; a
period left with nothing to say gets no roll-up (small talk only) or says so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from mneme.language.changes import NOTE_TAKERS
from mneme.language.grounding import supported, turn_of
from mneme.language.text import GENERIC, STOPWORDS, words
from mneme.models import Episode
from mneme.records import Fact, derived_id, is_claim

QUOTES = {"daily": 4, "weekly": 6}  # sentences a roll-up quotes (other tiers: the weekly figure)
MAX_CLAIMS = 12  # claims a roll-up states, the earliest first
MAX_SENTENCE = 240  # characters: a longer sentence is not quoted (never cut mid-sentence)
MIN_WORDS = 3  # content words a quoted sentence has at least
SENTENCE = re.compile(r"(?<=[.!?])\s+")
# A sentence opening on a pronoun says whom it is about only beside the sentence before it, in its turn.
PRONOUN = re.compile(
    r"^(?:he|she|they|it|his|her|hers|their|theirs|him|them|its|mine|this|that|these|those)(?:'s|'re|'ve|'d|'ll)?\b",
    re.I,
)
# Words of greeting, assent and laughter: they never make a sentence worth quoting.
CHATTER = frozenset(
    "haha hahaha lol lmao yeah yep yes nope okay thanks thank night morning evening hello cool nice great "
    "sure right really sorry good well just awesome wow".split()
)
NOTHING_CURRENT = "Nothing said in this period is current: what it stated has changed since."


def rollup_id(tenant: str, scope_id: str, tier: str, label: str, partition: str = "") -> str:
    """A roll-up's id: its scope, tier, period ("2026-03-02", "2026-W10") and partition ("" for none)."""
    return derived_id("ro_", tenant, scope_id, tier, label, *([partition] if partition else []))


def periods(episode: Episode) -> list[tuple[str, str]]:
    """The (tier, label) of each period the episode falls in: its day and its ISO week."""
    year, week, _ = episode.occurred_at.isocalendar()
    return [("daily", f"{episode.occurred_at:%Y-%m-%d}"), ("weekly", f"{year}-W{week:02d}")]


@dataclass(frozen=True)
class Standing:
    """What of a scope's facts a roll-up may say: the claims standing, and the summaries of conversations
    a generative reasoner wrote (facts without entity), each with the turns it rests on; and the turns
    whose values are no longer current (sources of a claim superseded, expired or stale)."""

    claims: list[Fact]
    summaries: list[Fact]
    outdated: set[str]
    old_values: list[tuple[str, str]]  # (entity, value) of every claim no longer current

    @classmethod
    def of(cls, facts: Sequence[Fact]) -> Standing:
        raw = [f for f in facts if f.tier == "raw" and f.status != "archived"]
        current = [f for f in raw if f.status == "active" and not f.stale]
        now = {f.fact_id for f in current}
        past = [f for f in raw if is_claim(f) and f.fact_id not in now]
        return cls(
            claims=sorted((f for f in current if is_claim(f)), key=lambda f: (f.valid_from, f.fact_id)),
            summaries=sorted((f for f in current if not f.entity), key=lambda f: (f.valid_from, f.fact_id)),
            outdated={i for f in past for i in f.source_episode_ids},
            old_values=[(f.entity or "", f.value or "") for f in past],
        )


def compose(tier: str, standing: Standing, turns: Sequence[Episode]) -> str:
    """The text of a roll-up over `turns` (its sources present, in the order they were said): the claims
    drawn from them, then the summaries of their conversations or, lacking any, their most informative
    sentences. "" when the period holds nothing but small talk."""
    ids = {e.episode_id for e in turns}
    claims = [f.summary for f in standing.claims if ids & set(f.source_episode_ids)][:MAX_CLAIMS]
    summaries = [
        f.summary
        for f in standing.summaries
        if ids & set(f.source_episode_ids) and not any(supported(e, v, [f.summary]) for e, v in standing.old_values)
    ]
    said: dict[str, set[str]] = {}  # a turn's words its claims say: only a sentence saying more is quoted
    for claim in standing.claims:
        for i in claim.source_episode_ids:
            said.setdefault(i, set()).update(words(claim.summary))
    corrected = {i for f in standing.claims if f.version > 1 for i in f.source_episode_ids}  # the old value
    quoted = [e for e in turns if e.episode_id not in standing.outdated and e.episode_id not in corrected]
    body = summaries or quotes(quoted, QUOTES.get(tier, 6), said)
    lines = ([" ".join(claims)] if claims else []) + body
    if lines:
        return "\n".join(lines)
    return NOTHING_CURRENT if any(e.episode_id in standing.outdated for e in turns) else ""


def quotes(turns: Sequence[Episode], limit: int, claimed: dict[str, set[str]] | None = None) -> list[str]:
    """The `limit` most informative sentences of the turns, each with its speaker, in the order said: no
    question, no small talk (fewer than MIN_WORDS content words, not counting the words the claims drawn
    from the turn say: `claimed`), none over MAX_SENTENCE characters; a sentence opening on a pronoun ("She's
    a charge nurse now") only with the sentence before it in its turn, which says who; an assistant's only
    when no one else spoke in the period; a sentence scores by how rare its words are in the period (what
    only it says), names and numbers a little more; near-repeats of a sentence already taken are left out."""
    read = [(episode, turn_of(episode, 1)) for episode in turns]
    people = [(e, t) for e, t in read if (t.speaker or "").lower() not in NOTE_TAKERS]
    candidates: list[tuple[int, str, set[str], float]] = []
    for position, (episode, turn) in enumerate(people or read):
        known = (claimed or {}).get(episode.episode_id, set())
        for said in _sentences(turn.text):
            content = {w for w in words(said) if len(w) > 2 and w not in STOPWORDS | GENERIC | CHATTER}
            if said.endswith("?") or len(said) > MAX_SENTENCE or len(content - known) < MIN_WORDS:
                continue
            shown = f"{turn.speaker}: {said}" if turn.speaker else said
            candidates.append((position, shown, content, _salience(said)))
    spread = Counter(w for _, _, content, _ in candidates for w in content)
    ranked = sorted(
        candidates, key=lambda c: (-(sum(1 / spread[w] for w in c[2]) + c[3]), c[0])
    )  # rare words first, then the earlier
    taken: list[tuple[int, str, set[str], float]] = []
    for candidate in ranked:
        if len(taken) == limit:
            break
        if all(len(candidate[2] & t[2]) / len(candidate[2] | t[2]) <= 0.5 for t in taken):
            taken.append(candidate)
    return [shown for _, shown, _, _ in sorted(taken, key=lambda c: c[0])]


def _sentences(text: str) -> list[str]:
    """A turn's sentences, one opening on a pronoun joined to the sentence before it (none before it: left out)."""
    found: list[str] = []
    for sentence in SENTENCE.split(text):
        said = " ".join(sentence.split())
        if said and PRONOUN.match(said):
            if found:
                found[-1] = f"{found[-1]} {said}"
        elif said:
            found.append(said)
    return found


def _salience(sentence: str) -> float:
    """A little weight for names (capitalised words past the first) and numbers: they carry facts."""
    tokens = sentence.split()
    names = sum(1 for t in tokens[1:] if t[:1].isupper())
    numbers = sum(1 for t in tokens if any(ch.isdigit() for ch in t))
    return 0.25 * min(names, 4) + 0.25 * min(numbers, 4)
