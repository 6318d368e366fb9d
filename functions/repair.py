"""index-repair: the EventBridge Scheduler target that repairs the search index (mneme.services.repair).

Every tick sweeps; a tick compacts when its `scheduled_time` falls on `compact_every_minutes` (the
schedule's payload, infra/mneme_infra/stack.py). Idempotent, so the schedule's retries are safe: a
repeated sweep finds nothing left to index.
`log_metrics` flushes the `IndexRepairBacklog` metric the sweep adds.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.observability import logger, metrics, tracer
from mneme.services.repair import compaction_due, repair_index


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    services = bootstrap.current()
    compact = compaction_due(event.get("scheduled_time"), int(event.get("compact_every_minutes", 1)))
    report = repair_index(services.store, services.indexer, services.index, compact=compact)
    logger.info("index repaired", extra={"indexed": report.indexed, "compacted": sum(report.compacted.values())})
    return {"indexed": report.indexed, "compacted": report.compacted}
