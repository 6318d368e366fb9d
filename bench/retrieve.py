"""retrieve p50/p95: a depth-5 tree, 100 scoped memories per level plus tagged ones.

Through the domain on SQLite and on DynamoDB (moto, for relative cost only), and through the
local HTTP server. Run: .venv/bin/python bench/retrieve.py [--runs 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from mneme import bootstrap  # noqa: E402
from mneme.models import Principal, Role  # noqa: E402

TENANT = "bench"
PATH = "root.c1.s1.d3.d4.d5"
ADMIN = Principal(tenant=TENANT, principal="bench", roles=frozenset({Role.admin}))


def seed(services: bootstrap.Services, per_level: int = 100) -> None:
    services.scopes.set_layers(TENANT, {1: "clients", 2: "services", 3: "l3", 4: "l4", 5: "l5"})
    services.scopes.create(TENANT, PATH, parents=True)
    segments = PATH.split(".")
    for depth in range(len(segments)):
        scope = ".".join(segments[: depth + 1])
        for i in range(per_level):
            services.memories.create(ADMIN, scope=scope, key=f"m{i:03d}", body=f"Guidance {i} at {scope}. " * 8)
    for layer, value in (("clients", "c1"), ("services", "s1"), ("l3", "d3")):
        for i in range(20):
            services.memories.create(ADMIN, tag=f"{layer}=*", key=f"w{i:02d}", body=f"Layer-wide {i}.")
            services.memories.create(ADMIN, tag=f"{layer}={value}", key=f"v{i:02d}", body=f"Targeted {i}.")


def measure(label: str, call: Callable[[], object], runs: int) -> None:
    for _ in range(5):
        call()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p95 = samples[int(len(samples) * 0.95) - 1]
    print(f"{label:<34} p50 {statistics.median(samples):7.2f} ms   p95 {p95:7.2f} ms   ({runs} runs)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        from mneme.adapters.sqlite.store import SqliteRecordStore

        sqlite = bootstrap.build(store=SqliteRecordStore(Path(tmp) / "bench.db"))
        seed(sqlite)
        blocks = len(sqlite.retrieval.retrieve(ADMIN, PATH).blocks)
        print(f"tree depth 5, {blocks} blocks in the bundle of {PATH}")
        measure("domain, SQLite", lambda: sqlite.retrieval.retrieve(ADMIN, PATH), args.runs)
        bench_dynamodb(args.runs)
        bench_http(tmp, args.runs)


def bench_dynamodb(runs: int) -> None:
    try:
        import boto3
        from moto import mock_aws

        from mneme.adapters.dynamo.store import DynamoRecordStore, create_table
    except ImportError as e:
        print(f"domain, DynamoDB (moto)            skipped: {e}")
        return
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, "bench")
        dynamo = bootstrap.build(store=DynamoRecordStore("bench", client=client))
        seed(dynamo)
        measure(
            "domain, DynamoDB (moto, relative)",
            lambda: dynamo.retrieval.retrieve(ADMIN, PATH),
            max(runs // 4, 20),
        )


def bench_http(tmp: str, runs: int) -> None:
    import requests

    from mneme.cli import ensure_first_run
    from mneme.local.server import make_server

    os.environ["MNEME_HOME"] = str(Path(tmp) / "http")
    bootstrap.reset()
    ensure_first_run()
    services = bootstrap.current()
    secret, _ = services.keys.create(TENANT, "bench", ["admin"])
    seed(services)
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/retrieve"
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {secret}"
    measure("local HTTP server", lambda: session.post(url, json={"path": PATH}).raise_for_status(), runs)
    server.shutdown()


if __name__ == "__main__":
    main()
