"""What one request costs on AWS, from the AWS calls the cloud tier counts.

Deploys the synthesized stack on the cloud tier's doubles (`tests/cloud`: moto, an osmem-server clone, the
Bedrock double; every function run as Lambda runs it, its calls on every thread seen), makes each operation
through API Gateway's shape, and prices what the functions asked of AWS:

- DynamoDB read and write request units, from the items each call read or wrote (sizes by DynamoDB's
  rules: attribute names plus values; reads per 4 KB, halved when eventually consistent, doubled in a
  transaction; writes per 1 KB of the larger of the old and new item, plus one unit per entry each
  KEYS_ONLY index gains or loses (a key change is both), all doubled in a transaction: whether index
  writes are doubled there is not documented, so the bench assumes the higher figure). A query is charged for the whole
  items it reads even when it projects a few attributes, and for the items its filter drops.
- Lambda requests and GB-seconds (each function's memory; its duration here, minus the Bedrock double's
  local model, plus BEDROCK_LATENCY a call), API Gateway requests, Bedrock embedding tokens (the double
  counts words; Titan counts tokens, about 1.3 a word), OpenSearch Serverless requests (billed by OCU-hour,
  not per request), CloudWatch Logs bytes (LOG_BYTES a request, an assumption).

Operations: a single remember; a retrieve; a quiet recall (a tenant of QUIET episodes, all indexed) and a
busy recall (a tenant that wrote BUSY episodes in the last minutes). Then the idle cost a month. Then
consolidation per million episodes: a conversational set remembered turn by turn and consolidated by the
deployed state machine, with the reasoner's tokens counted from the prompts the code sends and priced with
Claude Haiku (see `consolidation_cost`).

Consolidation runs (`--scopes`, default 1 10 1000): the Step Functions state transitions a run costs by its
count of dirty scopes, counted by executing the deployed definition (moto's interpreter) with every state
it enters recorded; the stage tasks are answered by a script (one small batch per scope: what a tick over
many lightly dirty scopes sees), since transitions follow the control flow only. And X-Ray, by traffic.

    PYTHONPATH=shared:. python bench/cost.py [--busy 300] [--scopes 1 10 1000] [--conversations DIR]

Prices: us-east-1, on-demand, read from the pages cited beside each constant (check them again before you
quote a figure).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import botocore.client  # noqa: E402

RAW_CALL = botocore.client.BaseClient._make_api_call  # before the tier wraps it: lookups nobody is billed for

# -- prices (us-east-1) -------------------------------------------------------------------------------
# https://aws.amazon.com/lambda/pricing/ : Arm (the stack's functions are arm64) $0.0000133334 per GB-second,
# requests $0.20 per million
LAMBDA_GB_SECOND = 0.0000133334
LAMBDA_REQUEST = 0.20 / 1e6
# https://aws.amazon.com/api-gateway/pricing/ : REST APIs, first 333 million requests a month, $3.50 per million
API_REQUEST = 3.50 / 1e6
# https://aws.amazon.com/dynamodb/pricing/on-demand/ : $0.125 per million read request units, $0.625 per
# million write request units (standard table class)
READ_UNIT = 0.125 / 1e6
WRITE_UNIT = 0.625 / 1e6
# https://aws.amazon.com/bedrock/pricing/ : Amazon Titan Text Embeddings V2 (the stack's default embedder,
# mneme.settings.BedrockEmbedderSettings) $0.00002 per 1,000 input tokens; Cohere Embed 3 $0.0001
TITAN_EMBED_1K_TOKENS = 0.00002
COHERE_EMBED_1K_TOKENS = 0.0001
TOKENS_PER_WORD = 1.3
# https://aws.amazon.com/opensearch-service/pricing/ : OpenSearch Serverless $0.24 per OCU-hour; the minimum
# is 2 OCUs with standby replicas (indexing + search, each 0.5 x 2), 1 without (docs/deploy.md)
OCU_HOUR = 0.24
# `-c mneme:search=domain` (infra/mneme_infra/search_domain.py): one t3.small.search data node, on demand,
# $0.036 an hour, and its gp3 EBS volume, $0.122 per GB-month (us-east-1, same pricing page; gp3 is 9.6%
# under gp2's $0.135: https://aws.amazon.com/blogs/big-data/lower-your-amazon-opensearch-service-storage-cost-with-gp3-amazon-ebs-volumes/)
DOMAIN_INSTANCE_HOUR = 0.036
DOMAIN_GP3_GB_MONTH = 0.122
# https://aws.amazon.com/cloudwatch/pricing/ : Logs ingestion $0.50 per GB (standard class)
LOG_GB = 0.50
HOURS_A_MONTH = 730
# Assumptions, not prices
BEDROCK_LATENCY = 0.08  # seconds a Bedrock embedding call keeps the function waiting (billed duration)
LOG_BYTES = 2_000  # CloudWatch Logs bytes a request writes (the structured request log and the platform lines)
QUIET = 10
TRACE = False  # --trace: every item write and its units, on stderr
BUSY = 300


# -- DynamoDB request units from item sizes --------------------------------------------------------------
def value_size(value: Mapping[str, Any]) -> int:
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "B":
        return len(v)
    if kind == "N":
        return math.ceil(len(str(v).lstrip("-").replace(".", "")) / 2) + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(math.ceil(len(n) / 2) + 1 for n in v)
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in v.items())  # M


def item_size(item: Mapping[str, Any] | None) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in (item or {}).items())


def read_units(size: int, consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / 4096))
    return units * 2 if transactional else units if consistent else units / 2


INDEXES = ("GSI1", "GSI2", "GSI3", "GSI4")  # every one KEYS_ONLY (mneme.adapters.dynamo_table.TABLE_SCHEMA)
INDEX_ENTRY_OVERHEAD = 100  # bytes DynamoDB adds to an index entry's key attributes


def index_entry_units(item: Mapping[str, Any], name: str) -> int:
    """One index entry's write units: the table's keys, the index's keys and the overhead (KEYS_ONLY)."""
    keys = {k: item[k] for k in ("PK", "SK", f"{name}PK", f"{name}SK") if k in item}
    return max(1, math.ceil((item_size(keys) + INDEX_ENTRY_OVERHEAD) / 1024))


