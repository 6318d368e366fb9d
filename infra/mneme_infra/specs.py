"""What each Lambda function is: its handler, size and the access it needs (read by functions.py).

The route table names the HTTP functions; four more have no route: the authorizer, the Step Functions
stage task and the two schedule targets (consolidation, index repair). A function is keyed by name;
`module`/`handler` locate its code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[2]
AUTHORIZER, STAGES, SCHEDULE, REPAIR = "authorizer", "consolidate-stages", "consolidate-schedule", "index-repair"

# embedder / reasoner: Bedrock InvokeModel on the configured model; index_read / index_write: the search
# collection; start_runs: StartExecution of the consolidation state machine; cursor_secret: read the secret
# that signs change-feed cursors.
Use = Literal["embedder", "reasoner", "index_read", "index_write", "start_runs", "cursor_secret"]
# read_delivered: read everything, write only recall's delivered-session markers (access.py)
# read_mark_indexed: read everything, update only episodes (their `indexed` mark, access.py)
# read_keys: GetItem on API-key items only (the authorizer, access.py)
# read_write: read and write everything but API-key items (an explicit Deny, access.py)
# read_write_keys: read and write everything, API keys included (curate, which serves /v1/keys)
TableAccess = Literal["read", "read_keys", "read_write", "read_write_keys", "read_delivered", "read_mark_indexed"]


@dataclass(frozen=True)
class FunctionSpec:
    memory_mb: int
    timeout_seconds: int  # HTTP functions: below API Gateway's 29 s integration timeout
    table_access: TableAccess
    uses: frozenset[Use] = frozenset()
    module: str | None = None  # functions/<module>.py; default: the function's name
    handler: str = "handler"
    reserved_concurrency: int | None = None
    async_retries: int | None = None  # asynchronous invocations (schedules): retries, then the failures queue

    def entry(self, name: str) -> tuple[str, str]:
        """(module, handler attribute)."""
        return self.module or name, self.handler


SPECS: dict[str, FunctionSpec] = {
    AUTHORIZER: FunctionSpec(memory_mb=512, timeout_seconds=5, table_access="read_keys"),
    "retrieve": FunctionSpec(memory_mb=1024, timeout_seconds=10, table_access="read"),
    "remember": FunctionSpec(1024, 25, "read_write", frozenset({"embedder", "index_write"})),
    "recall": FunctionSpec(1024, 15, "read_delivered", frozenset({"embedder", "index_read", "cursor_secret"})),
    "consolidate": FunctionSpec(1024, 25, "read_write", frozenset({"start_runs"})),
    # get / list / forget episodes and facts, correct a fact (re-embeds it), signed list cursors
    "records": FunctionSpec(1024, 25, "read_write", frozenset({"embedder", "index_write", "cursor_secret"})),
    "curate": FunctionSpec(1024, 25, "read_write_keys", frozenset({"embedder", "index_write"})),
    STAGES: FunctionSpec(
        1024, 600, "read_write", frozenset({"embedder", "reasoner", "index_write"}), "consolidate", "stage_handler"
    ),
    # Retried when it fails: a repeated tick opens runs whose scopes the first run holds under lease. No
    # reserved concurrency: it fails the deploy on accounts whose concurrency quota is 10, and overlapping
    # ticks are harmless for the same reason.
    SCHEDULE: FunctionSpec(
        512, 60, "read_write", frozenset({"start_runs"}), "consolidate", "schedule_handler", async_retries=2
    ),
    # Sweeps unindexed episodes (embedding them if needed) and compacts duplicate documents.
    REPAIR: FunctionSpec(
        1024, 300, "read_mark_indexed", frozenset({"embedder", "index_write"}), "repair", async_retries=2
    ),
}
EXTRA_FUNCTIONS = (AUTHORIZER, STAGES, SCHEDULE, REPAIR)
