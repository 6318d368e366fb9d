"""kill -9 a consolidation 20 times, then let it finish: facts are exactly once and checkpoints truthful."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mneme import bootstrap
from mneme.models import Principal, Role
from mneme.services.remember import RememberItem

pytestmark = pytest.mark.slow
EPISODES = 2000
KILLS = 20
CLIENTS = [f"Client{n:02d}" for n in range(40)]
PROPERTIES = ["VAT scheme", "year end", "bank", "payroll provider"]


def corpus() -> list[RememberItem]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    items = []
    for i in range(EPISODES):
        client, prop = CLIENTS[i % len(CLIENTS)], PROPERTIES[(i // len(CLIENTS)) % len(PROPERTIES)]
        value = f"option {i // 500}"  # values change over time: supersessions happen
        items.append(
            RememberItem(
                scope=f"root.{'north' if i % 2 else 'south'}",
                create_scope=True,
                content=f"{client}'s {prop} is {value}.",
                idempotency_key=f"e{i}",
                occurred_at=start + timedelta(hours=i),
            )
        )
    return items


def consolidate(home: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "MNEME_HOME": str(home),
        "MNEME_CONSOLIDATION__BATCH_SIZE": "40",
        "MNEME_CONSOLIDATION__LEASE_SECONDS": "0.5",
        "MNEME_CONSOLIDATION__SETTLE_SECONDS": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "mneme.cli", "consolidate"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_kill_nine_at_random_points_then_finish(home: Path) -> None:
    # Given a few thousand episodes in two scopes
    services = bootstrap.current()
    writer = Principal(tenant="default", principal="loader", roles=frozenset({Role.writer}))
    items = corpus()
    for start in range(0, len(items), 100):
        services.remember.remember(writer, items[start : start + 100])
    seed = int(os.environ.get("CRASH_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    # When consolidation is killed with SIGKILL twenty times at random points
    for _ in range(KILLS):
        process = consolidate(home)
        time.sleep(rng.uniform(0.3, 2.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
        time.sleep(0.6)  # the dead runner's lease expires
    # And then runs to completion
    finisher = consolidate(home)
    assert finisher.wait(timeout=600) == 0, f"seed {seed}"
    # Then every episode was checkpointed exactly once
    store = services.store
    scopes = {path: services.scopes.resolve("default", path).scope.scope_id for path in ("root.north", "root.south")}
    assert sum(store.get_checkpoint("default", s).processed for s in scopes.values()) == EPISODES, f"seed {seed}"
    assert store.list_dirty("default", 10) == []
    # And each episode is the source of exactly one extracted fact, and every source exists
    facts = store.list_facts("default")
    sourced = [e for f in facts if f.tier == "raw" for e in f.source_episode_ids]
    assert len(sourced) == len(set(sourced)) == EPISODES, f"seed {seed}"
    assert len(store.get_episodes("default", sorted({e for f in facts for e in f.source_episode_ids}))) == EPISODES
    # And for every client and property exactly one value is active: the one observed last
    latest = {}
    for item in items:
        entity, rest = item.content.split("'s ", 1)
        prop, value = rest.rstrip(".").split(" is ")
        latest[entity, prop] = value
    active = {(f.entity, f.property): f.value for f in facts if f.tier == "raw" and f.status == "active"}
    assert len(active) == len([f for f in facts if f.tier == "raw" and f.status == "active"])
    assert active == latest, f"seed {seed}"
    # And the last run says what happened; a killed run, read past its lease, is concluded failed with the reason
    runs = services.consolidation.recent(writer, 100)
    assert runs[0].status == "succeeded" and all(r.status in ("failed", "succeeded") for r in runs)
    killed = [r for r in runs if r.status == "failed"]
    assert killed and all(r.errors[-1]["message"].startswith("lease_expired") for r in killed)
    assert all(r.finished_at is not None for r in runs)
