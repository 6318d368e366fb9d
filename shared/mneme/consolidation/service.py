"""Starting, running and reporting consolidation runs.

`execute` is the local runner: per dirty scope, under a lease, batch after batch through
`STAGES`. In AWS a Step Functions execution runs the same stages, each task a call of
`ConsolidationService.step` (see `functions/consolidate.py`), with the same lease per scope, the same
maintenance sweep and the same status decision (`Run.conclude`). `start` hands the run to whichever
orchestrator was wired in; the CLI opens runs through `open` and executes them here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from mneme.consolidation.stages import DEADLINE, STAGES, Batch, Deps, Working, maintain_facts
from mneme.errors import InvalidInput, MnemeError, NotFound
from mneme.models import Principal
from mneme.observability import logger
from mneme.records import MAX_FACTS_LISTED, Run, StageReport
from mneme.services.scopes import ScopeService

MAX_BATCHES_PER_SCOPE = 50
# Scopes one run takes on; the other dirty scopes keep their marks for the next run. Bounds what a run
# carries in Step Functions (limit 256 KiB per state): its input (scope ids, ~39 bytes each) and its Map's
# output (one folded summary per scope, ~0.6 KB, about 1 KB at most with an error and a long tenant name;
# tests/infra/test_workflow_limits.py), its record (the target paths; DynamoDB items up to 400 KB) and the
# start's scope lookups. 200 per 15-minute tick works through 10,000 dirty scopes in about 12 hours.
MAX_TARGETS_PER_RUN = 200
# A run asked for some subtrees takes its targets from the tenant's oldest this many dirty marks: the subtrees'
# scopes may all lie behind 200 marks elsewhere (a run that took only the first 200 and kept the subtrees' did
# nothing and said it had succeeded). Their chains are read in one batch per level (`ScopeService.chains_of`).
MAX_DIRTY_SCANNED = 10_000
# Of a stage task's remaining time, what extract leaves unused: the longest one reasoner call may take
# (BedrockReasoner: up to 4 attempts of 60 s read timeout, with backoff), so no call outlives the Lambda
# (600 s: extract calls for the first 330 s, then leaves the rest of the batch to the next one).
TASK_MARGIN_SECONDS = 270
# An execution of the state machine ended this way: its run is concluded from the event (`ended`).
ENDED = ("FAILED", "TIMED_OUT", "ABORTED")


class Orchestrator(Protocol):
    def start(self, run: Run, targets: list[str]) -> None:
        """Run consolidation for `targets` (scope ids) and keep `run` up to date in the store."""
        ...


Progress = Callable[[str, Batch], None]


@dataclass
class ConsolidationService:
    deps: Deps
    scopes: ScopeService
    orchestrator: Orchestrator | None = None
    owner: str = field(default_factory=lambda: f"runner-{uuid.uuid4().hex[:8]}")
    sleep: Callable[[float], None] = time.sleep

    def targets(self, tenant: str, paths: list[str] | None) -> list[str]:
        """The tenant's dirty scopes, oldest mark first, MAX_TARGETS_PER_RUN at most; with `paths`, those in
        their subtrees, wherever they stand among the tenant's marks (MAX_DIRTY_SCANNED read)."""
        roots = {self.scopes.resolve(tenant, path).scope.scope_id for path in paths} if paths else None
        limit = MAX_TARGETS_PER_RUN if roots is None else MAX_DIRTY_SCANNED
        dirty = [scope_id for _, scope_id in self.deps.store.list_dirty(tenant, limit)]
        if roots is None:
            return dirty
        chains = self.scopes.chains_of(tenant, dirty)
        inside = [s for s in dirty if s in chains and roots & {scope.scope_id for scope in chains[s].chain}]
        return inside[:MAX_TARGETS_PER_RUN]

    def open(self, caller: Principal, paths: list[str] | None = None) -> tuple[Run, list[str]]:
        """A new run record (stored, `running`) and its target scope ids: how every run begins."""
        targets = self.targets(caller.tenant, paths)
        run = Run(
            tenant=caller.tenant,
            run_id=f"run_{uuid.uuid4().hex}",
            started_at=self.deps.clock.now(),
            requested_by=caller.principal,
            scopes=[self.scopes.chain_of(caller.tenant, s).path for s in targets],
        )
        run.lease_until = run.started_at + self._ttl()
        self.deps.store.put_run(run)
        return run, targets

    def start(self, caller: Principal, paths: list[str] | None = None) -> Run:
        run, targets = self.open(caller, paths)
        if self.orchestrator is None:
            return self.execute(run, targets)
        try:
            self.orchestrator.start(run, targets)
        except Exception as e:  # the run never started: its record must not stay "running"
            message = f"{e.code}: {e.message}" if isinstance(e, MnemeError) else f"internal error: {type(e).__name__}"
            _merge(run, "workflow", {"errors": 1}, [{"stage": "workflow", "message": message}])
            run.conclude(self.deps.clock.now())
            self.deps.store.put_run(run)
            raise
        return run

    def start_scheduled(self, limit: int = 10_000) -> list[Run]:
        """The schedule's entry: a run for every tenant with dirty scopes (no scan of the episodes)."""
        tenants = sorted({tenant for tenant, _ in self.deps.store.list_dirty(None, limit)})
        scheduler = "scheduler"
        return [self.start(Principal(tenant=t, principal=scheduler, roles=frozenset()), None) for t in tenants]

    def get(self, caller: Principal, run_id: str) -> Run:
        run = self.deps.store.get_run(caller.tenant, run_id)
        if run is None:
            raise NotFound(f"run {run_id} does not exist", code="run_not_found")
        return self._lapsed(run)

    def recent(self, caller: Principal, limit: int) -> list[Run]:
        return [self._lapsed(run) for run in self.deps.store.list_runs(caller.tenant, limit)]

    def _lapsed(self, run: Run) -> Run:
        """A run whose runner died is concluded `failed` when it is read past its lease (`Run.lapse`)."""
        if run.lapse(self.deps.clock.now()):
            self.deps.store.put_run(run)
            logger.warning("consolidation run lease lapsed: concluded failed", extra={"run_id": run.run_id})
        return run

    def _renew(self, run: Run) -> None:
        run.lease_until = self.deps.clock.now() + self._ttl()
        self.deps.store.put_run(run)

    def execute(self, run: Run, targets: list[str], progress: Progress | None = None, *, settle: bool = False) -> Run:
        """The local runner: per target under its lease, batch after batch; then the tenant-wide
        maintenance sweep and the run's one status decision (`Run.conclude`).

        `settle`: first wait out the settle window, so the run reads every episode remembered before it
        was requested ("remember, then consolidate at once" works without the caller sleeping)."""
        if settle and targets:
            self.sleep(self.deps.settings.settle_seconds)
        for scope_id in targets:
            if not self._lease(run.tenant, scope_id, self.owner):
                _merge(run, "collect", {"skipped_leased": 1}, [])
                continue
            try:
                self._scope(run, scope_id, progress)
            finally:
                self.deps.store.release_lease(run.tenant, scope_id, self.owner)
            self.deps.store.put_run(run)
        maintain(self.deps, run)
        list_written(self.deps, run, targets)
        run.conclude(self.deps.clock.now())
        self.deps.store.put_run(run)
        logger.info("consolidation finished", extra={"run_id": run.run_id, "status": run.status})
        return run

    def step(self, event: dict[str, Any], remaining_ms: Callable[[], int] | None = None) -> dict[str, Any]:
        """One Step Functions task (`_step` dispatches it), with the run-level parts of the local runner:
        `begin` takes (or renews) the scope's lease for the run, `finish` sweeps maintenance and releases them.
        `remaining_ms`: the Lambda's remaining time; extract stops calling the reasoner TASK_MARGIN_SECONDS
        before it ends."""
        if remaining_ms is None:
            return self._step(event)
        token = DEADLINE.set(time.monotonic() + remaining_ms() / 1000 - TASK_MARGIN_SECONDS)
        try:
            return self._step(event)
        finally:
            DEADLINE.reset(token)

    def ended(self, event: dict[str, Any]) -> dict[str, Any]:
        """An EventBridge "Step Functions Execution Status Change" event of a run's execution that failed,
        timed out or was aborted (no catcher sees these: the execution timeout, an abort, a
        `States.DataLimitExceeded`): a run still `running` is concluded with the reason as a workflow
        error. The Map's child executions (one per scope, their input has no `targets`) are ignored:
        their parent records their failure."""
        detail = event.get("detail") or {}
        try:
            started = json.loads(detail.get("input") or "{}")
        except ValueError:
            started = {}
        status = str(detail.get("status"))
        if status not in ENDED or not isinstance(started, dict) or "targets" not in started:
            return {"concluded": False}
        run = self.deps.store.get_run(str(started.get("tenant")), str(started.get("run_id")))
        if run is None or run.status != "running":
            return {"concluded": False}
        why = " ".join(str(detail.get(key) or "") for key in ("error", "cause")).strip()[:300]
        message = f"execution {status.lower().replace('_', ' ')}" + (f": {why}" if why else "")
        _merge(run, "workflow", {"errors": 1}, [{"stage": "workflow", "message": message}])
        run.conclude(self.deps.clock.now())
        self.deps.store.put_run(run)
        logger.warning("consolidation run ended by its execution", extra={"run_id": run.run_id, "status": status})
        return {"concluded": True, "run_id": run.run_id, "status": run.status}

    def _step(self, event: dict[str, Any]) -> dict[str, Any]:
        """The one dispatcher of the Step Functions tasks: `begin` opens a batch under the scope's lease
        (renewing the run's), the stages run on it, `finish` concludes the run and releases the leases."""
        stage = event["stage"]
        if stage == "begin":
            batch = begin(self.deps, event)
            if not self._lease(batch.tenant, batch.scope_id, batch.run_id):
                batch.leased_elsewhere = True
                batch.count("collect", "skipped_leased")
            run = self.deps.store.get_run(batch.tenant, batch.run_id)
            if run is not None and run.status == "running":  # the run's lease, with its scope's (only
                self._renew(run)  # `finish` writes its counters, after every batch: no write is lost here)
            return batch.model_dump(mode="json")
        if stage == "finish":
            result = finish(self.deps, event)
            for scope_id in {b.get("scope_id") for b in event.get("batches", [])} - {None, "*"}:
                self.deps.store.release_lease(event["tenant"], str(scope_id), event["run_id"])
            return result
        if event.get("batch", {}).get("leased_elsewhere"):
            return dict(event["batch"])
        return run_stage(self.deps, event)

    def _ttl(self) -> timedelta:
        return timedelta(seconds=self.deps.settings.lease_seconds)

    def _lease(self, tenant: str, scope_id: str, owner: str) -> bool:
        return self.deps.store.acquire_lease(tenant, scope_id, owner, self.deps.clock.now(), self._ttl())

    def _scope(self, run: Run, scope_id: str, progress: Progress | None) -> None:
        for _ in range(MAX_BATCHES_PER_SCOPE):
            if not self._lease(run.tenant, scope_id, self.owner):  # renewed per batch
                break
            self._renew(run)
            batch = run_batch(
                self.deps,
                Batch(tenant=run.tenant, scope_id=scope_id, run_id=run.run_id, started_at=self.deps.clock.now()),
                progress,
            )
            for stage, counters in batch.counters.items():
                _merge(run, stage, counters, [e for e in batch.errors if e["stage"] == stage])
            if not batch.errors:  # the checkpoint moved past them (a held batch tries them again)
                run.record_set_aside(batch.set_aside)
                run.record_returned(batch.returned)
            if batch.errors or not batch.full:
                break