def write_units(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> float:
    """The table's units for one item write (per 1 KB of the larger of the old and new item), plus each
    index's: a KEYS_ONLY index is written when an entry appears (put), goes (delete) or its keys change
    (delete + put); an update that leaves an index's keys alone does not touch it."""
    old, new = before or {}, after or {}
    units = max(1, math.ceil(max(item_size(before), item_size(after)) / 1024))
    for name in INDEXES:
        had = (old.get(f"{name}PK"), old.get(f"{name}SK")) if f"{name}PK" in old else None
        has = (new.get(f"{name}PK"), new.get(f"{name}SK")) if f"{name}PK" in new else None
        if had != has:
            units += (index_entry_units(old, name) if had else 0) + (index_entry_units(new, name) if has else 0)
    return units


@dataclass
class Meter:
    """Every AWS call of the current operation, priced."""

    read_units: float = 0.0
    write_units: float = 0.0
    dynamodb_calls: Counter[str] = field(default_factory=Counter)
    units_by_call: Counter[str] = field(default_factory=Counter)  # "Query": its read units; "PutItem": write
    items_read: int = 0
    bytes_read: int = 0
    embed_calls: int = 0
    embed_words: int = 0
    bedrock_seconds: float = 0.0
    converse_calls: int = 0  # the reasoner's (consolidation)
    converse_input_tokens: float = 0.0  # estimated from the prompt the code built (CHARS_PER_TOKEN)
    converse_output_tokens: float = 0.0  # estimated from the answer the double gave

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


METER = Meter()


def _get(client: Any, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
    found = RAW_CALL(client, "GetItem", {"TableName": table, "Key": dict(key), "ConsistentRead": True})
    return found.get("Item")


def _key(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: item[k] for k in ("PK", "SK")}


def _query_read(client: Any, params: dict[str, Any], answer: dict[str, Any]) -> float:
    """A query's units: the whole items it read (a projection or a filter does not lower them)."""
    full = dict(params)
    for name in ("ProjectionExpression", "Select", "ReturnConsumedCapacity"):
        full.pop(name, None)
    used = " ".join(str(full.get(e, "")) for e in ("KeyConditionExpression", "FilterExpression"))
    if "ExpressionAttributeNames" in full:
        full["ExpressionAttributeNames"] = {k: v for k, v in full["ExpressionAttributeNames"].items() if k in used}
        if not full["ExpressionAttributeNames"]:
            del full["ExpressionAttributeNames"]
    items = RAW_CALL(client, "Query", full).get("Items", [])
    size = sum(item_size(i) for i in items)
    scanned, count = answer.get("ScannedCount", len(items)), max(1, answer.get("Count", len(items)))
    size = size * scanned // count if items else 0  # the items the filter dropped, at the same average size
    METER.items_read += scanned
    METER.bytes_read += size
    consistent = bool(params.get("ConsistentRead")) and "IndexName" not in params
    return read_units(size, consistent)


def metered(tier_call: Any) -> Any:
    def call(self: Any, operation: str, params: dict[str, Any]) -> Any:
        service = self.meta.service_model.service_name
        if service == "bedrock-runtime":
            started = time.perf_counter()
            answer = tier_call(self, operation, params)
            METER.bedrock_seconds += time.perf_counter() - started
            if operation == "Converse":
                converse_tokens(params, answer)
                return answer
            METER.embed_calls += 1
            METER.embed_words += len(json.loads(params["body"]).get("inputText", "").split())
            return answer
        if service != "dynamodb":
            return tier_call(self, operation, params)
        before = _before(self, operation, params)
        answer = tier_call(self, operation, params)
        METER.dynamodb_calls[operation] += 1
        reads, writes = _reads(self, operation, params, answer), _writes(self, operation, before)
        if TRACE and reads:
            print(f"  {operation} {_read_target(params)}: {reads:g} read units", file=sys.stderr)
        METER.read_units += reads
        METER.write_units += writes
        METER.units_by_call[operation] += reads + writes
        return answer

    return call


def _before(client: Any, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], str, Any]]:
    """The items a write will touch: (table, key, kind of write, the item as it is now)."""
    touched: list[tuple[str, dict[str, Any], str]] = []
    if operation == "PutItem":
        touched.append((params["TableName"], _key(params["Item"]), "Put"))
    elif operation in ("UpdateItem", "DeleteItem"):
        touched.append((params["TableName"], params["Key"], operation))
    elif operation == "BatchWriteItem":
        for table, requests in params["RequestItems"].items():
            for r in requests:
                put = "PutRequest" in r
                touched.append((table, _key(r["PutRequest"]["Item"]) if put else r["DeleteRequest"]["Key"], "Put"))
    elif operation == "TransactWriteItems":
        for t in params["TransactItems"]:
            ((kind, body),) = t.items()
            touched.append((body["TableName"], _key(body["Item"]) if "Item" in body else body["Key"], kind))
    return [(table, key, kind, _get(client, table, key)) for table, key, kind in touched]


