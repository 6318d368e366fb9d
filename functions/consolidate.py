"""consolidate: start a run (202) and read its record; and the Step Functions stage tasks."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import ConsolidateRequest, QueryLimit
from mneme.observability import logger, metrics, tracer

app = build_resolver()


@app.post("/v1/consolidate")
def consolidate(request: Annotated[ConsolidateRequest, Body()]) -> Response[Any]:
    run = bootstrap.current().consolidation.start(caller(app), request.scopes)
    return json_response(202, {"run_id": run.run_id, "status": run.status, "scopes": run.scopes})


@app.get("/v1/consolidations")
def list_runs(limit: Annotated[QueryLimit, Query()] = 20) -> dict[str, Any]:
    """The most recent runs, newest first: status, per-stage counters and errors."""
    runs = bootstrap.current().consolidation.recent(caller(app), limit)
    return {"runs": [run.model_dump(mode="json", exclude={"tenant"}) for run in runs]}


@app.get("/v1/consolidations/<run_id>")
def get_run(run_id: str) -> dict[str, Any]:
    run = bootstrap.current().consolidation.get(caller(app), run_id)
    return run.model_dump(mode="json", exclude={"tenant"})


handler = lambda_handler(app)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def schedule_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The EventBridge Scheduler target: one run per tenant that has dirty scopes."""
    runs = bootstrap.current().consolidation.start_scheduled()
    return {"runs": [{"tenant": run.tenant, "run_id": run.run_id, "scopes": len(run.scopes)} for run in runs]}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics  # flushes ConsolidationClustersSetAside (extract)
def stage_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """A Step Functions task: one stage of one batch (see ConsolidationService.step), within the Lambda's
    time; or the EventBridge event of a run's execution that ended without reaching `Finish`
    (ConsolidationService.ended)."""
    if event.get("detail-type") == "Step Functions Execution Status Change":
        return bootstrap.current().consolidation.ended(event)
    logger.append_keys(stage=event.get("stage"), run_id=event.get("run_id") or event.get("batch", {}).get("run_id"))
    return bootstrap.current().consolidation.step(event, context.get_remaining_time_in_millis)