def run_batch(deps: Deps, batch: Batch, progress: Progress | None = None) -> Batch:
    """Every stage in order. A stage that raises is recorded; only the checkpoint (which holds) runs after it."""
    failed = False
    work = Working.of(deps, batch)
    for name, stage in STAGES:
        if failed and name != "checkpoint":
            continue
        try:
            batch = stage(deps, batch, work)
        except MnemeError as e:
            batch.fail(name, f"{e.code}: {e.message}", episode_ids=batch.episode_ids)
            failed = True
        except Exception as e:  # a bug must still leave a truthful run record and a held checkpoint
            logger.exception("consolidation stage crashed", extra={"stage": name})
            batch.fail(name, f"internal error: {type(e).__name__}", episode_ids=batch.episode_ids)
            failed = True
        if progress:
            progress(name, batch)
    return batch


def list_written(deps: Deps, run: Run, scope_ids: list[str]) -> None:
    """The extracted facts the run wrote or reinforced in its scopes (reinforced at or after it started;
    a scope has one run at a time, under its lease), the first MAX_FACTS_LISTED, read from the store so
    no Step Functions payload carries them."""
    if not run.counter("commit", "facts_written"):
        return
    written = [
        f
        for scope_id in scope_ids
        for f in deps.store.list_facts(run.tenant, scope_id)
        if f.tier == "raw" and f.reinforced_at >= run.started_at
    ]
    written.sort(key=lambda f: (f.reinforced_at, f.fact_id))
    run.facts = [
        {"fact_id": f.fact_id, "scope_id": f.scope_id, "summary": f.summary[:300], "status": f.status}
        for f in written[:MAX_FACTS_LISTED]
    ]


