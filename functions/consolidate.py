"""consolidate: start a run (202) and read its record; and the Step Functions stage tasks."""

from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import ConsolidateRequest, QueryLimit
from mneme.observability import logger, metrics, tracer

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def build_app(services: bootstrap.Provide) -> APIGatewayRestResolver:
    """The routes over the services the composition root gives (`bootstrap.current` in Lambda)."""
    app = build_resolver()

    @app.post("/v1/consolidate")
    def consolidate(request: Annotated[ConsolidateRequest, Body()]) -> Response[Any]:
        run = services().consolidation.start(caller(app), request.scopes)
        return json_response(202, {"run_id": run.run_id, "status": run.status, "scopes": run.scopes})

    @app.get("/v1/consolidations")
    def list_runs(limit: Annotated[QueryLimit, Query()] = 20) -> dict[str, Any]:
        """The most recent runs, newest first: status, per-stage counters and errors."""
        runs = services().consolidation.recent(caller(app), limit)
        return {"runs": [run.model_dump(mode="json", exclude={"tenant"}) for run in runs]}

    @app.get("/v1/consolidations/<run_id>")
    def get_run(run_id: str) -> dict[str, Any]:
        run = services().consolidation.get(caller(app), run_id)
        return run.model_dump(mode="json", exclude={"tenant"})

    return app


def schedule_target(services: bootstrap.Provide) -> Handler:
    """The EventBridge Scheduler target: one run per tenant that has dirty scopes."""

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        runs = services().consolidation.start_scheduled()
        return {"runs": [{"tenant": run.tenant, "run_id": run.run_id, "scopes": len(run.scopes)} for run in runs]}

    return handler


def stage_task(services: bootstrap.Provide) -> Handler:
    """A Step Functions task: one stage of one batch (see ConsolidationService.step), within the Lambda's
    time; or the EventBridge event of a run's execution that ended without reaching `Finish`
    (ConsolidationService.ended)."""

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics  # flushes ConsolidationClustersSetAside (extract)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        if event.get("detail-type") == "Step Functions Execution Status Change":
            return services().consolidation.ended(event)
        run_id = event.get("run_id") or event.get("batch", {}).get("run_id")
        logger.append_keys(stage=event.get("stage"), run_id=run_id)
        return services().consolidation.step(event, context.get_remaining_time_in_millis)

    return handler


app = build_app(bootstrap.current)
handler = lambda_handler(app)
schedule_handler = schedule_target(bootstrap.current)
stage_handler = stage_task(bootstrap.current)