def _read_target(params: dict[str, Any]) -> str:
    """What a read asked for, for --trace: a query's index and key condition values, a batch's key count."""
    if "RequestItems" in params:
        keys = [k for request in params["RequestItems"].values() for k in request["Keys"]]
        prefixes = Counter(str(k["PK"].get("S", ""))[:40] for k in keys)
        return f"{len(keys)} keys " + ", ".join(f"{p} x{n}" for p, n in prefixes.items())
    values = [str(v.get("S", "")) for v in params.get("ExpressionAttributeValues", {}).values()]
    where = params.get("IndexName", "table") + (" consistent" if params.get("ConsistentRead") else "")
    return f"{where} {' '.join(values)[:80]}" if values else str(params.get("Key", {}).get("PK", {}).get("S", ""))


def _reads(client: Any, operation: str, params: dict[str, Any], answer: dict[str, Any]) -> float:
    if operation == "GetItem":
        item = answer.get("Item")
        full = _get(client, params["TableName"], params["Key"]) if item else None
        METER.items_read += 1 if item else 0
        METER.bytes_read += item_size(full)
        return read_units(item_size(full), bool(params.get("ConsistentRead")))
    if operation == "BatchGetItem":
        units = 0.0
        for table, request in params["RequestItems"].items():
            for key in request["Keys"]:
                full = _get(client, table, key)
                METER.items_read += 1 if full else 0
                METER.bytes_read += item_size(full)
                units += read_units(item_size(full), bool(request.get("ConsistentRead")))
        return units
    if operation == "TransactGetItems":
        return sum(
            read_units(item_size(_get(client, t["Get"]["TableName"], t["Get"]["Key"])), True, transactional=True)
            for t in params["TransactItems"]
        )
    if operation == "Query":
        return _query_read(client, params, answer)
    return 0.0


def _writes(client: Any, operation: str, before: list[tuple[str, dict[str, Any], str, Any]]) -> float:
    factor = 2 if operation == "TransactWriteItems" else 1
    units = 0.0
    for table, key, kind, old in before:
        new = _get(client, table, key)
        if kind == "ConditionCheck":  # billed as a write of the checked item, the index untouched
            item_units = factor * max(1, math.ceil(item_size(old) / 1024))
        else:
            item_units = factor * write_units(old, new)
        units += item_units
        if TRACE:
            where = "/".join(str(v.get("S", ""))[:40] for v in key.values())
            sizes = f"{item_size(old)} -> {item_size(new)} bytes"
            print(f"  {operation} {kind} {where}: {sizes}, {item_units:g} write units", file=sys.stderr)
    return units


# -- the operations ------------------------------------------------------------------------------------
WORDS = (
    "invoice supplier Pennine Joinery VAT flat rate scheme quarter return deadline payroll pension auto "
    "enrolment director loan account dividend corporation tax year end accruals bank feed reconciliation "
    "Harrow office lease deposit insurance renewal fleet mileage claim receipts Xero Sage migration"
).split()


def sentence(n: int) -> str:
    picked = [WORDS[(n * 7 + i * 13) % len(WORDS)] for i in range(18)]
    return f"Note {n}: " + " ".join(picked) + "."


@dataclass
class Operation:
    name: str
    meter: Meter
    invocations: list[tuple[str, int, float]]  # function, memory MB, billed seconds
    search_requests: int
    status: int

    def lambda_gb_seconds(self) -> float:
        return sum(mb / 1024 * seconds for _, mb, seconds in self.invocations)

    def embed_tokens(self) -> float:
        return self.meter.embed_words * TOKENS_PER_WORD

    def costs(self) -> dict[str, float]:
        return {
            "api": API_REQUEST,
            "lambda": len(self.invocations) * LAMBDA_REQUEST + self.lambda_gb_seconds() * LAMBDA_GB_SECOND,
            "dynamodb": self.meter.read_units * READ_UNIT + self.meter.write_units * WRITE_UNIT,
            "bedrock": self.embed_tokens() / 1000 * TITAN_EMBED_1K_TOKENS,
            "logs": LOG_BYTES * len(self.invocations) / 1e9 * LOG_GB,
        }


@contextmanager
def stack() -> Iterator[Any]:
    """The stack on the cloud tier's doubles, its AWS calls metered."""
    from mneme.adapters.embedders import LocalEmbedder
    from tests.cloud.conftest import deployed
    from tests.cloud.template import Template
    from tests.infra.synth import synthesize
    from tests.support.osmem import started_osmem

    with tempfile.TemporaryDirectory() as out:
        template = Template(synthesize(Path(out)).raw)
    servers = started_osmem()
    osmem = next(servers)
    try:
        with deployed(template, osmem, LocalEmbedder()) as cloud:
            tier_call = botocore.client.BaseClient._make_api_call
            botocore.client.BaseClient._make_api_call = metered(tier_call)  # type: ignore[method-assign]
            try:
                yield cloud
            finally:
                botocore.client.BaseClient._make_api_call = tier_call  # type: ignore[method-assign]
    finally:
        next(servers, None)


