"""A local home backed up while it serves under load, then restored: what survives, how long it takes, how big.

The home: N episodes (default 100,000), built once and cached in bench/.cache/backup-home-N, written through
the store's own batch API (`SqliteRecordStore.put_episodes`, 1,000 a call) and indexed through
`Indexer.index_episodes`, with the synthetic generator's texts and sessions (bench/_common.py) and random
unit vectors of the local model's size (384 floats; the model is not run to build it: this bench measures
files and writers, not recall quality). Then each round (`--rounds kill9,clean`):

1. serves a copy of that home (`mneme serve --workers 2`) and starts `--writers` processes that remember one
   episode at a time over HTTP as fast as they are answered, each logging every acknowledged id with the
   times it was sent and answered;
2. after a few seconds of load runs `mneme backup DEST` as its own process (as a cron job would); the
   writers' latency while it runs is set beside their latency outside it;
3. ends the server under that load: SIGKILL to every process of it (`kill9`), or SIGTERM just after eight
   batches of 100 were sent, so that their embedding is in progress (`clean`: the time to exit is printed,
   and whether a `-wal` file is left in the home);
4. restores DEST into a new home (`mneme restore`, which rebuilds the index from the store), serves it, and
   looks for every write acknowledged before the backup was started: all of them in the store (read-only),
   a sample through `GET /v1/episodes/{id}`, and a recall that finds them.

Printed per round: writes acknowledged, those acknowledged before the backup started, how many of those the
restored home holds (it must be all), the backup's time (the command; the store's copy alone) and size, the
restore's time, writer latency p50 / p99 / max outside and during the backup, SIGTERM to exit. Exit 1 when
a write acknowledged before the backup is missing or the restored home does not serve. Figures only (the
machine is shared: quote medians of several runs).

`--stop-only` measures SIGTERM to exit under that load alone (no backup), so it also runs on a commit
from before `mneme backup` existed (PYTHONPATH=that-checkout/shared).

    .venv/bin/python bench/backup.py [--episodes 100000] [--writers 3] [--rounds kill9,clean] [--rebuild]
    .venv/bin/python bench/backup.py --stop-only [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _common as c
import httpx
import numpy as np

TENANT = "default"  # the tenant `mneme serve` makes the admin key for
LOAD_SECONDS = 4.0  # of writes before the backup starts, and again after it ends


# -- the home -----------------------------------------------------------------------------------
def home_of(episodes: int, rebuild: bool) -> Path:
    """A home of `episodes` synthetic episodes, built once through the store's batch API, then cached."""
    final = c.CACHE / f"backup-home-{episodes}"
    if rebuild:
        shutil.rmtree(final, ignore_errors=True)
    if (final / "done.json").exists():
        return final
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    build(partial, episodes)
    (partial / "done.json").write_text(json.dumps({"episodes": episodes, "seconds": time.perf_counter() - started}))
    partial.rename(final)
    return final


