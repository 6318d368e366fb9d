"""Consolidation throughput: episodes/min through every stage with the extractive reasoner on the
embedded engine (SQLite store and index, the real local embedding model), and reasoner calls per
100 episodes. Run: .venv/bin/python bench/consolidate.py [--episodes 3000] [--batch 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from mneme import bootstrap  # noqa: E402
from mneme.adapters.sqlite_index import SqliteSearchIndex  # noqa: E402
from mneme.adapters.sqlite_store import SqliteRecordStore  # noqa: E402
from mneme.models import Principal, Role  # noqa: E402
from mneme.services.remember import RememberItem  # noqa: E402
from mneme.settings import Settings  # noqa: E402

CLIENTS = [f"Client{n:03d}" for n in range(120)]
FACTS = ["VAT scheme is flat rate", "year end is 31 March", "bank is Northern Bank", "payroll runs on the 25th"]
CHATTER = [
    "Called {c} about the quarterly figures.",
    "Sent {c} the draft accounts for review.",
    "{c} asked for a meeting next week.",
    "Chased {c} for missing receipts.",
]


def corpus(count: int) -> list[RememberItem]:
    start = datetime(2026, 1, 5, tzinfo=UTC)
    items = []
    for i in range(count):
        client = CLIENTS[i % len(CLIENTS)]
        text = f"{client}'s {FACTS[(i // 3) % 4]}." if i % 3 == 0 else CHATTER[i % 4].format(c=client)
        scope = f"root.region-{i % 4}"
        items.append(
            RememberItem(
                scope=scope,
                content=text,
                create_scope=True,
                idempotency_key=f"b{i}",
                occurred_at=start + timedelta(minutes=7 * i),
            )
        )
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), consolidation={"batch_size": args.batch, "settle_seconds": 0})
        services = bootstrap.build(
            settings,
            store=SqliteRecordStore(Path(tmp) / "m.db"),
            index=SqliteSearchIndex(Path(tmp) / "i.db"),
            background=False,
        )
        writer = Principal(tenant="bench", principal="bench", roles=frozenset({Role.admin}))
        items = corpus(args.episodes)
        started = time.perf_counter()
        for offset in range(0, len(items), 100):
            services.remember.remember(writer, items[offset : offset + 100])
        ingest = time.perf_counter() - started
        started = time.perf_counter()
        run = services.consolidation.start(writer, None)
        calls = run.counter("extract", "reasoner_calls")
        elapsed = time.perf_counter() - started
        read = run.stages["collect"].counters.get("episodes_read", 0)
        facts = services.store.list_facts("bench")
        print(f"episodes {read} in {len(run.scopes)} scopes, batch {args.batch}, run {run.status}")
        print(f"ingest (remember, batches of 100)   {len(items) / ingest:8.0f} episodes/s")
        print(f"consolidate, all stages             {read / elapsed * 60:8.0f} episodes/min ({elapsed:.1f} s)")
        print(f"reasoner calls per 100 episodes     {calls / max(read, 1) * 100:8.1f}")
        extracted = sum(1 for f in facts if f.tier == "raw")
        structured = sum(1 for f in facts if f.tier == "raw" and f.entity)
        print(f"facts {extracted} ({structured} with entity/property/value), rollups {len(facts) - extracted}")
        for stage, report in run.stages.items():
            print(f"  {stage:<10} " + ", ".join(f"{k} {v}" for k, v in report.counters.items()))


if __name__ == "__main__":
    main()