def _merge(run: Run, stage: str, counters: dict[str, int], errors: list[dict[str, object]]) -> None:
    report = run.stages.setdefault(stage, StageReport())
    for name, value in counters.items():
        report.counters[name] = report.counters.get(name, 0) + value
    report.errors.extend(errors)


def maintain(deps: Deps, run: Run) -> None:
    """Decay, expiry and stale flags, in one place: once per run, at its end, over every fact of the
    tenant, not only the scopes with new episodes (a fact nobody touches must still fade on schedule).
    The batches' stages never decay; the run's `maintain` counters are this sweep's."""
    try:
        changed = maintain_facts(deps, run.tenant, deps.store.list_facts(run.tenant))
    except MnemeError as e:
        _merge(run, "maintain", {"errors": 1}, [{"stage": "maintain", "message": f"{e.code}: {e.message}"}])
        return
    expired = sum(1 for f in changed if f.status == "expired")
    _merge(run, "maintain", {"facts_updated": len(changed), "expired": expired}, [])


def begin(deps: Deps, event: dict[str, Any]) -> Batch:
    """`{"stage": "begin", "tenant", "run_id", "scope_id"}`: a new batch of the scope."""
    return Batch(
        tenant=event["tenant"], scope_id=event["scope_id"], run_id=event["run_id"], started_at=deps.clock.now()
    )


