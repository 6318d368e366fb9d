"""index-repair: the EventBridge Scheduler target that repairs the search index (mneme.services.repair).

Every tick sweeps; a tick whose `scheduled_time` falls on `compact_every_minutes` (the schedule's
payload, infra/mneme_infra/stack.py) also compacts the documents written since the previous such tick.
Idempotent, so the schedule's retries are safe: a repeated sweep finds nothing left to index, a repeated
compaction nothing left to delete.
`log_metrics` flushes the `IndexRepairBacklog` metric the sweep adds.
"""

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.bootstrap import Services
from mneme.observability import logger, metrics, tracer
from mneme.services.repair import compaction_window, repair_index

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def repair_handler(services: Callable[[], Services]) -> Handler:
    """The scheduled handler over the services the composition root gives (`bootstrap.current` in Lambda)."""

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        given = services()
        every = int(event.get("compact_every_minutes", 1))
        since = compaction_window(event.get("scheduled_time"), every, given.clock.now())
        report = repair_index(given.indexer, given.index, compact_since=since)
        logger.info("index repaired", extra={"indexed": report.indexed, "compacted": sum(report.compacted.values())})
        return {"indexed": report.indexed, "compacted": report.compacted}

    return handler


handler = repair_handler(bootstrap.current)