def measure(cloud: Any, name: str, act: Any) -> Operation:
    if TRACE:
        print(f"{name}:", file=sys.stderr)
    """Run `act()` (one API request, or a schedule tick) and price what it asked of AWS."""
    from tests.cloud.calls import WATCH

    deployment = cloud.deployment
    invoked: list[tuple[str, int, float]] = []
    real_invoke = deployment.invoke

    def timed(function: str, event: Any) -> Any:
        started, bedrock_before, calls_before = time.perf_counter(), METER.bedrock_seconds, METER.embed_calls
        converse_before = METER.converse_calls
        try:
            return real_invoke(function, event)
        finally:
            wall = time.perf_counter() - started
            bedrock = METER.bedrock_seconds - bedrock_before
            calls = METER.embed_calls - calls_before
            billed = max(0.001, wall - bedrock) + BEDROCK_LATENCY * calls
            billed += (METER.converse_calls - converse_before) * converse_seconds()
            invoked.append((function, deployment.functions[function].memory_mb, billed))

    METER.reset()
    seen = len(WATCH.seen)
    deployment.invoke = timed
    try:
        status = act()
    finally:
        del deployment.invoke
    searches = sum(1 for s in WATCH.seen[seen:] if s.request.action == "aoss:APIAccessAll")
    meter = copy.deepcopy(METER)
    return Operation(name, meter, invoked, searches, status)


def remember_many(cloud: Any, key: str, count: int) -> None:
    for start in range(0, count, 100):
        items = [{"scope": "root", "content": sentence(n)} for n in range(start, min(count, start + 100))]
        response = cloud.api("POST", "/v1/remember", {"items": items}, key=key)
        assert response.status == 201, str(response)


def run(busy: int) -> tuple[list[Operation], list[Operation], Any]:
    with stack() as cloud:
        cloud.operator_key("idle", "agent", "admin")  # a tenant that has written nothing
        ticks = [
            measure(
                cloud, "index-repair tick (every minute)", lambda: cloud.fire_schedule("index-repair").error or 200
            ),
            measure(
                cloud,
                "consolidate-schedule tick (every 15 min)",
                lambda: cloud.fire_schedule("consolidate-schedule").error or 200,
            ),
        ]
        quiet_key = cloud.operator_key("quiet", "agent", "admin")
        busy_key = cloud.operator_key("busy", "agent", "admin")
        remember_many(cloud, quiet_key, QUIET)
        cloud.later(minutes=30)  # the quiet tenant's episodes are past the index's visibility lag
        remember_many(cloud, busy_key, busy)
        for key in (quiet_key, busy_key):  # the authorizer's answer is cached (300 s): measured apart below
            cloud.api("GET", "/v1/me", key=key)
        query = {"query": "Pennine Joinery VAT flat rate scheme deadline"}

        def api(key: str, method: str, path: str, body: Any) -> Any:
            return lambda: cloud.api(method, path, body, key=key).status

        operations = [
            measure(cloud, "quiet recall", api(quiet_key, "POST", "/v1/recall", query)),
            measure(cloud, "busy recall", api(busy_key, "POST", "/v1/recall", query)),
            measure(cloud, "retrieve", api(quiet_key, "POST", "/v1/retrieve", {"path": "root"})),
            measure(
                cloud,
                "single remember",
                api(quiet_key, "POST", "/v1/remember", {"scope": "root", "content": sentence(10_001)}),
            ),
            measure(
                cloud,
                "single remember, a conversation turn",
                api(
                    quiet_key,
                    "POST",
                    "/v1/remember",
                    {"scope": "root", "content": sentence(10_002), "session_id": "s1"},
                ),
            ),
        ]
        cloud.gateway.flush_authorizer_cache()
        operations.append(
            measure(cloud, "GET /v1/me, the authorizer not cached", api(quiet_key, "GET", "/v1/me", None))
        )
        return operations, ticks, cloud.deployment.template


def fixed_monthly(template: Any) -> dict[str, float]:
    alarms = len(template.of_type("AWS::CloudWatch::Alarm"))
    return {
        # https://aws.amazon.com/cloudwatch/pricing/ : $0.10 per standard-resolution alarm metric a month;
        # $3.00 per dashboard a month (past the free 3)
        f"CloudWatch: {alarms} alarms, 1 dashboard": alarms * 0.10 + 3.00,
        # https://aws.amazon.com/kms/pricing/ : $1 per customer managed key a month (the alarm topic's)
        "KMS: 1 key": 1.00,
        # https://aws.amazon.com/secrets-manager/pricing/ : $0.40 per secret a month (the cursor secret)
        "Secrets Manager: 1 secret": 0.40,
    }


def domain_monthly() -> float:
    """The managed domain's idle month: its one node's instance-hours and its EBS volume."""
    from infra.mneme_infra.search_domain import VOLUME_GIB

    return DOMAIN_INSTANCE_HOUR * HOURS_A_MONTH + DOMAIN_GP3_GB_MONTH * VOLUME_GIB


# -- consolidation runs: Step Functions transitions by dirty scopes, and X-Ray ---------------------------
# https://aws.amazon.com/step-functions/pricing/ : Standard workflows $0.025 per 1,000 state transitions
# (us-east-1; 4,000 free a month, left out). Step Functions developer guide, "Transitions": a Distributed
# Map is billed one transition per child workflow execution it starts, and each child (a Standard
# workflow here) its own transitions; a retry or a redrive counts too (none in this bench).
SFN_TRANSITION = 0.025 / 1000
RUN_SCOPES = (1, 10, 1_000)
# https://aws.amazon.com/xray/pricing/ : $5.00 per million traces recorded past the first 100,000 a month;
# retrieving or scanning them is $0.50 per million past 1,000,000 (left out: it follows how often people look).
# Traced: every API request (stage tracing, functions' active tracing), every schedule tick, every state
# machine execution. The stack sets no sampling rule, so X-Ray's default applies: the first request each
# second and 5 % of the others (X-Ray developer guide, sampling); the reservoir is shared by every host.
XRAY_TRACE = 5.00 / 1e6
XRAY_FREE_TRACES = 100_000
XRAY_RESERVOIR, XRAY_RATE = 1, 0.05
TICKS_A_MONTH = {"index-repair tick (every minute)": 60 * HOURS_A_MONTH,
                 "consolidate-schedule tick (every 15 min)": 4 * HOURS_A_MONTH}  # fmt: skip