def finish(deps: Deps, event: dict[str, Any]) -> dict[str, Any]:
    """`{"stage": "finish", "tenant", "run_id", "batches": [...]}`: the run read once, the tenant-wide
    maintenance sweep and every batch's counters and errors folded into it, its status decided
    (`Run.conclude`), and written once."""
    run = deps.store.get_run(event["tenant"], event["run_id"])
    if run is None:
        raise NotFound(f"run {event['run_id']} does not exist", code="run_not_found")
    maintain(deps, run)
    batches = [Batch.model_validate(b) for b in event.get("batches", [])]
    for batch in batches:
        for name, counters in batch.counters.items():
            _merge(run, name, counters, [e for e in batch.errors if e["stage"] == name])
    scope_ids = sorted({b.scope_id for b in batches} - {"*"})
    if run.counter("extract", "set_aside") or run.counter("extract", "returned"):  # listed by each scope's
        for scope_id in scope_ids:  # checkpoint, not carried by the Map
            kept = deps.store.get_checkpoint(run.tenant, scope_id)
            run.record_set_aside([e for e in kept.set_aside if e.get("run_id") == run.run_id])
            run.record_returned([e for e in kept.returned if e.get("run_id") == run.run_id])
    list_written(deps, run, scope_ids)
    run.conclude(deps.clock.now())
    deps.store.put_run(run)
    return {"run_id": run.run_id, "status": run.status}


def run_stage(deps: Deps, event: dict[str, Any]) -> dict[str, Any]:
    """`{"stage": name, "batch": {...}}` → the batch after that stage (one of `STAGES`)."""
    stages = dict(STAGES)
    if event["stage"] not in stages:
        raise InvalidInput(f"unknown stage {event['stage']!r}", code="unknown_stage")
    batch = Batch.model_validate(event["batch"])
    return stages[event["stage"]](deps, batch, Working.of(deps, batch)).model_dump(mode="json")
