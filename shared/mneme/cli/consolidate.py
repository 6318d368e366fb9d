"""`mneme consolidate`: run consolidation here (embedded) or start a run and follow it (remote)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from mneme.cli.command import Context, command
from mneme.cli.output import emit_json, err, quiet_runtime

if TYPE_CHECKING:
    from mneme.consolidation.stages import Batch
    from mneme_sdk.models import RunView


def cmd_consolidate(ctx: Context) -> int:
    if ctx.config.remote:
        return _consolidate_remote(ctx)
    return _consolidate_local(ctx)


def _consolidate_local(ctx: Context) -> int:
    """Run consolidation in this process, batch by batch, with a progress line per stage."""

    quiet_runtime()
    services = ctx.services
    caller = ctx.principal()
    tenant = caller.tenant
    service = services.consolidation
    run, targets = service.open(caller, ctx.args.scope or None)  # the service's ids: unique, not per second
    if not ctx.quiet:
        err(f"consolidating {len(targets)} scope(s) with the {service.deps.reasoner.name} reasoner")
    start, read = time.monotonic(), 0
    tty = sys.stderr.isatty()
    last = 0.0

    def progress(stage: str, batch: Batch) -> None:
        nonlocal read, last
        if stage == "collect":
            read += len(batch.episode_ids)
        if ctx.quiet:
            return
        now = time.monotonic()
        if not tty and now - last < 1.0 and stage != "checkpoint":
            return
        last = now
        rate = read / max(now - start, 1e-6) * 60
        path = services.scopes.chain_of(tenant, batch.scope_id).path
        line = f"{path}: {stage:<10} {read} episodes ({rate:,.0f}/min)"
        print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)

    try:
        run = service.execute(run, targets, progress=progress, settle=True)
    except KeyboardInterrupt:
        err("\ninterrupted: the unfinished batch is replayed next time (its checkpoint did not move)")
        return 130
    if tty and not ctx.quiet:
        print(file=sys.stderr)
    from mneme_sdk.models import RunView

    return _report(ctx, RunView.model_validate(run.model_dump(exclude={"tenant"})))


def _consolidate_remote(ctx: Context) -> int:
    client = ctx.client()
    started = client.consolidate(ctx.args.scope or None)
    if not ctx.quiet:
        err(f"run {started.run_id} started over {len(started.scopes)} scope(s)")
    if ctx.args.no_wait:
        if ctx.args.json:
            emit_json(started)
        else:
            print(started.run_id)
        return 0
    began = time.monotonic()
    tty = sys.stderr.isatty()

    def update(run: RunView) -> None:
        if ctx.quiet:
            return
        counters = run.stages.get("collect")
        read = counters.counters.get("episodes_read", 0) if counters else 0
        line = f"{run.run_id}: {run.status} after {time.monotonic() - began:,.0f}s, {read} episodes read"
        end = "\n" if run.finished or not tty else ""
        print(f"\r\033[K{line}" if tty else line, end=end, file=sys.stderr, flush=True)

    try:
        run = client.wait_run(started.run_id, timeout=ctx.args.wait_timeout, on_update=update)
    except KeyboardInterrupt:
        err(f"\nstopped waiting: run {started.run_id} goes on on the server")
        return 130
    except TimeoutError as e:
        err(f"\n{e}; it goes on on the server")
        return 1
    return _report(ctx, run)


def _report(ctx: Context, run: RunView) -> int:
    if ctx.args.json:
        emit_json(run)
    else:
        for stage, report in run.stages.items():
            counters = ", ".join(f"{name} {value}" for name, value in report.counters.items())
            print(f"  {stage:<10} {counters}")
        for error in run.errors:
            print(f"  error in {error.get('stage', '?')}: {error.get('message', error)}")
        for cluster in run.set_aside:
            print(f"  set aside ({cluster.get('episodes', '?')} episodes): {cluster.get('reason', cluster)}")
        print(f"run {run.run_id}: {run.status}")
    return 0 if run.status == "succeeded" else 1


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    consolidate = command(
        sub,
        "consolidate",
        cmd_consolidate,
        common,
        help="turn new episodes into facts now, with progress and the run summary",
        examples="""
mneme consolidate                          # embedded: runs here, batch by batch (Ctrl-C is safe)
mneme consolidate --scope root.acme        # only that subtree
mneme --url "$MNEME_URL" consolidate       # remote: starts a run and follows it
mneme --url "$MNEME_URL" consolidate --no-wait --json
""",
    )
    consolidate.add_argument("--scope", action="append", help="limit to this subtree (repeatable)")
    consolidate.add_argument("--no-wait", action="store_true", help="remote: print the run id and return")
    consolidate.add_argument("--wait-timeout", type=float, default=3600.0, help="remote: seconds to follow the run")
    consolidate.add_argument("--json", action="store_true", help="the run record as JSON")
