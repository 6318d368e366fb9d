"""Records consolidation writes and the store keeps: facts, contradictions, per-scope checkpoints, runs,
and the proposal a reasoner makes for a cluster. Core models, beside `mneme.models`: ports, services and
adapters read them without importing the consolidation package."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

FactStatus = Literal["active", "superseded", "expired", "archived"]
RunStatus = Literal["running", "succeeded", "partial", "failed"]


def derived_id(prefix: str, *parts: str) -> str:
    """Ids derived from content, so a replayed batch writes the same records again, not new ones."""
    return prefix + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def norm(text: str) -> str:
    return " ".join(text.lower().split())


MAX_ENTITY, MAX_PROPERTY, MAX_VALUE, MAX_SUMMARY = 120, 80, 200, 400  # characters (a reasoner's answer)
MAX_CITED = 50  # turns one proposal may cite


class Proposal(BaseModel):
    """One fact a reasoner proposes for a window of turns. Entity/property/value may be absent (a summary
    only, which only a generative reasoner's summary of two or more turns turns into a fact). `sources`: the
    turns that state it, by their number in the window (from 1); the fact's sources are those episodes.
    `supersedes`: an earlier fact this one updates, by the key it was given under ("F2"; after the extract
    stage, that fact's id). The LLM reasoners' JSON schema is generated from this model
    (`adapters.models.reasoners.ANSWER_SCHEMA`); the lengths are limits an answer is held to."""

    entity: str | None = Field(
        None,
        max_length=MAX_ENTITY,
        description="Who or what it is about, by name (the speaker for 'I', 'my').",
    )
    property: str | None = Field(
        None, max_length=MAX_PROPERTY, description="The attribute, e.g. 'lives in', 'manager'."
    )
    value: str | None = Field(None, max_length=MAX_VALUE, description="Its value, in the turns' words.")
    summary: str = Field(max_length=MAX_SUMMARY, description="One self-contained sentence, with names.")
    sources: list[int] = Field(
        default_factory=list, max_length=MAX_CITED, description="The numbers of the turns that state it."
    )
    supersedes: str | None = Field(
        None, max_length=40, description="The key of the known fact it updates ('F2'), or null."
    )


class Turn(BaseModel):
    """One turn of a window as a reasoner reads it: its number in the window (from 1), its speaker (from its
    `speaker` metadata or a `Name:` prefix; None when unknown), its text and when it was said."""

    number: int
    speaker: str | None = None
    text: str
    at: datetime

    def said(self) -> str:
        """'Maya: I moved to Berlin.' (the text alone without a speaker)."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


class KnownFact(BaseModel):
    """A current fact of the scope given to a reasoner with a window, under a short key ("F1"): a proposal
    that updates it names that key in `supersedes`."""

    key: str
    fact_id: str
    summary: str
    since: datetime


class Reading(BaseModel):
    """A reasoner's answer for one window: the facts it proposes, a generative reasoner's account of the
    window (`summary`, for roll-ups), what of its answer was refused by the schema (`problems`: the rest is
    kept) and the tokens the call used (0 for a reasoner without a model)."""

    facts: list[Proposal] = Field(default_factory=list)
    summary: str | None = None
    problems: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0


def is_claim(proposal: Proposal | Fact) -> bool:
    """A claim: entity, property and value all stated."""
    return bool(proposal.entity and proposal.property and proposal.value)


# Properties an entity may hold several values of at once: a second value is one more, not a change ("Dario |
# son | Leo", then "Dario | son | Max"); only a source that says a change supersedes one ("switched from Jira to
# Linear"). The relatives one has one of at a time (a mother, a wife) are not here.
RELATIVES_MANY = frozenset(  # the relatives one may have several of
    "sister brother son daughter child children kid friend cousin aunt uncle niece nephew grandson granddaughter "
    "grandchild grandchildren stepson stepdaughter flatmate roommate housemate neighbour neighbor colleague".split()
)
MANY_VALUED = frozenset({"uses", "has", "speaks", "studies", "studied", "owns", "allergic to"}) | RELATIVES_MANY


def many_valued(prop: str) -> bool:
    """`prop` is one of MANY_VALUED, its plural or its name ("sister's name", "cousins' names")."""
    bare = norm(prop).removesuffix("'s name").removesuffix("' names")
    return bare in MANY_VALUED or bare.removesuffix("s") in MANY_VALUED


VERB_PROPERTIES = {  # properties that read as a verb phrase: "Maya lives in Berlin"
    "lives in": "lives in", "from": "is from", "works at": "works at", "works as": "works as",
    "uses": "uses", "allergic to": "is allergic to", "has": "has", "speaks": "speaks", "studies": "studies",
    "studied": "studied", "owns": "owns", "prefers": "prefers", "age": "is", "diet": "is", "intolerance": "is",
    "married to": "is married to", "engaged to": "is engaged to", "studies at": "studies at",
    "responsible for": "is responsible for",
}  # fmt: skip
PLURAL_VERBS = {"lives in": "live in", "works at": "work at", "works as": "work as", "is from": "are from",
                "uses": "use", "is allergic to": "are allergic to", "has": "have", "speaks": "speak",
                "studies": "study", "owns": "own", "prefers": "prefer", "is": "are"}  # fmt: skip
PLURAL_PEOPLE = frozenset({"parents", "kids", "children", "grandparents", "twins", "in-laws", "folks"})
AN_LETTERS = "AEFHILMNORSX"  # acronyms said with a vowel first: "an SRE", "an MP", "a CTO"


def _article(role: str) -> str:
    """'data engineer' -> 'a data engineer', 'SRE' -> 'an SRE'; a role that has an article keeps it."""
    first = role.split()[0] if role.split() else ""
    if first.lower() in ("a", "an", "the"):
        return role
    if first.isupper() and len(first) > 1:
        return f"{'an' if first[0] in AN_LETTERS else 'a'} {role}"
    vowel = first[:1].lower() in "aeiou" and not first.lower().startswith(("uni", "use", "usu", "eu", "one"))
    return f"{'an' if vowel or first.lower().startswith(('hour', 'honest')) else 'a'} {role}"


def _plural(prop: str) -> bool:
    last = prop.split()[-1].lower() if prop.split() else ""
    return last.endswith("s") and not last.endswith(("ss", "us", "is", "ics", "'s", "news", "series"))


def sentence(entity: str, prop: str, value: str) -> str:
    """A claim as one self-contained English sentence: "Maya lives in Berlin.", "Tom's dog's name is
    Biscuit.", "Priya works as a data engineer.", "The billing migration's deadline is 14 March 2026."."""
    subject = entity[:1].upper() + entity[1:]
    if prop == "works as":
        value = _article(value)
    if prop in VERB_PROPERTIES:
        verb = VERB_PROPERTIES[prop]
        if subject.split()[-1] in PLURAL_PEOPLE:  # "Iris's parents live in Porto"
            verb = PLURAL_VERBS.get(verb, verb)
        text = f"{subject} {verb} {value}"
    else:
        text = f"{subject}'s {prop} {'are' if _plural(prop) else 'is'} {value}"
    return text if text.endswith((".", "!", "?")) else f"{text}."


class Fact(BaseModel):
    tenant: str
    fact_id: str
    scope_id: str
    tier: str = "raw"  # raw for extracted facts; daily/weekly/... for roll-ups
    entity: str | None = None
    property: str | None = None
    value: str | None = None
    summary: str
    confidence: float
    source_episode_ids: list[str]
    valid_from: datetime
    valid_until: datetime | None = None
    superseded_by: str | None = None
    status: FactStatus = "active"
    stale: bool = False
    # A later episode that changes the fact's subject ("I moved to York" after "lives in Leeds") when the new value
    # could not be read from it: the fact is stale since `changed_at`, and recall ranks that episode above it.
    changed_by: str | None = None
    changed_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    reinforced_at: datetime
    model_id: str | None = None
    vector: list[float] | None = None
    version: int = 1  # raised by each correction (`PATCH /v1/facts/{id}`); a stale version is a Conflict

    @staticmethod
    def id_for(tenant: str, scope_id: str, proposal: Proposal, sources: list[str]) -> str:
        if proposal.entity and proposal.property and proposal.value:
            return derived_id(
                "fa_", tenant, scope_id, norm(proposal.entity), norm(proposal.property), norm(proposal.value)
            )
        return derived_id("fa_", tenant, scope_id, "sources", *sorted(sources))

    def valid_at(self, when: datetime) -> bool:
        return self.valid_from <= when and (self.valid_until is None or when < self.valid_until)


class Contradiction(BaseModel):
    tenant: str
    contradiction_id: str
    scope_id: str
    entity: str
    property: str
    old_fact_id: str
    new_fact_id: str
    old_value: str
    new_value: str
    resolution: Literal["superseded", "unresolved"]
    created_at: datetime


class Waiting(BaseModel):
    """A window set aside, waiting to be offered to the reasoner again at `due` (its episodes were read past:
    the checkpoint moved on). `attempts`: how many times it was set aside (the backoff grows with it)."""

    episode_ids: list[str]
    reason: str
    attempts: int = 1
    due: datetime


class Checkpoint(BaseModel):
    """How far consolidation has read a scope's episodes: the last (created_at, episode_id) taken.
    `held`: how many runs in a row held it at this place (a batch with errors); bounded by
    `stages.MAX_HOLDS`, after which the clusters that still fail are set aside and it moves on.
    `set_aside` / `returned`: the latest MAX_KEPT windows set aside, and offered again, when it moved, each
    with its run's id (what the Step Functions `finish` task copies into the run record, so no payload
    carries them). `waiting`: the windows set aside that will be offered again (`extract.backoff`)."""

    tenant: str
    scope_id: str
    after_created_at: datetime | None = None
    after_episode_id: str = ""
    version: int = 0
    processed: int = 0
    held: int = 0
    set_aside: list[dict[str, Any]] = Field(default_factory=list)  # the latest clusters set aside, with run_id
    returned: list[dict[str, Any]] = Field(default_factory=list)  # the latest offered again, with run_id
    waiting: list[Waiting] = Field(default_factory=list)


class StageReport(BaseModel):
    counters: dict[str, int] = Field(default_factory=dict)
    errors: list[dict[str, Any]] = Field(default_factory=list)


MAX_SET_ASIDE = 50  # clusters a run record lists as set aside (all are counted: extract.set_aside)
MAX_LISTED_IDS = 5  # episode ids an error or a set-aside cluster lists (with the count of all)
MAX_KEPT = 20  # set-aside clusters a scope's checkpoint keeps (the latest)
MAX_FACTS_LISTED = 100  # facts a run record lists as written (all are counted: commit.facts_written)


def listed(ids: list[str]) -> dict[str, Any]:
    """A bounded mention of episodes in a run record: the first few ids and how many there were."""
    return {"episode_ids": ids[:MAX_LISTED_IDS], "episodes": len(ids)}


class Run(BaseModel):
    tenant: str
    run_id: str
    status: RunStatus = "running"
    scopes: list[str] = Field(default_factory=list)
    stages: dict[str, StageReport] = Field(default_factory=dict)
    started_at: datetime
    finished_at: datetime | None = None
    requested_by: str
    # Until when the run's runner holds it: renewed with its scope leases (per batch); past it with the
    # run still `running`, the runner is gone (crashed, killed) and the next read concludes it (`lapse`).
    # None on runs stored before it: they never lapse.
    lease_until: datetime | None = None
    set_aside: list[dict[str, Any]] = Field(default_factory=list)  # clusters given up on: scope, reason, episodes
    # windows set aside before, offered again: scope, episodes, attempts, outcome (consolidated, set aside again,
    # given up)
    returned: list[dict[str, Any]] = Field(default_factory=list)
    facts: list[dict[str, Any]] = Field(default_factory=list)  # facts it wrote: fact_id, scope_id, summary

    def record_set_aside(self, entries: list[dict[str, Any]]) -> None:
        """Add clusters set aside (the first MAX_SET_ASIDE are listed; `extract.set_aside` counts them all)."""
        self.set_aside = [*self.set_aside, *entries][:MAX_SET_ASIDE]

    def record_returned(self, entries: list[dict[str, Any]]) -> None:
        """Add windows offered again (the first MAX_SET_ASIDE are listed; `extract.returned` counts them all)."""
        self.returned = [*self.returned, *entries][:MAX_SET_ASIDE]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [error for report in self.stages.values() for error in report.errors]

    def counter(self, stage: str, name: str) -> int:
        report = self.stages.get(stage)
        return report.counters.get(name, 0) if report else 0

    def lapse(self, now: datetime) -> bool:
        """Conclude a run still `running` past its lease as `failed`, with the reason (True if it did)."""
        if self.status != "running" or self.lease_until is None or now <= self.lease_until:
            return False
        reason = (
            f"lease_expired: the runner stopped renewing the run's lease (held until {self.lease_until.isoformat()}) "
            "before it finished: it crashed or was stopped; the next run takes its scopes up again"
        )
        self.stages.setdefault("lease", StageReport()).errors.append({"stage": "lease", "message": reason})
        self.status, self.finished_at = "failed", now
        return True

    def conclude(self, now: datetime) -> None:
        """The one place a run's final status is decided, by the local runner and Step Functions alike:
        `succeeded` without errors; with errors `partial` when something was achieved (facts written,
        or a batch checkpointed), else `failed`; `partial` too when clusters were set aside (`set_aside`
        says which and why). Never plain success when anything erred or was given up on."""
        achieved = self.counter("commit", "facts_written") > 0 or self.counter("checkpoint", "advanced") > 0
        gave_up = self.counter("extract", "set_aside") > 0
        self.status = (
            ("partial" if gave_up else "succeeded") if not self.errors else ("partial" if achieved else "failed")
        )
        self.finished_at = now
