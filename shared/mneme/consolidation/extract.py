"""The extract stage: one reasoner call per window, each proposal checked against the turns it cites.

A window's turns go to the reasoner with the scope's current facts on the window's subjects (`known`); a
proposal citing a turn outside the window, or whose entity or value its turns do not state, is refused and
the others are kept. A window with nothing kept and something refused (or an answer that was no reading)
is asked once more, told why; after ATTEMPTS it is set aside with the reason. One the reasoner was
unavailable for holds the checkpoint (an error) until MAX_HOLDS runs in a row have held it, then it is set
aside too; after OUTAGE unavailable windows in a row the stage stops calling. Any other error
(`ReasonerRefused`: access denied, unknown model; a bug) is a configuration problem: it stops the stage.
Calls and tokens are counted (`reasoner_calls`, `input_tokens`, `output_tokens`) and sent as metrics.
"""

from __future__ import annotations

import json
import re
import time
from contextvars import ContextVar

from mneme.consolidation.batch import Batch, Deps, Working, set_aside
from mneme.errors import ReasonerOutputInvalid, StoreUnavailable, Throttled
from mneme.language.grounding import grounding_error, turn_of
from mneme.models import Episode
from mneme.observability import count, logger
from mneme.records import MAX_SUMMARY, Fact, KnownFact, Proposal, Reading, Turn, is_claim, norm

MAX_HOLDS = 3  # runs in a row a scope's checkpoint may be held by an unavailable reasoner
OUTAGE = 3  # windows in a row the reasoner was unavailable for: the stage stops calling it
ATTEMPTS = 2  # reasoner calls per window and run
MAX_KNOWN = 20  # current facts given with a window, at most (the most recent on its subjects)
MAX_PER_WINDOW = 60  # proposals kept of one window
# Of a batch's JSON (a Step Functions state: 256 KiB at most), what its proposals and window summaries may
# take; past it, the windows not yet read wait for the next batch (`_defer`), so no batch can outgrow a state.
PROPOSAL_BYTES = 160 * 1024
# When extract must stop calling the reasoner (time.monotonic()): set per task in AWS from the Lambda's
# remaining time (`ConsolidationService.step`), so every call ends within the task's time; None locally.
DEADLINE: ContextVar[float | None] = ContextVar("consolidation_deadline", default=None)
NAME = re.compile(r"\b[A-Z][\w'-]+")


def extract(deps: Deps, batch: Batch, work: Working) -> Batch:
    found = work.episodes([i for ids in batch.clusters for i in ids])
    give_up = batch.holds + 1 >= MAX_HOLDS  # this run is the last that may hold the checkpoint
    current = [f for f in work.facts() if f.tier == "raw" and f.status == "active" and is_claim(f)]
    outage, used = 0, 0
    deadline = DEADLINE.get()
    for index, ids in enumerate(batch.clusters):
        if deadline is not None and time.monotonic() >= deadline:
            _defer(batch, found, index, "deferred")
            break
        if used > PROPOSAL_BYTES:
            _defer(batch, found, index, "deferred_for_room")
            break
        present = [found[i] for i in ids if i in found]
        if not present:
            continue
        if outage >= OUTAGE:
            _unavailable(batch, index, "the reasoner was unavailable for the windows before", give_up)
            continue
        turns = [turn_of(e, n) for n, e in enumerate(present, 1)]
        known = known_facts(current, turns)
        kept, problem, transient = _read(deps, batch, turns, known)
        if kept is not None:
            batch.clusters[index] = [e.episode_id for e in present]
            if kept:
                batch.proposals[index] = kept
            used += len(json.dumps([p.model_dump(mode="json") for p in kept]))
            outage = 0
        elif transient:
            outage += 1
            _unavailable(batch, index, problem, give_up)
        else:
            outage = 0
            set_aside(batch, index, f"not consolidated after {ATTEMPTS} attempts: {problem}")
    batch.count("extract", "proposals", sum(len(kept) for kept in batch.proposals.values()))
    return batch


def known_facts(current: list[Fact], turns: list[Turn]) -> list[KnownFact]:
    """The current claims on the window's subjects (an entity whose name its turns say, or a speaker's own),
    the MAX_KNOWN most recent, each under a key a proposal that updates it names ("F1", ...)."""
    names = {norm(t.speaker) for t in turns if t.speaker} | {norm(w) for t in turns for w in NAME.findall(t.text)}
    on = [f for f in current if norm((f.entity or "").split("'s")[0]) in names]
    on.sort(key=lambda f: (f.valid_from, f.fact_id), reverse=True)
    return [
        KnownFact(key=f"F{n}", fact_id=f.fact_id, summary=f.summary, since=f.valid_from)
        for n, f in enumerate(on[:MAX_KNOWN], 1)
    ]