@dataclass
class RunTransitions:
    """What consolidating `scopes` dirty scopes costs Step Functions: runs of at most MAX_TARGETS_PER_RUN."""

    scopes: int
    runs: int
    states: Counter[str]  # states entered, parent and child executions, by name
    children: int  # child executions the Distributed Map started (one per scope)

    @property
    def transitions(self) -> int:
        return sum(self.states.values()) + self.children

    @property
    def stage_invocations(self) -> int:
        return sum(n for name, n in self.states.items() if name in STAGE_TASKS)

    def cost(self) -> float:
        return self.transitions * SFN_TRANSITION + self.stage_invocations * LAMBDA_REQUEST


STAGE_TASKS: set[str] = set()  # the definition's Lambda task states, read from the template


def count_states() -> tuple[Counter[str], Any]:
    """Every state moto's interpreter enters, by name, until the returned undo is called."""
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    entered: Counter[str] = Counter()
    real = CommonStateField._eval_body

    def counted(self: Any, env: Any) -> None:
        entered[self.name] += 1
        real(self, env)

    CommonStateField._eval_body = counted  # type: ignore[method-assign]
    return entered, lambda: setattr(CommonStateField, "_eval_body", real)


def measure_runs(scope_counts: tuple[int, ...]) -> list[RunTransitions]:
    """Runs the deployed state machine over each count of dirty scopes, `MAX_TARGETS_PER_RUN` a run."""
    import boto3

    from mneme.consolidation.service import MAX_TARGETS_PER_RUN
    from tests.cloud.template import REGION
    from tests.cloud.test_workflow import Stages

    measured = []
    with stack() as cloud:
        _, machine = cloud.deployment.template.state_machine()
        (processor,) = [s["ItemProcessor"] for s in machine["Definition"]["States"].values() if s["Type"] == "Map"]
        for states in (machine["Definition"]["States"], processor["States"]):
            STAGE_TASKS.update(name for name, state in states.items() if state["Type"] == "Task")
        client = boto3.client("stepfunctions", region_name=REGION)
        for scopes in scope_counts:
            cloud.deployment.task_script = Stages()
            entered, undo = count_states()
            targets = [f"scope-{n}" for n in range(scopes)]
            runs = [targets[i : i + MAX_TARGETS_PER_RUN] for i in range(0, scopes, MAX_TARGETS_PER_RUN)]
            try:
                for n, batch in enumerate(runs):
                    name = f"run-{scopes}-{n}"
                    started = client.start_execution(
                        stateMachineArn=cloud.deployment.state_machine_arn(), name=name,
                        input=json.dumps({"tenant": "acme", "run_id": name, "targets": batch}),
                    )  # fmt: skip
                    done = cloud.deployment.wait_for_execution(started["executionArn"], timeout=3600)
                    assert done["status"] == "SUCCEEDED", done
            finally:
                undo()
            measured.append(RunTransitions(scopes, len(runs), entered, entered[processor["StartAt"]]))
    return measured


def xray_sampled(per_second: float) -> float:
    """The share of requests X-Ray's default rule records at a steady `per_second`."""
    kept = min(per_second, XRAY_RESERVOIR) + XRAY_RATE * max(0.0, per_second - XRAY_RESERVOIR)
    return kept / per_second


def idle_month(ticks: list[Operation], template: Any) -> float:
    """The idle month but search: the two schedules' ticks and the fixed items (report's idle table)."""
    scheduled = sum(sum(v for k, v in tick.costs().items() if k != "api") * TICKS_A_MONTH[tick.name] for tick in ticks)
    return scheduled + sum(fixed_monthly(template).values())


