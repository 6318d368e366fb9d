"""Where consolidation runs in AWS: a Step Functions execution (locally: `mneme.consolidation.threads`)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from mneme.errors import StoreUnavailable, Throttled
from mneme.records import Run


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
