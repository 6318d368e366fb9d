"""Where consolidation runs: a background thread locally, a Step Functions execution in AWS."""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from mneme.consolidation.service import ConsolidationService
from mneme.errors import StoreUnavailable, Throttled
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


class StepFunctionsOrchestrator:
    """Starts the state machine built from the stage list; the execution name is the run id."""

    def __init__(self, state_machine_arn: str, *, client: Any = None, region_name: str | None = None) -> None:
        self.state_machine_arn = state_machine_arn
        self._client = client
        self._region = region_name

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("stepfunctions", region_name=self._region)
        return self._client

    def start(self, run: Run, targets: list[str]) -> None:
        payload = {"tenant": run.tenant, "run_id": run.run_id, "targets": targets}
        try:
            self.client.start_execution(
                stateMachineArn=self.state_machine_arn, name=run.run_id, input=json.dumps(payload)
            )
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code == "ExecutionAlreadyExists":
                return  # a retried start of the same run
            if code in {"ThrottlingException", "TooManyRequestsException"}:
                raise Throttled("Step Functions throttled the start; retry") from e
            raise StoreUnavailable(f"could not start the consolidation: {code}") from e
        except BotoCoreError as e:
            raise StoreUnavailable("could not reach Step Functions") from e