def build(home: Path, count: int) -> None:
    from mneme import bootstrap
    from mneme.adapters.models.embedders import LocalEmbedder
    from mneme.models import Episode
    from mneme.services.remember import RememberItem, content_hash, episode_id
    from mneme.settings import Settings

    services = bootstrap.build(Settings(home=home), background=False)
    store, indexer = services.store, services.indexer
    services.embedder = FixedSize(LocalEmbedder.dimension, LocalEmbedder.model_id)  # never run
    rng = np.random.default_rng(7)
    scope_ids: dict[str, str] = {}
    now = datetime.now(UTC)
    print(f"building a home of {count:,} episodes in {home.relative_to(c.ROOT)} (the store's batch API)")
    for first in range(0, count, 1000):
        vectors = rng.standard_normal((min(1000, count - first), LocalEmbedder.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = []
        for n, i in enumerate(range(first, first + len(vectors))):
            scope, session, when, content = c.synthetic(i)
            if scope not in scope_ids:
                scope_ids[scope] = services.scopes.create(TENANT, scope, parents=True).scope.scope_id
            item = RememberItem(scope=scope, content=content, occurred_at=when, session_id=session)
            batch.append(
                Episode(
                    tenant=TENANT, episode_id=episode_id(TENANT, item, scope_ids[scope], when),
                    scope_id=scope_ids[scope], content=content, content_hash=content_hash(scope_ids[scope], item),
                    occurred_at=when, created_at=now, author="bench-loader", session_id=session,
                    vector=vectors[n].tolist(), model_id=LocalEmbedder.model_id,
                )
            )  # fmt: skip
        store.put_episodes(batch)
        indexer.index_episodes(batch)
        if (first + len(batch)) % 20_000 == 0:
            print(f"  {first + len(batch):>7,} episodes")
    services.close()


class FixedSize:
    """Stands in for the model while the home is built: every episode brings its vector, so it is never asked."""

    def __init__(self, dimension: int, model_id: str) -> None:
        self.dimension, self.model_id = dimension, model_id

    def embed(self, texts: Any) -> Any:
        raise AssertionError("the bench home's episodes carry their vectors")


# -- processes ------------------------------------------------------------------------------------
def env(home: Path) -> dict[str, str]:
    """A subprocess's environment on `home`: this checkout's code (after a PYTHONPATH given to the bench)."""
    paths = [os.environ.get("PYTHONPATH"), str(c.ROOT / "shared"), str(c.ROOT)]
    return {**os.environ, "MNEME_HOME": str(home), "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def mneme(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mneme.cli", *args], env=env(home), capture_output=True, text=True)


@contextlib.contextmanager
def serving(home: Path, workers: int) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """`mneme serve --port 0` on `home`: the process, its URL and the admin key (killed at the end if alive)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", str(workers)],
        env=env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    url, lines = None, []
    for line in proc.stdout:
        lines.append(line)
        if match := re.search(r"serving on (http://\S+)", line):
            url = match.group(1)
        if "API key" in line:
            break
    if url is None:
        raise SystemExit("the server did not start:\n" + "".join(lines))
    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
    try:
        yield proc, url, (home / "admin.key").read_text().strip()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def gone_after(proc: subprocess.Popen[str], sig: int) -> float:
    """Seconds from `sig` to the end of the server and every process of its group."""
    started = time.perf_counter()
    os.kill(proc.pid, sig) if sig != signal.SIGKILL else os.killpg(proc.pid, sig)
    proc.wait()
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return time.perf_counter() - started
        time.sleep(0.01)


def writer(url: str, key: str, out: Path, stop: Path, number: int) -> None:
    """One writer process: remember one episode at a time until `stop` exists; log `id sent acked` per 201."""
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    n = 0
    with out.open("w") as log:
        while not stop.exists():
            body = {
                "scope": "root.load", "create_scope": True, "idempotency_key": f"w{number}-{n}",
                "content": f"writer {number} note {n}: {c.synthetic(10_000_000 + 1000 * number + n)[3]}",
            }  # fmt: skip
            sent = time.time()
            try:
                answer = client.post("/v1/remember", json=body)
            except httpx.HTTPError:
                time.sleep(0.05)
                continue
            if answer.status_code == 201:
                log.write(f"{answer.json()['episode_id']} {sent:.6f} {time.time():.6f}\n")
                log.flush()
                n += 1
            else:
                time.sleep(0.05)


def start_writers(url: str, key: str, count: int, work: Path) -> tuple[list[subprocess.Popen[bytes]], Path]:
    stop = work / "stop-writers"
    stop.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--writer", url, key]
    procs = [
        subprocess.Popen([*command, str(work / f"writer-{n}.log"), str(stop), str(n)], env=env(work))
        for n in range(count)
    ]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
        (work / f"writer-{n}.log").exists() and (work / f"writer-{n}.log").stat().st_size for n in range(count)
    ):
        time.sleep(0.1)  # each has its first write acknowledged
    return procs, stop


def stop_writers(procs: list[subprocess.Popen[bytes]], stop: Path) -> None:
    stop.touch()
    for proc in procs:
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()


def acknowledged(work: Path) -> list[tuple[str, float, float]]:
    rows = []
    for log in work.glob("writer-*.log"):
        for line in log.read_text().splitlines():
            episode, sent, acked = line.split()
            rows.append((episode, float(sent), float(acked)))
    return rows


def batches_in_flight(url: str, key: str, count: int = 8) -> list[threading.Thread]:
    """`count` remember calls of 100 new episodes each, sent at once (their answers are not awaited)."""

    def send(n: int) -> None:
        items = [{"scope": "root.load", "create_scope": True, "content": c.synthetic(20_000_000 + 100 * n + i)[3]}
                 for i in range(100)]  # fmt: skip
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{url}/v1/remember", json={"items": items}, headers={"Authorization": f"Bearer {key}"},
                       timeout=60)  # fmt: skip

    threads = [threading.Thread(target=send, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


# -- a round -------------------------------------------------------------------------------------
def one_round(base: Path, mode: str, writers: int, work: Path) -> dict[str, Any]:
    home, dest, restored = work / "home", work / "backup", work / "restored"
    shutil.copytree(base, home)
    result: dict[str, Any] = {"mode": mode}
    with serving(home, workers=2) as (proc, url, key):
        procs, stop = start_writers(url, key, writers, work)
        time.sleep(LOAD_SECONDS)
        backup_started = time.time()
        done = mneme(home, "backup", str(dest), "--json")
        backup_ended = time.time()
        if done.returncode != 0:
            raise SystemExit(f"mneme backup failed: {done.stderr}")
        made = json.loads(done.stdout)
        time.sleep(LOAD_SECONDS)
        if mode == "clean":
            batches_in_flight(url, key)
            time.sleep(0.5)
            result["stop_seconds"] = gone_after(proc, signal.SIGTERM)
        else:
            result["stop_seconds"] = gone_after(proc, signal.SIGKILL)
        stop_writers(procs, stop)
    result["left_in_home"] = sorted(p.name for p in home.iterdir() if p.name.endswith(("-wal", "-shm")))
    acks = acknowledged(work)
    before = {episode for episode, _, acked in acks if acked < backup_started}
    during = [acked - sent for _, sent, acked in acks if sent < backup_ended and acked > backup_started]
    outside = [acked - sent for _, sent, acked in acks if acked < backup_started or sent > backup_ended]
    started = time.perf_counter()
    put_back = mneme(restored, "restore", str(dest))
    result["restore_seconds"] = time.perf_counter() - started
    if put_back.returncode != 0:
        raise SystemExit(f"mneme restore failed: {put_back.stderr}")
    with contextlib.closing(sqlite3.connect(f"file:{restored / 'mneme.db'}?mode=ro", uri=True)) as db:
        held = {row[0] for row in db.execute("SELECT episode_id FROM episodes WHERE tenant = ?", (TENANT,))}
    result.update(
        acknowledged=len(acks), before_backup=len(before), found=len(before & held),
        during_backup_kept=len({e for e, _, acked in acks if backup_started <= acked <= backup_ended} & held),
        backup_seconds=backup_ended - backup_started, backup_bytes=made["bytes"],
        copy_seconds=made.get("copy_seconds"), episodes=sum(r.get("episodes", 0) for r in made["rows"].values()),
        latency_outside=stats(outside), latency_during=stats(during), serves=serves(restored, sorted(before)),
    )  # fmt: skip
    return result


def serves(home: Path, acked: list[str]) -> str:
    """'ok', or what the restored home got wrong: health, a sample of acknowledged ids, a recall."""
    with serving(home, workers=1) as (proc, url, key):
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        health = client.get("/v1/health").json()
        if health.get("status") != "ok":
            return f"health {health}"
        sample = acked[:: max(1, len(acked) // 50)]
        missing = [e for e in sample if client.get(f"/v1/episodes/{e}").status_code != 200]
        if missing:
            return f"{len(missing)} of {len(sample)} sampled episodes not served"
        found = client.post("/v1/recall", json={"query": "writer note", "scope": "root.load", "limit": 5}).json()
        if not found.get("results"):
            return "recall found none of the writers' notes"
        gone_after(proc, signal.SIGTERM)
    return "ok"


def stats(latencies: list[float]) -> str:
    if not latencies:
        return "-"
    ms = sorted(1000 * x for x in latencies)
    return f"p50 {c.p50(ms):.0f} / p99 {c.pct(ms, 99):.0f} / max {ms[-1]:.0f} ms ({len(ms)} writes)"


def stop_only(workers: int, writers: int) -> None:
    """SIGTERM to exit under load, on an empty home (works on code from before backups existed)."""
    times = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            with serving(work / "home", workers) as (proc, url, key):
                procs, stop = start_writers(url, key, writers, work)
                time.sleep(LOAD_SECONDS)
                batches_in_flight(url, key)
                time.sleep(0.5)
                times.append(gone_after(proc, signal.SIGTERM))
                stop_writers(procs, stop)
    print(f"SIGTERM to exit under load (--workers {workers}, {writers} writers + 8 batches of 100 in flight): "
          + ", ".join(f"{t:.2f}" for t in times) + f" s; median {c.p50(times):.2f} s")  # fmt: skip


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        url, key, out, stop, number = sys.argv[2:7]
        writer(url, key, Path(out), Path(stop), int(number))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--rounds", default="kill9,clean")
    parser.add_argument("--rebuild", action="store_true", help="build the home again instead of the cached one")
    parser.add_argument("--stop-only", action="store_true", help="only SIGTERM to exit under load")
    parser.add_argument("--workers", type=int, default=2, help="with --stop-only: the server's processes")
    args = parser.parse_args()
    print(c.machine())
    if args.stop_only:
        stop_only(args.workers, args.writers)
        return 0
    base = home_of(args.episodes, args.rebuild)
    print(f"home: {base.relative_to(c.ROOT)} ({sum(p.stat().st_size for p in base.iterdir()) / 1e6:,.0f} MB)")
    failed = False
    for mode in args.rounds.split(","):
        with tempfile.TemporaryDirectory(dir=c.CACHE) as tmp:
            r = one_round(base, mode, args.writers, Path(tmp))
        lost = r["before_backup"] - r["found"]
        failed |= bool(lost) or r["serves"] != "ok"
        print(f"\nround {mode}: {r['episodes']:,} episodes backed up")
        print(f"  writes acknowledged {r['acknowledged']:,}; before the backup started {r['before_backup']:,}; "
              f"found after restore {r['found']:,} (lost {lost}); acknowledged during it and kept "
              f"{r['during_backup_kept']:,}")  # fmt: skip
        print(
            f"  backup {r['backup_seconds']:.1f} s (the store's copy {r['copy_seconds']:.1f} s), "
            f"{r['backup_bytes'] / 1e6:,.0f} MB; restore with its index rebuilt {r['restore_seconds']:.1f} s"
        )
        print(f"  writer latency outside the backup: {r['latency_outside']}")
        print(f"  writer latency during the backup:  {r['latency_during']}")
        what = "SIGTERM to exit (8 batches of 100 in flight)" if mode == "clean" else "SIGKILL to gone"
        print(f"  {what}: {r['stop_seconds']:.2f} s; -wal/-shm left in the home: {r['left_in_home'] or 'none'}")
        print(f"  the restored home serves: {r['serves']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
