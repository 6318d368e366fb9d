"""Records of consolidation: facts, contradictions, per-scope checkpoints and runs."""

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


class Proposal(BaseModel):
    """What a reasoner proposes for one cluster. Entity/property/value may be absent (summary only).
    The LLM reasoners' JSON schema is generated from this model (`adapters.reasoners.PROPOSAL_SCHEMA`)."""

    entity: str | None = Field(
        None, description="Who or what the fact is about, exactly as the episodes name it (the speaker for 'I')."
    )
    property: str | None = Field(None, description="The attribute of the entity, e.g. 'VAT scheme', 'lives in'.")
    value: str | None = Field(None, description="The attribute's value, exactly as the episodes state it.")
    summary: str = Field(description="The fact as one self-contained sentence.")


def is_claim(proposal: Proposal) -> bool:
    """A claim: entity, property and value all stated."""
    return bool(proposal.entity and proposal.property and proposal.value)


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


class Checkpoint(BaseModel):
    """How far consolidation has read a scope's episodes: the last (created_at, episode_id) taken."""

    tenant: str
    scope_id: str
    after_created_at: datetime | None = None
    after_episode_id: str = ""
    version: int = 0
    processed: int = 0


class StageReport(BaseModel):
    counters: dict[str, int] = Field(default_factory=dict)
    errors: list[dict[str, Any]] = Field(default_factory=list)


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
        or a batch checkpointed), else `failed`. Never plain success when anything erred."""
        achieved = self.counter("commit", "facts_written") > 0 or self.counter("checkpoint", "advanced") > 0
        self.status = "succeeded" if not self.errors else ("partial" if achieved else "failed")
        self.finished_at = now
