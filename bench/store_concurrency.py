"""Thousands of concurrent async operations through `MnemeStore` (LangGraph's store) on `mneme serve`.

Starts `python -m mneme.cli serve --port 0` on a temp MNEME_HOME (bench/load.py's `start_server`), then
runs `--ops` operations at once through one store's async methods (each an `abatch` of one op, as
LangGraph calls them): `aput` of distinct keys over `--namespaces` namespaces, all started together;
then one `abatch` holding as many `PutOp`s (in other namespaces; `--no-batch` leaves it out); then as many
reads at once: `aget` and `asearch` (without a query: a listing), alternately, or `--reads get` (each `aget`
of one item: `--namespaces 1` makes its namespace hold every item put) or `--reads search`. Each phase is
bounded by `--timeout` seconds; it prints the seconds each phase took, how many calls finished and how many
failed, and the CPU seconds the server and this client used in the phase (a client that is the bottleneck
leaves the server idle). Figures only: nothing is asserted.

    .venv/bin/python bench/store_concurrency.py [--ops 6000] [--namespaces 20] [--timeout 300]
        [--reads mixed|get|search] [--no-batch]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import _common as c
from langgraph.store.base import PutOp
from load import cpu_seconds, start_server

from mneme_sdk import AsyncClient, Client
from mneme_sdk.langgraph import MnemeStore


async def phase(name: str, calls: list[Callable[[], Awaitable[Any]]], timeout: float, server: int) -> None:
    cpu, mine, start = cpu_seconds(server), time.process_time(), time.perf_counter()
    tasks = [asyncio.ensure_future(call()) for call in calls]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    seconds = time.perf_counter() - start
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    errors = collections.Counter(type(e).__name__ for t in done if (e := t.exception()) is not None)
    print(
        f"{name:>6}: {len(calls)} call(s) at once: {len(done)} finished in {seconds:.1f} s "
        f"({len(pending)} unfinished, errors {dict(errors) or 0}); CPU: server {cpu_seconds(server) - cpu:.1f} s, "
        f"this client {time.process_time() - mine:.1f} s"
    )


async def run(url: str, key: str, args: argparse.Namespace, server: int) -> None:
    ops, namespaces, timeout = args.ops, args.namespaces, args.timeout
    async with AsyncClient(url, key) as aclient:  # a user's defaults: the 10 s timeout, the default pool
        store = MnemeStore(Client(url, key), aclient, scope="root.bench")
        spaces = [("users", f"u{i}") for i in range(namespaces)]
        await store.aput(spaces[0], "warm-up", {"text": "the first put creates the store's scope"})
        puts = [
            lambda i=i: store.aput(spaces[i % namespaces], f"k{i}", {"text": f"note {i} about topic {i % 97}"})
            for i in range(ops)
        ]
        await phase("aput", puts, timeout, server)
        if not args.no_batch:
            batch = [PutOp(("batch", f"b{i % namespaces}"), f"b{i}", {"text": f"note {i}"}) for i in range(ops)]
            await phase("abatch", [lambda: store.abatch(batch)], timeout, server)
        reads = [
            (lambda i=i: store.aget(spaces[i % namespaces], f"k{i}"))
            if args.reads == "get" or (args.reads == "mixed" and i % 2)
            else (lambda i=i: store.asearch(spaces[i % namespaces], limit=5))
            for i in range(ops)
        ]
        await phase("reads", reads, timeout, server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=6000, help="operations started at once in each phase")
    parser.add_argument("--namespaces", type=int, default=20, help="namespaces the puts spread over")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound on each phase, in seconds")
    parser.add_argument("--workers", default="auto", help="server processes (`mneme serve --workers`)")
    parser.add_argument("--reads", choices=("mixed", "get", "search"), default="mixed", help="the reads phase's calls")
    parser.add_argument("--no-batch", action="store_true", help="leave out the phase of one abatch of puts")
    args = parser.parse_args()
    print(f"{args.ops} concurrent MnemeStore operations on `mneme serve --workers {args.workers}`; {c.machine()}")
    with tempfile.TemporaryDirectory(prefix="mneme-store-") as tmp:
        log: list[str] = []
        proc, url, key = start_server(Path(tmp) / "home", log, args.workers)
        try:
            asyncio.run(run(url, key, args, proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
