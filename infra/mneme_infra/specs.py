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


@dataclass(frozen=True)
class CallBudget:
    """A function's Bedrock and OpenSearch clients: per-call timeouts and retries (R8, issue 30).

    Worst cases, each client exhausting its retries: an embedding takes attempts x (connect 1 s + read)
    plus backoff (botocore's, at most 1 s before the second attempt); a search request (retries + 1) x
    timeout (opensearch-py's timeout covers connect and read). A failure within the budget reaches the
    service, which degrades (recall: lexical_fallback; remember: the episode waits unindexed for the
    repair sweep) instead of running into the function's timeout, which API Gateway answers with a 502.
    """

    bedrock_read_seconds: int
    bedrock_attempts: int
    search_timeout_seconds: int
    search_retries: int

    def worst_case_seconds(self, spec: FunctionSpec) -> float:
        """The request's critical path: one embedding, then the searches made one after another (readers:
        the vector search, as the text search runs meanwhile; writers: the lookup of a document's copies
        and the bulk write, which may first wait `INDEX_WAIT` for a new index)."""
        from mneme.adapters.opensearch.serverless import INDEX_WAIT

        embedding = self.bedrock_attempts * (BEDROCK_CONNECT_SECONDS + self.bedrock_read_seconds)
        embedding += BEDROCK_BACKOFF_SECONDS * (self.bedrock_attempts - 1)
        search = (self.search_retries + 1) * self.search_timeout_seconds
        path: float = embedding if "embedder" in spec.uses else 0
        if "index_write" in spec.uses:
            path += 2 * search + sum(INDEX_WAIT)
        elif "index_read" in spec.uses:
            path += search
        return path


BEDROCK_CONNECT_SECONDS = 1  # mneme.adapters.models.bedrock_calls.CONNECT_TIMEOUT
BEDROCK_BACKOFF_SECONDS = 1


def call_budget(spec: FunctionSpec) -> CallBudget:
    """Background functions (consolidation stages, index repair) keep the SDKs' patient defaults; HTTP
    functions, below API Gateway's 29 s, get one retry and short timeouts: recall (15 s) 7 s to embed +
    4 s to search = 11 s; remember, records, curate (25 s) 9 s + 2 x 4 s + 7.5 s = 24.5 s."""
    if spec.timeout_seconds >= 120:
        return CallBudget(bedrock_read_seconds=30, bedrock_attempts=5, search_timeout_seconds=10, search_retries=2)
    read = 2 if spec.timeout_seconds < 20 else 3
    return CallBudget(bedrock_read_seconds=read, bedrock_attempts=2, search_timeout_seconds=2, search_retries=1)