def runs_report(runs: list[RunTransitions], ticks: list[Operation], template: Any) -> str:
    lines = [
        "Consolidation, Step Functions (Standard): the dirty scopes one schedule tick consolidates, one small batch "
        "each. A run takes at most 200 (one run per tenant a tick): 1,000 a tick is five tenants of 200, or one "
        "tenant's 1,000 over five ticks.",
        "",
        "| dirty scopes a tick | runs | child executions | states entered | transitions | per scope "
        "| stage invocations | $ per tick | $ a month, a tick every 15 min |",
        "|" + "---|" * 9,
    ]
    for run in runs:
        month = run.cost() * TICKS_A_MONTH["consolidate-schedule tick (every 15 min)"]
        lines.append(
            f"| {run.scopes:,} | {run.runs} | {run.children:,} | {sum(run.states.values()):,} "
            f"| {run.transitions:,} | {run.transitions / run.scopes:.1f} | {run.stage_invocations:,} "
            f"| {run.cost():.4f} | {month:,.2f} |"
        )
    per_scope = {name: n / runs[0].scopes for name, n in sorted(runs[0].states.items())}
    lines += ["", "States entered per run of one scope: " + ", ".join(f"{k} {v:g}" for k, v in per_scope.items())]
    lines += ["", "X-Ray, traces recorded (default sampling: 1 a second, then 5 %):", "",
              "| traffic | share traced | $ per million requests |", "|---|---|---|"]  # fmt: skip
    for rate in (1, 10, 100):
        share = xray_sampled(rate)
        lines.append(f"| {rate} a second, steady | {share:.1%} | {share * XRAY_TRACE * 1e6:.2f} |")
    lines.append(f"| every request traced (a sampling rule of 100 %) | 100% | {XRAY_TRACE * 1e6:.2f} |")
    ticks_a_month = sum(TICKS_A_MONTH.values())
    lines += ["", f"Schedules: {ticks_a_month:,} ticks a month, each traced (under 1 a second); a run traces its "
              "execution and each child's. Past the free 100,000 traces a month:", "",
              "| a month, every tick consolidating | traces | X-Ray $ | Step Functions $ "
              "| total, Serverless 2 OCU | total, Serverless 1 OCU | total, domain |", "|" + "---|" * 7]  # fmt: skip
    idle, runs_a_month = idle_month(ticks, template), TICKS_A_MONTH["consolidate-schedule tick (every 15 min)"]
    for run in runs:
        traces = ticks_a_month + runs_a_month * (run.runs + run.children)
        xray = max(0, traces - XRAY_FREE_TRACES) * XRAY_TRACE
        sfn = run.cost() * runs_a_month
        base = idle + xray + sfn
        lines.append(
            f"| {run.scopes:,} dirty scope{'s' if run.scopes > 1 else ''} | {traces:,} | {xray:,.2f} | {sfn:,.2f} "
            f"| {base + 2 * OCU_HOUR * HOURS_A_MONTH:,.2f} | {base + OCU_HOUR * HOURS_A_MONTH:,.2f} "
            f"| {base + domain_monthly():,.2f} |"
        )
    lines += [
        "",
        f"Step Functions ${SFN_TRANSITION * 1e3}/1,000 transitions; the stage invocations' Lambda "
        "requests are in '$ per tick' (their GB-seconds follow the work, not the scope count: left out). "
        "The transitions and traces are the same for both search options; only the idle base differs.",
    ]
    return "\n".join(lines)


def report(operations: list[Operation], ticks: list[Operation], template: Any) -> str:
    head = (
        "| operation | status | Lambda invocations (GB-s) | read units | write units | DynamoDB calls (units) "
        "| items read (KB) | Bedrock calls (tokens) | search requests | $ per million |"
    )
    lines = [head, "|" + "---|" * 10]
    for op in operations:
        m = op.meter
        calls = ", ".join(f"{k} {v} ({m.units_by_call[k]:g} u)" for k, v in sorted(m.dynamodb_calls.items()))
        lines.append(
            f"| {op.name} | {op.status} | {len(op.invocations)} ({op.lambda_gb_seconds():.3f}) | {m.read_units:g} "
            f"| {m.write_units:g} | {calls} | {m.items_read} ({m.bytes_read / 1024:.0f}) "
            f"| {m.embed_calls} ({op.embed_tokens():.0f}) | {op.search_requests} "
            f"| {sum(op.costs().values()) * 1e6:,.2f} |"
        )
    lines += ["", "Per million, by service (USD):", "", "| operation | " + " | ".join(operations[0].costs()) + " |"]
    lines.append("|" + "---|" * (1 + len(operations[0].costs())))
    for op in operations:
        lines.append(f"| {op.name} | " + " | ".join(f"{v * 1e6:,.2f}" for v in op.costs().values()) + " |")
    monthly = {
        "index-repair tick (every minute)": 60 * HOURS_A_MONTH,
        "consolidate-schedule tick (every 15 min)": 4 * HOURS_A_MONTH,
    }
    lines += ["", "Idle, a month (USD):", "", "| item | $ a month |", "|---|---|"]
    idle = 0.0
    for tick in ticks:
        cost = sum(v for k, v in tick.costs().items() if k != "api") * monthly[tick.name]
        idle += cost
        queries = ", ".join(f"{k} {v}" for k, v in sorted(tick.meter.dynamodb_calls.items()))
        lines.append(
            f"| {tick.name}: DynamoDB {queries}: {tick.meter.read_units:g} read units, "
            f"{len(tick.invocations)} invocation(s), x {monthly[tick.name]:,} | {cost:.2f} |"
        )
    for item, cost in fixed_monthly(template).items():
        idle += cost
        lines.append(f"| {item} | {cost:.2f} |")
    for ocus, label in ((2, "with standby replicas (default)"), (1, "without standby replicas")):
        search = ocus * OCU_HOUR * HOURS_A_MONTH
        lines.append(f"| **total, OpenSearch Serverless {ocus} OCU {label}** | **{idle + search:,.2f}** |")
    lines.append(f"| **total, OpenSearch Service domain, 1 x t3.small.search + 10 GiB gp3 (`mneme:search=domain`)** "
                 f"| **{idle + domain_monthly():,.2f}** |")  # fmt: skip
    lines.append("")
    lines.append(
        f"Prices (us-east-1): Lambda Arm ${LAMBDA_GB_SECOND}/GB-s + ${LAMBDA_REQUEST * 1e6:.2f}/M requests; "
        f"API Gateway REST ${API_REQUEST * 1e6:.2f}/M; DynamoDB on-demand ${READ_UNIT * 1e6}/M read units, "
        f"${WRITE_UNIT * 1e6}/M write units; Titan Text Embeddings V2 ${TITAN_EMBED_1K_TOKENS}/1k tokens "
        f"(Cohere Embed 3 ${COHERE_EMBED_1K_TOKENS}: x5 the Bedrock column); OpenSearch Serverless "
        f"${OCU_HOUR}/OCU-hour; OpenSearch Service t3.small.search ${DOMAIN_INSTANCE_HOUR}/hour, gp3 "
        f"${DOMAIN_GP3_GB_MONTH}/GB-month; CloudWatch Logs ${LOG_GB}/GB ({LOG_BYTES} bytes a request assumed). "
        "Storage (DynamoDB, OpenSearch, logs) is left out."
    )
    return "\n".join(lines)


