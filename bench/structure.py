"""How the code is walked: a profile of real requests, and the sizes a reader meets.

In this process, on the embedded engine with a temporary home, it starts `mneme serve`'s HTTP server
(`mneme.local.server.make_server`, on a loopback port) and makes, with the profiler on (`sys.setprofile` and
`threading.setprofile`, every thread): one recall and one remember through HTTP with the admin key, then one
background consolidation run (`POST /v1/consolidations`; its thread only). A warm-up remember and recall run
first, unprofiled, so imports and model loading are not counted. For each it prints:

- modules entered: product modules (`mneme.*`, `functions.*`) with a function called;
- hops: calls whose nearest product caller is in another module;
- calls back: hops into a module already active further up the same thread's stack (A -> B -> A), with
  the most frequent (caller -> module) pairs;
- calls into adapters: calls from outside `mneme.adapters` into it (the store, the index, the embedder),
  by adapter method.

Then, from the source: each port's methods (`shared/mneme/ports.py`: its own and with the ports it extends),
product modules (`shared/mneme`, `functions`) over 400 and 600 lines, and functions over 60 lines.

    PYTHONPATH=shared:. python bench/structure.py [--top 5] [--modules]

`--modules` also lists each phase's modules, by package.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
PRODUCT = [ROOT / "shared" / "mneme", ROOT / "functions"]
SCOPE = "root.acme.north"
EPISODES = [
    "Acme's VAT scheme is flat rate.",
    "The invoice contact for Pennine Joinery is Sam Patel.",
    "Boiler pressure in the north plant dropped to 1.1 bar on Monday.",
    "Forklift 2 failed its inspection; the next one is due in March.",
]


ADAPTERS = "mneme.adapters."


def product(module: str) -> bool:
    return module == "mneme" or module.startswith(("mneme.", "functions."))


@dataclass
class Walk:
    """What the profiler saw while one phase ran."""

    modules: set[str] = field(default_factory=set)
    hops: int = 0
    back: Counter[tuple[str, str]] = field(default_factory=Counter)
    adapters: Counter[str] = field(default_factory=Counter)  # calls from outside `adapters` into it, by method


class Profiler:
    """Per thread, the stack of the product modules whose functions are active; each call of a product
    function counted against it. `counts(thread_name)` says which threads a phase counts."""

    def __init__(self) -> None:
        self.stacks: dict[int, list[str]] = {}
        self.walk: Walk | None = None
        self.counts: Callable[[str], bool] = lambda name: True

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not product(module):
            return
        stack = self.stacks.setdefault(threading.get_ident(), [])
        if event == "return":
            if stack:
                stack.pop()
            return
        walk = self.walk
        if walk is not None and self.counts(threading.current_thread().name):
            walk.modules.add(module)
            caller = stack[-1] if stack else None
            if caller is not None and caller != module:
                walk.hops += 1
                if module.startswith(ADAPTERS) and not caller.startswith(ADAPTERS):
                    walk.adapters[f"{module.removeprefix(ADAPTERS)}.{frame.f_code.co_name}"] += 1
                if module in stack:
                    walk.back[(caller, module)] += 1
        stack.append(module)

    @contextmanager
    def phase(self, counts: Callable[[str], bool] = lambda name: True) -> Iterator[Walk]:
        self.walk, self.counts = Walk(), counts
        try:
            yield self.walk
        finally:
            self.walk = None


def short(module: str) -> str:
    return module.removeprefix("mneme.")


def report(name: str, walk: Walk, top: int, modules: bool) -> None:
    back = sum(walk.back.values())
    print(f"{name}: {len(walk.modules)} modules entered, {walk.hops} hops between modules, {back} calls back")
    if modules:
        print("  " + ", ".join(short(module) for module in sorted(walk.modules)))
    for (caller, module), count in walk.back.most_common(top):
        print(f"    {count:4d}  {short(caller)} -> {short(module)}")
    calls = ", ".join(f"{name} {count}" for name, count in sorted(walk.adapters.items()))
    print(f"  calls into adapters: {sum(walk.adapters.values())} ({calls})")


def profile(top: int, modules: bool) -> None:
    home = Path(tempfile.mkdtemp(prefix="mneme-structure-"))
    os.environ.update(MNEME_HOME=str(home), MNEME_CONSOLIDATION__SETTLE_SECONDS="0")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    import httpx

    from mneme.cli.server import ensure_first_run
    from mneme.local.server import make_server

    profiler = Profiler()
    threading.setprofile(profiler)  # every thread started from here on: the server's, its workers', the run's
    sys.setprofile(profiler)
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, name="serve", daemon=True).start()
    key_file, _ = ensure_first_run()
    host, port = server.server_address[:2]
    key = key_file.read_text().strip()
    api = httpx.Client(base_url=f"http://{host}:{port}", headers={"Authorization": f"Bearer {key}"})
    try:
        for text in EPISODES:  # the warm-up: imports, the model, the first index writes
            remember = {"scope": SCOPE, "content": text, "create_scope": True}
            api.post("/v1/remember", json=remember, timeout=120).raise_for_status()
        for query in ("boiler pressure", "VAT scheme", "forklift inspection"):  # the pools' connections opened
            api.post("/v1/recall", json={"query": query, "scope": "root"}, timeout=60).raise_for_status()
        with profiler.phase() as recall:
            api.post(
                "/v1/recall", json={"query": "who is the invoice contact", "scope": "root"}, timeout=60
            ).raise_for_status()
        with profiler.phase() as remember_walk:
            body = {"scope": SCOPE, "content": "Pennine Joinery pays invoices within 30 days.", "create_scope": True}
            api.post("/v1/remember", json=body, timeout=60).raise_for_status()
            for thread in threading.enumerate():  # and its embedding thread, if the index write went there
                if thread.name == "remember-embed":
                    thread.join(30)
        with profiler.phase(lambda name: name.startswith("consolidate-")) as run:
            run_id = api.post("/v1/consolidate", json={}, timeout=60).raise_for_status().json()["run_id"]
            deadline = time.monotonic() + 120
            while api.get(f"/v1/consolidations/{run_id}", timeout=60).json()["status"] == "running":
                if time.monotonic() > deadline:
                    raise SystemExit("the consolidation run did not finish in 120 s")
                time.sleep(0.1)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        api.close()
        server.shutdown()
        server.server_close()
    print("## the profile (product modules: mneme.*, functions.*)")
    report("recall (POST /v1/recall)", recall, top, modules)
    report("remember (POST /v1/remember)", remember_walk, top, modules)
    report("background consolidation run (its thread)", run, top, modules)


def ports() -> None:
    tree = ast.parse((ROOT / "shared" / "mneme" / "ports.py").read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def own(node: ast.ClassDef) -> set[str]:
        return {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}

    def every(node: ast.ClassDef) -> set[str]:
        names = own(node)
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                names |= every(classes[base.id])
        return names

    print("## ports (shared/mneme/ports.py): methods, own (with the ports it extends)")
    for name, node in classes.items():
        mine, total = len(own(node)), len(every(node))
        print(f"    {name}: {mine}" + (f" ({total})" if total != mine else ""))


def sizes() -> None:
    files = sorted(p for root in PRODUCT for p in root.rglob("*.py"))
    lines = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in files}
    for limit in (400, 600):
        over = sorted(((n, p) for p, n in lines.items() if n > limit), reverse=True)
        print(f"## product modules over {limit} lines: {len(over)}")
        for n, p in over:
            print(f"    {n:5d}  {p}")
    long: list[tuple[int, str]] = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long.append((length, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    print(f"## functions over 60 lines: {len(long)}")
    for length, where in sorted(long, reverse=True):
        print(f"    {length:5d}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=5, help="calls-back pairs to list per phase")
    parser.add_argument("--modules", action="store_true", help="list each phase's modules")
    args = parser.parse_args()
    profile(args.top, args.modules)
    ports()
    sizes()


if __name__ == "__main__":
    main()
