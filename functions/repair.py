"""index-repair: the EventBridge Scheduler target that repairs the search index (mneme.services.repair).

Every tick sweeps; a tick whose `scheduled_time` falls on `compact_every_minutes` (the schedule's
payload, infra/mneme_infra/stack.py) also compacts the documents written since the previous such tick.
Idempotent, so the schedule's retries are safe: a repeated sweep finds nothing left to index, a repeated
compaction nothing left to delete.
`log_metrics` flushes the `IndexRepairBacklog` metric the sweep adds.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.observability import logger, metrics, tracer
from mneme.services.repair import compaction_window, repair_index


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    services = bootstrap.current()
    every = int(event.get("compact_every_minutes", 1))
    since = compaction_window(event.get("scheduled_time"), every, services.clock.now())
    report = repair_index(services.indexer, services.index, compact_since=since)
    logger.info("index repaired", extra={"indexed": report.indexed, "compacted": sum(report.compacted.values())})
    return {"indexed": report.indexed, "compacted": report.compacted}