# -- consolidation per million episodes ---------------------------------------------------------------
# https://aws.amazon.com/bedrock/pricing/ : Anthropic Claude Haiku 4.5 (the stack's default reasoner,
# mneme.settings.BedrockReasonerSettings) $0.001 per 1,000 input tokens, $0.005 per 1,000 output tokens; Claude 3
# Haiku $0.00025 and $0.00125
HAIKU_45_1K = (0.001, 0.005)
HAIKU_3_1K = (0.00025, 0.00125)
CONVERSATIONS = ROOT / "bench" / "conversations" / "long"
ANSWERS = ROOT / "bench" / "cost_answers.json"
# Assumptions, not prices: a Converse call keeps the stage function waiting this long, plus its output at this
# rate (Haiku-class models write 100 to 200 tokens a second)
CONVERSE_LATENCY = 0.6
OUTPUT_TOKENS_PER_SECOND = 120.0
# The system prompt a Claude model is given for tool use, beside ours: 313 tokens with a forced tool (Anthropic's
# tool-use pricing notes for Claude Haiku 3.5 / 4.5-era models; billed as input, not in the request we build)
TOOL_USE_TOKENS = 313


def stage_names() -> tuple[str, ...]:
    from mneme.consolidation.stages import STAGE_NAMES

    return STAGE_NAMES


def converse_tokens(params: dict[str, Any], answer: dict[str, Any]) -> None:
    """A reasoner call's tokens, estimated as the code's budgets are (`CHARS_PER_TOKEN`): the prompt it sent
    (system, messages and the tool's schema) and the tool input the double answered."""
    from mneme.consolidation.reasoning import CHARS_PER_TOKEN

    sent = json.dumps([params.get("system"), params.get("messages"), params.get("toolConfig")])
    content = answer.get("output", {}).get("message", {}).get("content", [])
    said = json.dumps([block.get("toolUse", {}).get("input") for block in content])
    METER.converse_calls += 1
    METER.converse_input_tokens += len(sent) / CHARS_PER_TOKEN + TOOL_USE_TOKENS
    METER.converse_output_tokens += len(said) / CHARS_PER_TOKEN


def converse_seconds() -> float:
    """How long one reasoner call keeps a stage function waiting: CONVERSE_LATENCY and a recorded answer's output."""
    return CONVERSE_LATENCY + recorded_output_tokens() / OUTPUT_TOKENS_PER_SECOND


def recorded_output_tokens() -> float:
    """The mean output of the answers an LLM would give a window (bench/cost_answers.json), in tokens."""
    from mneme.consolidation.reasoning import CHARS_PER_TOKEN

    answers = json.loads(ANSWERS.read_text())["answers"]
    return sum(len(json.dumps(a["answer"])) / CHARS_PER_TOKEN for a in answers) / len(answers)


@dataclass
class Consolidated:
    episodes: int
    run: dict[str, Any]
    operation: Operation
    tasks: Counter[str]  # stage tasks the state machine ran, by stage ("begin" counts the batches)

    @property
    def transitions(self) -> int:
        """The states the run's executions entered (what Standard workflows bill), from the definition
        (infra/mneme_infra/workflow.py): per batch Begin, a task per stage, Summarize and MoreEpisodes; per scope
        Target and TargetDone; per run Targets and Finish (moto records no child execution's history)."""
        scopes = len(self.run["scopes"])
        return self.tasks["begin"] * (3 + len(stage_names())) + 2 * scopes + 2


def consolidation_cost(folder: Path) -> Consolidated:
    """A conversational set remembered as the bench does (`bench/conversations.py --shape minutes`: each
    turn at its session's time plus a minute per turn, the speaker in metadata, a session id), then one run of
    the deployed state machine over its scopes (the schedule's tick), metered: Lambda, DynamoDB, Bedrock (the
    reasoner's Converse calls and the embeddings of what it wrote) and the execution's state transitions."""
    sys.path.append(str(ROOT / "bench"))
    from conversations import parse  # bench/conversations.py

    from tests.cloud.test_consolidation import execution_arn

    conversations = [conv for path in sorted(folder.glob("*.txt")) for conv in parse(path)]
    with stack() as cloud:
        key = cloud.operator_key("talk", "agent", "admin")
        episodes = 0
        for conv in conversations:
            sessions: dict[str, list[Any]] = {}
            for turn in conv.turns:
                sessions.setdefault(turn.session, []).append(turn)
            for session, turns in sessions.items():
                for start in range(0, len(turns), 100):
                    items = [{"scope": conv.scope, "content": t.text, "create_scope": True,
                              "occurred_at": t.occurred_at.isoformat(), "session_id": f"{conv.name}-{session}",
                              "metadata": {"speaker": t.speaker}} for t in turns[start : start + 100]]  # fmt: skip
                    answer = cloud.api("POST", "/v1/remember", {"items": items}, key=key)
                    assert answer.status == 201, str(answer)
                    episodes += len(items)
        cloud.later(minutes=15)  # the next tick, past the settle time
        started: list[str] = []
        tasks: Counter[str] = Counter()
        real_task = cloud.deployment.invoke_from_state_machine

        def task(parameters: dict[str, Any]) -> dict[str, Any]:
            payload = parameters.get("Payload")
            event = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
            tasks[str((event or {}).get("stage"))] += 1
            return real_task(parameters)

        cloud.deployment.invoke_from_state_machine = task  # type: ignore[method-assign]

        def tick() -> int:
            runs = cloud.fire_schedule().payload["runs"]
            for run in runs:
                started.append(run["run_id"])
                cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]), timeout=3600)
            return 200

        operation = measure(cloud, "consolidation", tick)
        (run_id,) = started
        record = cloud.api("GET", f"/v1/consolidations/{run_id}", key=key).json()
    return Consolidated(episodes, record, operation, tasks)


