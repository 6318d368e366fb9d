"""How a fact rests on the episodes that state it: what a reasoner reads of an episode (its speaker
owns its words), whether a text grounds a claim, the cluster's central text, and confidence from
support. Core rules, used by consolidation, by recall (grounding turns) and by forgetting (a fact
rebuilt from the sources it has left)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mneme.language.text import terms
from mneme.models import Episode
from mneme.records import Proposal, Turn

SPEAKER = re.compile(r"^\s*(?P<name>[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s+(?P<text>\S.*)$", re.S)


def split_speaker(text: str) -> tuple[str | None, str]:
    """('Maya', 'I moved to Berlin.') from 'Maya: I moved to Berlin.'; (None, text) without a prefix."""
    found = SPEAKER.match(text)
    return (found["name"], found["text"]) if found else (None, text.strip())


def speaker_name(episode: Episode) -> str | None:
    """The episode's `speaker` metadata as a name: capitalised word by word (a chat's `ines` or `user`, a role,
    own their words too), or None."""
    speaker = episode.metadata.get("speaker") if isinstance(episode.metadata, dict) else None
    if not isinstance(speaker, str) or not speaker.strip():
        return None
    return " ".join(w[:1].upper() + w[1:] for w in speaker.split())


def utterance(episode: Episode, *, dated: bool = False) -> str:
    """What is read of an episode: its text (an STTP node's content, not its raw form), prefixed `Name: `
    from the `speaker` metadata (`speaker_name`) unless the text already starts with that name, so
    first-person statements have an owner ("I moved to Berlin" said by Maya → Maya / lives in / Berlin)
    and a message's own "Reminder: …" is never taken for its speaker; `dated` prefixes the day it
    occurred: "[2026-03-01] Maya: I moved to Berlin"."""
    text = (episode.search_text or episode.content).strip()
    name = speaker_name(episode)
    if name is not None and split_speaker(text)[0] != name:
        text = f"{name}: {text}"
    return f"[{episode.occurred_at:%Y-%m-%d}] {text}" if dated else text


def turn_of(episode: Episode, number: int) -> Turn:
    """The episode as turn `number` of a window: its speaker (metadata, else a `Name:` prefix of its text) and
    its text without that prefix."""
    name = speaker_name(episode)
    prefixed, text = split_speaker((episode.search_text or episode.content).strip())
    if name is not None and prefixed is not None and prefixed != name:
        text = f"{prefixed}: {text}"  # "Reminder: …" said by Ines: the word is part of what she said
    return Turn(number=number, speaker=name or prefixed, text=text, at=episode.occurred_at)


def confidence(support: int, structured: bool) -> float:
    """Stash's n/(n+2), raised by (1 - base) * 0.3 when entity and property are known."""
    base = support / (support + 2)
    return round(base + (1 - base) * 0.3 if structured else base, 4)


def _supported(phrase: str, corpus: set[str]) -> bool:
    words = {word for word in terms(phrase) if len(word) > 1}  # "Maya's" → maya (the "s" is no word)
    return bool(words) and words <= corpus


def grounds(entity: str | None, value: str | None, text: str) -> bool:
    """Does `text` state a claim about `entity` with `value` (every word of both in it)? A claim fact's
    grounding turns are its sources that do: the ones recall may fold into it and shows beside it."""
    if not entity or not value:
        return False
    corpus = terms(text)
    return _supported(entity, corpus) and _supported(value, corpus)


def supported(entity: str | None, value: str | None, texts: Sequence[str]) -> bool:
    """Do the texts together state a claim about `entity` with `value` (every word of both in them)?"""
    corpus = set().union(*(terms(text) for text in texts)) if texts else set()
    return bool(entity and value) and _supported(entity or "", corpus) and _supported(value or "", corpus)


def grounding_error(proposal: Proposal, texts: Sequence[str], *, generative: bool) -> str | None:
    """Why the window's turns (`texts`, numbered from 1, each led by its speaker) do not support the proposal,
    or None when they do: it must cite turns of the window, and the turns it cites must hold every word of its
    entity and value. A generative reasoner's summary-only proposal must not copy one turn nearly verbatim."""
    if not proposal.summary.strip():
        return "the summary is empty"
    wrong = sorted({n for n in proposal.sources if not 1 <= n <= len(texts)})
    if wrong or not proposal.sources:
        return f"sources must list the numbers (1 to {len(texts)}) of the turns that state the fact, got {wrong or []}"
    cited = [texts[n - 1] for n in sorted(set(proposal.sources))]  # grounded in what it cites
    corpus = set().union(*(terms(text) for text in cited))
    if bool(proposal.entity) != bool(proposal.value) or (proposal.property and not proposal.entity):
        return "entity, property and value come together or not at all"
    if proposal.entity and not _supported(proposal.entity, corpus):
        return f"the entity {proposal.entity!r} does not appear in the turns it cites"
    if proposal.value and not _supported(proposal.value, corpus):
        return f"the value {proposal.value!r} does not appear in the turns it cites"
    if generative and not proposal.entity and len(cited) > 1:
        summary = terms(proposal.summary)
        for text in cited:
            if summary and len(summary & terms(text)) / len(summary) > 0.8:
                return "the summary copies one turn nearly verbatim; summarise the turns instead"
    return None


def central(texts: Sequence[str]) -> str:
    """The text sharing the most terms with the others (ties: the first)."""
    bags = [terms(text) for text in texts]

    def overlap(i: int) -> float:
        return sum(len(bags[i] & other) / max(len(bags[i] | other), 1) for j, other in enumerate(bags) if j != i)

    return texts[max(range(len(texts)), key=lambda i: (overlap(i), -i))]
