"""The local orchestrator: each consolidation run in a daemon thread of this process (`mneme serve`).
In AWS a Step Functions execution runs it instead (`mneme.adapters.orchestrators`)."""

from __future__ import annotations

import threading

from mneme.consolidation.service import ConsolidationService
from mneme.observability import logger
from mneme.records import Run


class ThreadOrchestrator:
    """Runs each consolidation in a daemon thread of this process (the local server)."""

    def __init__(self, service: ConsolidationService) -> None:
        self.service = service

    def start(self, run: Run, targets: list[str]) -> None:
        def work() -> None:
            try:
                self.service.execute(run, targets, settle=True)
            except Exception:  # the run record must not stay "running" forever
                logger.exception("consolidation crashed", extra={"run_id": run.run_id})
                run.status = "failed"
                self.service.deps.store.put_run(run)

        threading.Thread(target=work, name=f"consolidate-{run.run_id}", daemon=True).start()