def consolidation_report(result: Consolidated) -> str:
    """Consolidation per million episodes, by service, with Haiku 4.5 (and Claude 3 Haiku), and what one run did."""
    op, run, n = result.operation, result.run, result.episodes
    extract = run["stages"].get("extract", {}).get("counters", {})
    calls = op.meter.converse_calls
    per = 1e6 / n
    tokens_in = op.meter.converse_input_tokens
    tokens_out = calls * recorded_output_tokens()
    base = op.costs()
    lines = [
        "",
        f"Consolidation, per million episodes ({n} turns of {len(run['scopes'])} conversations in one run: "
        f"{run['status']}, {calls} reasoner calls = {calls / n * 100:.1f} per 100 episodes; "
        f"{run['stages'].get('cluster', {}).get('counters', {}).get('clusters', 0)} windows; "
        f"{result.transitions} state transitions):",
        "",
        f"- reasoner input: {tokens_in / n:.0f} tokens an episode (the prompts the code built, "
        f"{tokens_in / max(calls, 1):.0f} a call); output {tokens_out / n:.1f} an episode "
        f"({recorded_output_tokens():.0f} a call: the mean of "
        f"{ANSWERS.name}; the double's own answers averaged {op.meter.converse_output_tokens / max(calls, 1):.0f})",
        f"- run counters: extract {extract}",
        "",
        "| item | Claude Haiku 4.5 | Claude 3 Haiku |",
        "|---|---|---|",
    ]
    rows = {
        "reasoner (Bedrock Converse)": [
            tokens_in / 1000 * i + tokens_out / 1000 * o for i, o in (HAIKU_45_1K, HAIKU_3_1K)
        ],
        f"Lambda ({len(op.invocations)} invocations, {op.lambda_gb_seconds():.2f} GB-s)": [base["lambda"]] * 2,
        f"Step Functions ({result.transitions} transitions)": [result.transitions * SFN_TRANSITION] * 2,
        f"DynamoDB ({op.meter.read_units:g} read, {op.meter.write_units:g} write units)": [base["dynamodb"]] * 2,
        f"Bedrock embeddings of facts and roll-ups ({op.meter.embed_calls} calls)": [base["bedrock"]] * 2,
        "CloudWatch Logs": [base["logs"]] * 2,
    }
    totals = [0.0, 0.0]
    for item, costs in rows.items():
        lines.append(f"| {item} | {costs[0] * per:,.2f} | {costs[1] * per:,.2f} |")
        totals = [t + c for t, c in zip(totals, costs, strict=True)]
    lines.append(f"| **total per million episodes** | **{totals[0] * per:,.2f}** | **{totals[1] * per:,.2f}** |")
    lines.append("")
    lines.append(
        f"Assumptions: tokens are characters / {3.5} (no tokenizer is shipped), plus {TOOL_USE_TOKENS} a call for "
        f"Claude's tool-use prompt; a Converse call bills "
        f"{CONVERSE_LATENCY} s plus its output at {OUTPUT_TOKENS_PER_SECOND:.0f} tokens/s of stage-function time; "
        f"Lambda is the stage function's wall time on the cloud tier's doubles (moto is slower than DynamoDB: "
        f"an upper bound); Step Functions Standard ${SFN_TRANSITION * 1000:.3f}/1,000 transitions; Haiku 4.5 "
        f"${HAIKU_45_1K[0] * 1000:.2f}/${HAIKU_45_1K[1] * 1000:.2f} per million input/output tokens, Claude 3 Haiku "
        f"${HAIKU_3_1K[0] * 1000:.2f}/${HAIKU_3_1K[1] * 1000:.2f}."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=BUSY, help="episodes the busy tenant wrote just before")
    parser.add_argument("--trace", action="store_true", help="print every item write and its units (stderr)")
    parser.add_argument("--conversations", type=Path, default=CONVERSATIONS, help="the set consolidation is priced on")
    parser.add_argument("--scopes", type=int, nargs="*", default=list(RUN_SCOPES),
                        help="dirty scopes a consolidation tick finds (none: skip the runs)")  # fmt: skip
    args = parser.parse_args()
    global TRACE
    TRACE = args.trace
    operations, ticks, template = run(args.busy)
    print(report(operations, ticks, template))
    if args.scopes:
        print("\n" + runs_report(measure_runs(tuple(args.scopes)), ticks, template))
    print(consolidation_report(consolidation_cost(args.conversations)))


if __name__ == "__main__":
    main()
