"""Logger, tracer and metrics for every function, created once at the package root. The domain counts
through `count` and never imports Powertools itself.

The tracer is created on first use (PEP 562 `__getattr__`): creating it loads the X-Ray SDK and botocore's
session, which a function that traces nothing (the authorizer) should not pay for in its cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

    tracer: Tracer

SERVICE = "mneme"
NAMESPACE = "Mneme"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def count(name: str, value: int = 1) -> None:
    """Add `value` to the count metric `name` (unit Count) of this invocation; `log_metrics` sends it. Nothing when
    metrics are off (`mneme serve`, `mneme mcp`): Powertools would still print every 100th value of a metric to
    stdout, where no one sends them — noise in a terminal, a corrupt message on MCP's stdio, and a server that
    blocks for good once a pipe nobody reads is full."""
    if is_metrics_disabled():
        return
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def __getattr__(name: str) -> Any:
    if name == "tracer":
        from aws_lambda_powertools import Tracer

        created = globals()["tracer"] = Tracer(service=SERVICE)
        return created
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
