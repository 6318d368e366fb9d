"""A mixed load on `mneme serve` over loopback, at 1 client and at N clients in one run.

Starts `python -m mneme.cli serve --port 0` as a subprocess on a temp MNEME_HOME (its admin key,
the real LocalEmbedder), seeds it with synthetic episodes (bench/_common.py) through the API,
then runs the same mix with 1 client and with N concurrent clients, each phase bounded by time
and by operation count: recall 50 % (hybrid, limit 10, under a customer's scope), retrieve 20 %,
remember 20 % (one new episode per call) and changes 10 % (one page of 100 after a random
cursor-less start); `--mix` sets other weights (`--mix remember=1`: writes only). Prints per
phase the throughput and p50/p95 per operation, then the N/1 throughput ratio, and finally checks
that every acknowledged remember is in the change feed with its record (readable). Per phase it
also prints the CPU time the server's processes and this client process used (from /proc: on a
2-core machine the client's share bounds what a second server process can win) and how long the
server's threads were runnable but waiting for a CPU (Linux schedstat: on a shared machine, the CPU
other processes took from the server), and at the end each server process's resident memory.
Figures only (the machine is shared): no asserts, exit 1 only when an acknowledged write is missing.

    .venv/bin/python bench/load.py [--clients 8] [--seconds 20] [--max-ops 3000] [--seed 2000] [--workers auto]
                                   [--mix recall=50,retrieve=20,remember=20,changes=10]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common as c

from mneme_sdk import Client as MnemeClient

MIX = (("recall", 50), ("retrieve", 20), ("remember", 20), ("changes", 10))
TENANT = "default"


def start_server(home: Path, log: list[str], workers: str = "auto") -> tuple[subprocess.Popen[str], str, str]:
    """The server subprocess, its URL and the admin key; its output goes on into `log`."""
    env = {**os.environ, "MNEME_HOME": str(home), "PYTHONPATH": f"{c.ROOT / 'shared'}{os.pathsep}{c.ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", workers],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    url = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if match := re.search(r"serving on (http://\S+)", line):
            url = match.group(1)
        if "API key" in line and url:
            threading.Thread(target=lambda: log.extend(proc.stdout or []), daemon=True).start()
            return proc, url, (home / "admin.key").read_text().strip()
    proc.kill()
    raise SystemExit(f"mneme serve did not start (exit {proc.poll()})")


class Worker(threading.Thread):
    def __init__(
        self, url: str, key: str, wid: int, stop_at: float, quota: int, acked: list[str], seeded: int,
        mix: tuple[tuple[str, int], ...] = MIX,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.mix = mix
        self.client = MnemeClient(url, key, timeout=60.0, max_retries=0)
        self.rng = random.Random(wid)
        self.wid, self.stop_at, self.quota, self.acked, self.seeded = wid, stop_at, quota, acked, seeded
        self.samples: dict[str, list[float]] = {name: [] for name, _ in MIX}
        self.errors: list[str] = []

    def op(self, name: str, n: int) -> None:
        rng = self.rng
        scope, session, occurred, content = c.synthetic(rng.randrange(10**6))
        customer = scope.rsplit(".", 1)[0]
        if name == "recall":
            words = [w.strip(".,:;()") for w in content.split() if len(w) > 3]
            query = " ".join(rng.sample(words, min(3, len(words)))) or content
            self.client.recall(query, scope=customer, limit=10)
        elif name == "retrieve":
            self.client.retrieve_json(c.synthetic(rng.randrange(self.seeded))[0])  # a scope that exists
        elif name == "remember":
            done = self.client.remember(
                scope, f"{content} (load {self.wid}-{n})", occurred_at=occurred, session_id=session, create_scope=True
            )
            self.acked.append(done.episode_id)
        else:
            self.client.changes(limit=100)

    def run(self) -> None:
        names = [name for name, weight in self.mix for _ in range(weight)]
        n = 0
        while time.monotonic() < self.stop_at and n < self.quota:
            name = self.rng.choice(names)
            start = time.perf_counter()
            try:
                self.op(name, n)
                self.samples[name].append((time.perf_counter() - start) * 1000)
            except Exception as e:  # counted and reported; the load goes on
                self.errors.append(f"{name}: {type(e).__name__}: {e} {getattr(e, 'details', '') or ''}"[:400])
            n += 1


def phase(
    url: str, key: str, clients: int, seconds: float, max_ops: int, acked: list[str], seeded: int, server: int = 0,
    mix: tuple[tuple[str, int], ...] = MIX,
) -> dict[str, object]:  # fmt: skip
    stop_at = time.monotonic() + seconds
    workers = [
        Worker(url, key, 1000 * clients + i, stop_at, max_ops // clients, acked, seeded, mix) for i in range(clients)
    ]
    server_cpu, client_cpu, server_wait = cpu_seconds(server), time.process_time(), cpu_wait(server)
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    server_cpu, client_cpu = cpu_seconds(server) - server_cpu, time.process_time() - client_cpu
    server_wait = cpu_wait(server) - server_wait
    merged = {name: [s for w in workers for s in w.samples[name]] for name, _ in MIX}
    done = sum(len(v) for v in merged.values())
    return {"clients": clients, "wall": wall, "ops": done, "rate": done / wall, "samples": merged,
            "errors": [e for w in workers for e in w.errors], "server_cpu": server_cpu,
            "client_cpu": client_cpu, "server_wait": server_wait}  # fmt: skip


def processes(pid: int) -> list[int]:
    """The server and the worker processes it started (Linux /proc); [] where there is no /proc."""
    try:
        return [pid, *(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    except OSError:
        return []


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the server's processes have used so far; nan where it cannot be read."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in processes(pid) if pid else []:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total if pid and processes(pid) else float("nan")


def cpu_wait(pid: int) -> float:
    """Seconds the server's threads (of every process) have spent runnable but waiting for a CPU (Linux
    /proc/<pid>/task/<tid>/schedstat, second field); nan where it cannot be read. Threads that ended
    since the last reading are not counted."""
    total = 0.0
    for p in processes(pid) if pid else []:
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return float("nan")
    return total if pid and processes(pid) else float("nan")


def report(result: dict[str, object]) -> None:
    samples: dict[str, list[float]] = result["samples"]  # type: ignore[assignment]
    errors: list[str] = result["errors"]  # type: ignore[assignment]
    print(f"\n{result['clients']} client(s): {result['ops']} ops in {result['wall']:.1f} s = "
          f"{result['rate']:.1f} ops/s, {len(errors)} errors")  # fmt: skip
    rows = [[name, len(s), f"{c.p50(s):.1f}" if s else "-", f"{c.pct(s, 95):.1f}" if s else "-"]
            for name, s in samples.items()]  # fmt: skip
    print(c.table(["operation", "count", "p50 ms", "p95 ms"], rows))
    ops = max(int(result["ops"]), 1)  # type: ignore[call-overload]
    server_cpu, client_cpu = float(result["server_cpu"]), float(result["client_cpu"])  # type: ignore[arg-type]
    server_wait = float(result["server_wait"])  # type: ignore[arg-type]
    print(f"CPU: server {server_cpu:.1f} s ({1000 * server_cpu / ops:.1f} ms per op; its threads waited "
          f"{server_wait:.1f} s for a CPU), this client "
          f"{client_cpu:.1f} s ({1000 * client_cpu / ops:.1f} ms per op), on {os.cpu_count()} cores "
          f"in {result['wall']:.1f} s")  # fmt: skip
    for error in sorted(set(errors))[:5]:
        print(f"  error: {error}")


def parse_mix(text: str) -> tuple[tuple[str, int], ...]:
    """`recall=50,remember=20`: operations of MIX with whole, positive weights."""
    mix = []
    for part in text.split(","):
        name, _, weight = part.strip().partition("=")
        if name not in dict(MIX) or not weight.isdecimal() or int(weight) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: use name=weight with a name of {', '.join(dict(MIX))}")
        mix.append((name, int(weight)))
    return tuple(mix)


def seed(client: MnemeClient, count: int) -> None:
    for start in range(0, count, 100):
        items = [
            {"scope": s, "content": t, "occurred_at": o.isoformat(), "session_id": sid, "create_scope": True}
            for s, sid, o, t in (c.synthetic(i) for i in range(start, min(start + 100, count)))
        ]
        client.remember_batch(items)


def memory(pid: int) -> str:
    """The resident memory of the server and of each worker process it started (Linux /proc)."""

    def rss(p: int) -> int:
        status = Path(f"/proc/{p}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) // 1024  # type: ignore[union-attr]

    try:
        sizes = [rss(p) for p in processes(pid)]
    except (OSError, AttributeError):
        return "unknown (no /proc here)"
    if not sizes:
        return "unknown (no /proc here)"
    return f"{sum(sizes)} MB in {len(sizes)} process(es): " + ", ".join(f"{s} MB" for s in sizes)


def verify(client: MnemeClient, acked: list[str]) -> int:
    """How many acknowledged episodes are missing from the change feed (or unreadable there)."""
    seen = {ch.id for ch in client.iter_changes(page_size=200) if ch.kind == "episode" and ch.record is not None}
    return len(set(acked) - seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients in the second phase")
    parser.add_argument("--seconds", type=float, default=20.0, help="bound on each phase")
    parser.add_argument("--max-ops", type=int, default=3000, help="bound on each phase's operations")
    parser.add_argument("--seed", type=int, default=2000, help="episodes stored before the load")
    parser.add_argument("--workers", default="auto", help="server processes (`mneme serve --workers`, default auto)")
    parser.add_argument("--mix", type=parse_mix, default=MIX, help="operation weights, e.g. recall=50,remember=20")
    args = parser.parse_args()
    mix: tuple[tuple[str, int], ...] = args.mix
    print(f"mixed load on `mneme serve --workers {args.workers}` (loopback, subprocess); {c.machine()}")
    total = sum(weight for _, weight in mix)
    print("mix: " + ", ".join(f"{name} {100 * weight / total:.0f}%" for name, weight in mix))
    with tempfile.TemporaryDirectory(prefix="mneme-load-") as tmp:
        log: list[str] = []
        proc, url, key = start_server(Path(tmp) / "home", log, args.workers)
        try:
            client = MnemeClient(url, key, timeout=120.0)
            start = time.perf_counter()
            seed(client, args.seed)
            print(f"server {url} (pid {proc.pid}); seeded {args.seed} episodes in {time.perf_counter() - start:.1f} s")
            acked: list[str] = []
            phase(url, key, 1, min(3.0, args.seconds), 50, [], args.seed, 0, mix)  # warm-up: caches, model, connections
            one = phase(url, key, 1, args.seconds, args.max_ops, acked, args.seed, proc.pid, mix)
            report(one)
            many = phase(url, key, args.clients, args.seconds, args.max_ops, acked, args.seed, proc.pid, mix)
            report(many)
            ratio = many["rate"] / one["rate"]  # type: ignore[operator]
            recalls = many["samples"].get("recall")  # type: ignore[attr-defined]
            p95 = c.pct(recalls, 95) if recalls else float("nan")
            print(f"\nthroughput {args.clients} clients / 1 client: x{ratio:.2f} (goal >= 1.6); "
                  f"recall p95 at {args.clients} clients {p95:.0f} ms (goal <= 150 ms)")  # fmt: skip
            print(f"server memory (RSS): {memory(proc.pid)}")
            missing = verify(client, acked)
            print(f"acknowledged writes: {len(acked)}, missing from the change feed: {missing}")
            problems = [line.rstrip() for line in log if "Error" in line or "Traceback" in line or "error" in line]
            for line in problems[:20]:
                print(f"  server: {line[:300]}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    if missing:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
