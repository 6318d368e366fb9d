"""Powertools for the handlers run in this process (`mneme serve`, the embedded client, `mneme mcp`):
configured here, once. Tracing and metrics are off, logs at WARNING unless the environment says otherwise."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from functools import cache

LOCAL_ENV = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


@cache
def configure(*, logs_to_stderr: bool = False) -> None:
    """Idempotent. `logs_to_stderr` keeps stdout for a command's output or the MCP protocol."""
    for name, value in LOCAL_ENV.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore", message="No application metrics to publish")  # metrics are off
    from mneme.observability import logger

    logger.setLevel(os.environ["POWERTOOLS_LOG_LEVEL"])  # the logger may predate the variable
    if logs_to_stderr:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                handler.setStream(sys.stderr)