def _read(
    deps: Deps, batch: Batch, turns: list[Turn], known: list[KnownFact]
) -> tuple[list[Proposal] | None, str, bool]:
    """(the grounded proposals, or None when the window is not read; why not; whether the last failure was
    the reasoner being unavailable). A generative reasoner's account of the window becomes a proposal of
    its own citing every turn (a summary fact: roll-ups say it), unless it copies a turn."""
    feedback: str | None = None
    problem, transient = "no answer", False
    texts = [t.said() for t in turns]
    for _attempt in range(ATTEMPTS):
        try:
            reading = _call(deps, batch, turns, known, feedback)
        except (StoreUnavailable, Throttled) as e:  # transient: retry without blaming the answer
            problem, transient = f"{e.code}: {e.message}", True
            batch.count("extract", "reasoner_failures")
            continue
        except ReasonerOutputInvalid as e:  # a bad answer: retry, told why
            problem = feedback = f"{e.code}: {e.message}"
            transient = False
            batch.count("extract", "reasoner_failures")
            continue
        kept, refused = _grounded(deps, batch, reading, texts, known)
        if kept or not (refused or reading.problems):
            return [*kept[: MAX_PER_WINDOW - 1], *_summary(deps, reading, texts)], "", False
        problem = feedback = "; ".join([*refused, *reading.problems][:5])
        transient = False
    return None, problem, transient


def _call(deps: Deps, batch: Batch, turns: list[Turn], known: list[KnownFact], feedback: str | None) -> Reading:
    batch.count("extract", "reasoner_calls")
    count("ConsolidationReasonerCalls")
    reading = deps.reasoner.propose(turns, known, feedback)
    used = reading.input_tokens + reading.output_tokens
    if used:  # a reasoner without a model uses none: no counter
        batch.count("extract", "input_tokens", reading.input_tokens)
        batch.count("extract", "output_tokens", reading.output_tokens)
        count("ConsolidationReasonerTokens", used)
    return reading


def _grounded(
    deps: Deps, batch: Batch, reading: Reading, texts: list[str], known: list[KnownFact]
) -> tuple[list[Proposal], list[str]]:
    """The proposals the turns they cite support (a supersession's key resolved to the fact's id), and why
    each other one was refused."""
    keys = {k.key: k.fact_id for k in known}
    kept: list[Proposal] = []
    refused: list[str] = []
    for n, proposal in enumerate(reading.facts, 1):
        why = grounding_error(proposal, texts, generative=deps.reasoner.generative)
        if why is None and proposal.supersedes is not None and proposal.supersedes not in keys:
            why = f"supersedes {proposal.supersedes!r}, which is none of the known facts' keys"
        if why is not None:
            refused.append(f"fact {n}: {why}")
            continue
        replaced = keys.get(proposal.supersedes or "")
        kept.append(proposal.model_copy(update={"supersedes": replaced}))
    if refused:
        batch.count("extract", "rejected", len(refused))
        logger.info("proposals refused", extra={"refused": refused[:5], "count": len(refused)})
    if reading.problems:
        batch.count("extract", "invalid", len(reading.problems))
    return kept, refused


def _summary(deps: Deps, reading: Reading, texts: list[str]) -> list[Proposal]:
    """The window's account as a summary proposal citing every turn, when a generative reasoner gave one
    that does not copy a turn, for a window of two turns or more (a lone turn stays an episode)."""
    text = " ".join((reading.summary or "").split())[:MAX_SUMMARY]
    if not (text and deps.reasoner.generative and len(texts) > 1):
        return []
    proposal = Proposal(summary=text, sources=list(range(1, len(texts) + 1)))
    return [proposal] if grounding_error(proposal, texts, generative=True) is None else []


def _defer(batch: Batch, found: dict[str, Episode], index: int, why: str) -> None:
    """Out of time or room at window `index`: the batch ends just before the first episode (in collection
    order) of a window not yet read; those episodes wait for the next batch (`full`: the loop goes on). A
    window already read that reaches past the cut is committed now and found `unchanged` next time."""
    fresh = set(batch.episode_ids)
    waiting = {i for ids in batch.clusters[index : max(index, batch.returning_from)] for i in ids if i in fresh}
    batch.count("extract", why, len(batch.clusters) - index)
    batch.clusters = batch.clusters[:index]  # windows offered again and not tried wait as they were
    if not waiting:
        return
    cut = min(batch.episode_ids.index(i) for i in waiting)
    if cut == 0 or batch.episode_ids[cut - 1] not in found:
        batch.fail("extract", "out of time before a window could be read")
        return
    batch.episode_ids = batch.episode_ids[:cut]
    last = found[batch.episode_ids[-1]]
    batch.last, batch.full = (last.created_at, last.episode_id), True


def _unavailable(batch: Batch, index: int, problem: str, give_up: bool) -> None:
    if give_up:
        set_aside(batch, index, f"the reasoner was unavailable in {MAX_HOLDS} runs in a row: {problem}")
    else:
        message = f"window not consolidated, the reasoner was unavailable: {problem}"
        batch.fail("extract", message, episode_ids=batch.clusters[index])
