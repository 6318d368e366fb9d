"""Recall on long conversations, measured the way a user meets it: through the HTTP API.

Every conversation in bench/conversations/set/*.txt is ingested into `mneme serve` (started here as a
subprocess on a temporary data folder, over loopback): one scope per conversation, every turn one
`remember` with `occurred_at` = the session's date and time plus one minute per turn and the speaker
in `metadata.speaker`. Every question then goes to `recall` in its conversation's scope, and the
results are scored against the question's evidence turns:

    R@k      share of the question's evidence turns in the top k (k = 5, 10, 20)
    MRR      1 / rank of the first evidence turn in the top 20 (0 if none)
    nDCG@10  binary relevance, ideal = all evidence turns first

per kind of question (single, multi, temporal, update) and overall, plus the client-side latency of
`recall` (p50, p95). Nothing is cached between runs unless `--reuse` is given: then the ingested
data folder is kept under bench/.cache/, keyed by the set's files and by the code that decides what
is stored and indexed (adapters, models, text, indexing, remember); recall always runs on the code
of this checkout.

Set file format (one conversation per file):

    # conversation <name>
    # speakers: <A>, <B>
    ## 2024-03-02 19:40                       a session (date, optional time)
    <A>: turn text [q3 q17]                   trailing tags = evidence of those questions
    ? q1 single|multi|temporal|update | Question text?

Other '#' lines are comments. `--corpus FILE` reads the older corpus format instead (several
'# conversation' blocks in one file, '? qN | question' with no kind: every question is 'single').

    .venv/bin/python bench/conversations.py [--set DIR | --corpus FILE] [--reuse] [--misses KIND]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as c
import httpx

SET = c.ROOT / "bench" / "conversations" / "set"
KINDS = ("single", "multi", "temporal", "update")
KS = (5, 10, 20)
LIMIT = 20
TAGS = re.compile(r"\s*\[((?:q\d+[\s,]*)+)\]\s*$")
SESSION = re.compile(r"^##\s*(\d{4}-\d{2}-\d{2})(?:[ T](\d{1,2}:\d{2}))?\s*$")
QUESTION = re.compile(r"^\?\s*(q\d+)\s*(?:(\w+)\s*)?\|\s*(.+?)\s*$")
# what decides the stored and indexed data (a change here re-ingests under --reuse)
INGEST_CODE = ("adapters", "models.py", "text.py", "services/indexing.py", "services/remember.py")


@dataclass
class Turn:
    key: str  # <conversation>/<session>/<turn>
    speaker: str
    text: str
    occurred_at: datetime
    session: str
    questions: list[str]


@dataclass
class Question:
    qid: str
    kind: str
    text: str
    evidence: set[str] = field(default_factory=set)  # turn keys


@dataclass
class Conversation:
    name: str
    source: str
    speakers: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    questions: dict[str, Question] = field(default_factory=dict)

    @property
    def scope(self) -> str:
        return "root.conv-" + re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


def parse(path: Path, legacy: bool = False) -> list[Conversation]:
    """The conversations of one file (a set file holds one; the older corpus several)."""
    out: list[Conversation] = []
    conv: Conversation | None = None
    session_at: datetime | None = None
    session_no, turn_no = 0, 0
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        where = f"{path.name}:{n}"
        if line.startswith("# conversation"):
            conv = Conversation(line.removeprefix("# conversation").strip(), path.name)
            out.append(conv)
            session_at, session_no = None, 0
            continue
        if line.startswith("# speakers:"):
            if conv is not None:
                conv.speakers = [s.strip() for s in line.removeprefix("# speakers:").split(",") if s.strip()]
            continue
        if line.startswith("##"):
            m = SESSION.match(line)
            if not m:
                raise SystemExit(f"{where}: bad session line {line!r}")
            session_at = datetime.fromisoformat(f"{m[1]}T{m[2] or '12:00'}").replace(tzinfo=UTC)
            session_no, turn_no = session_no + 1, 0
            continue
        if line.startswith("#"):
            continue
        if conv is None:
            raise SystemExit(f"{where}: text before '# conversation'")
        if line.startswith("?"):
            m = QUESTION.match(line)
            if not m:
                raise SystemExit(f"{where}: bad question line {line!r}")
            qid, kind, text = m[1], (m[2] or "single").lower(), m[3]
            if legacy:
                kind = "single"
            if kind not in KINDS:
                raise SystemExit(f"{where}: unknown kind {kind!r}")
            q = conv.questions.setdefault(qid, Question(qid, kind, text))
            q.kind, q.text = kind, text
            continue
        if session_at is None:
            raise SystemExit(f"{where}: a turn before the first session")
        speaker, sep, text = line.partition(":")
        if not sep or not text.strip():
            raise SystemExit(f"{where}: a turn is 'Speaker: text', got {line!r}")
        tags = TAGS.search(text)
        qids = re.findall(r"q\d+", tags[1]) if tags else []
        text = TAGS.sub("", text).strip()
        key = f"{conv.name}/s{session_no:02d}/t{turn_no:03d}"
        turn = Turn(key, speaker.strip(), text, session_at + timedelta(minutes=turn_no), f"s{session_no:02d}", qids)
        conv.turns.append(turn)
        turn_no += 1
    for conv in out:
        for turn in conv.turns:
            for qid in turn.questions:
                conv.questions.setdefault(qid, Question(qid, "?", "")).evidence.add(turn.key)
        for q in conv.questions.values():
            if not q.text:
                raise SystemExit(f"{conv.source}: {q.qid} is tagged on a turn but never asked")
            if not q.evidence:
                raise SystemExit(f"{conv.source}: {q.qid} has no evidence turn")
        if not conv.speakers:
            conv.speakers = list(dict.fromkeys(t.speaker for t in conv.turns))
    return out


# -- the server ----------------------------------------------------------------------------------
class Server:
    """`mneme serve --port 0` on `home`, over loopback; stopped with the process."""

    def __init__(self, home: Path) -> None:
        env = {**os.environ, "PYTHONPATH": f"{c.ROOT / 'shared'}{os.pathsep}{c.ROOT}", "PYTHONUNBUFFERED": "1"}
        env.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
        self.proc = subprocess.Popen(
            # one process (--workers 1): figures comparable from run to run
            [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--home", str(home), "--workers", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 120
        self.url = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"serving on (http://\S+)", line)
            if m:
                self.url = m[1]
                break
        if not self.url:
            self.stop()
            raise SystemExit("mneme serve did not start")
        admin = (home / "admin.key").read_text().strip()
        self.admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {admin}"}, timeout=120)

    def client(self, principal: str) -> httpx.Client:
        """A writer key for `principal`, made the way the README does (POST /v1/keys as admin)."""
        reply = self.admin.post("/v1/keys", json={"principal": principal, "roles": ["writer"]})
        reply.raise_for_status()
        key = reply.json()["api_key"]
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def ingest(api: httpx.Client, conversations: list[Conversation]) -> dict[str, str]:
    """Every turn through `remember` (a session's turns as one batch, ≤ 100 items); episode id -> turn key."""
    ids: dict[str, str] = {}
    for conv in conversations:
        sessions: dict[str, list[Turn]] = {}
        for turn in conv.turns:
            sessions.setdefault(turn.session, []).append(turn)
        for session, turns in sessions.items():
            for start in range(0, len(turns), 100):
                batch = turns[start : start + 100]
                items = [
                    {
                        "scope": conv.scope,
                        "content": t.text,
                        "occurred_at": t.occurred_at.isoformat().replace("+00:00", "Z"),
                        "session_id": f"{conv.scope.removeprefix('root.')}-{session}",
                        "metadata": {"speaker": t.speaker},
                        "idempotency_key": t.key,
                        "create_scope": True,
                    }
                    for t in batch
                ]
                reply = api.post("/v1/remember", json={"items": items})
                if reply.status_code != 201:
                    raise SystemExit(f"remember failed: {reply.status_code} {reply.text[:300]}")
                ids.update(zip(reply.json()["episode_ids"], (t.key for t in batch), strict=True))
    return ids


# -- scoring -------------------------------------------------------------------------------------
def score(top: list[str], evidence: set[str]) -> dict[str, float]:
    ranks = [i for i, key in enumerate(top, 1) if key in evidence]
    row = {f"r{k}": len(evidence & set(top[:k])) / len(evidence) for k in KS}
    row["mrr"] = 1 / ranks[0] if ranks else 0.0
    dcg = sum(1 / math.log2(r + 1) for r in ranks if r <= 10)
    ideal = sum(1 / math.log2(r + 1) for r in range(1, min(len(evidence), 10) + 1))
    row["ndcg10"] = dcg / ideal
    return row


def ask(api: httpx.Client, conversations: list[Conversation], ids: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for conv in conversations:
        for q in conv.questions.values():
            start = time.perf_counter()
            reply = api.post("/v1/recall", json={"query": q.text, "scope": conv.scope, "limit": LIMIT})
            elapsed = time.perf_counter() - start
            if reply.status_code != 200:
                raise SystemExit(f"recall failed: {reply.status_code} {reply.text[:300]}")
            top = [ids.get(r["id"], r["id"]) for r in reply.json()["results"]]
            rows.append({"conv": conv.name, "q": q, "top": top, "ms": elapsed * 1000, **score(top, q.evidence)})
    return rows


PACK_LIMIT = 10
PACK_ITEM = re.compile(r"^(?:### (\S+) \[|- (\S+) \[)", re.MULTILINE)


def pack_precision(api: httpx.Client, conversations: list[Conversation], ids: dict[str, str]) -> dict[str, float]:
    """The share of the context pack's items (bodies and cards, at `limit` 10) that are evidence for the
    question, averaged over questions (a pack with no item counts 0), and the mean number of items."""
    shares, sizes = [], []
    for conv in conversations:
        for q in conv.questions.values():
            reply = api.post("/v1/recall", json={"query": q.text, "scope": conv.scope, "limit": PACK_LIMIT})
            if reply.status_code != 200:
                raise SystemExit(f"recall failed: {reply.status_code} {reply.text[:300]}")
            items = [ids.get(a or b, a or b) for a, b in PACK_ITEM.findall(reply.json()["context"])]
            shares.append(sum(key in q.evidence for key in items) / len(items) if items else 0.0)
            sizes.append(len(items))
    return {"precision": statistics.fmean(shares), "items": statistics.fmean(sizes)}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def report(rows: list[dict[str, Any]]) -> str:
    groups = [(kind, [r for r in rows if r["q"].kind == kind]) for kind in KINDS]
    groups = [(k, g) for k, g in groups if g] + [("overall", rows)]
    body = [
        [name, len(g), *(f"{statistics.fmean(r[m] for r in g):.3f}" for m in ("r5", "r10", "r20", "mrr", "ndcg10"))]
        for name, g in groups
    ]
    ms = [r["ms"] for r in rows]
    text = c.table(["kind", "n", "R@5", "R@10", "R@20", "MRR", "nDCG@10"], body)
    return text + f"\nrecall latency (client, ms): p50 {percentile(ms, 50):.1f}  p95 {percentile(ms, 95):.1f}"


def show_misses(rows: list[dict[str, Any]], kind: str, turns: dict[str, Turn]) -> None:
    print(f"\nmisses at top 10 ({kind}):")
    for r in rows:
        q = r["q"]
        if (kind != "all" and q.kind != kind) or r["r10"] >= 1:
            continue
        print(f"- {r['conv']} {q.qid} [{q.kind}] {q.text!r}  R@10 {r['r10']:.2f}")
        for key in sorted(q.evidence):
            rank = r["top"].index(key) + 1 if key in r["top"] else "-"
            t = turns[key]
            print(f"    want (rank {rank}) {key} {t.occurred_at:%Y-%m-%d} {t.speaker}: {t.text[:90]!r}")
        for key in r["top"][:3]:
            t2 = turns.get(key)
            print(f"    got {key}: {(t2.speaker + ': ' + t2.text[:90]) if t2 else '?'}")


def fingerprint(files: list[Path]) -> str:
    digest = hashlib.sha256()
    code = c.ROOT / "shared" / "mneme"
    paths = sorted(files) + sorted(
        p for part in INGEST_CODE for p in ([code / part] if part.endswith(".py") else (code / part).rglob("*.py"))
    )
    for p in paths:
        digest.update(p.name.encode() + p.read_bytes())
    return digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=SET, help="folder of set files (*.txt)")
    parser.add_argument("--corpus", type=Path, help="the older corpus format (kinds all 'single')")
    parser.add_argument("--reuse", action="store_true", help="keep and reuse the ingested data (bench/.cache)")
    parser.add_argument("--misses", metavar="KIND", help="print the questions below R@10 1 of a kind (or 'all')")
    parser.add_argument("--json", type=Path, help="write the per-question rows here")
    args = parser.parse_args()
    files = [args.corpus] if args.corpus else sorted(args.set.glob("*.txt"))
    if not files:
        raise SystemExit(f"no conversations in {args.set} (try --corpus bench/conversations/corpus.txt)")
    conversations = [conv for f in files for conv in parse(f, legacy=bool(args.corpus))]
    turns = {t.key: t for conv in conversations for t in conv.turns}
    questions = sum(len(conv.questions) for conv in conversations)
    sessions = sum(len({t.session for t in conv.turns}) for conv in conversations)
    print(f"conversations: {len(conversations)} ({', '.join(f.name for f in files)})")
    print(f"{sessions} sessions, {len(turns)} turns, {questions} questions; recall limit {LIMIT}, default scoring")

    cached = c.CACHE / f"conversations-{fingerprint(files)}" if args.reuse else None
    home = cached if cached is not None else Path(tempfile.mkdtemp(prefix="mneme-conv-"))
    fresh = not (home / "ids.json").exists()
    if fresh and cached is not None:
        shutil.rmtree(cached, ignore_errors=True)
        cached.mkdir(parents=True)
    server = Server(home)
    try:
        api = server.client("bench-conversations")
        if fresh:
            start = time.perf_counter()
            ids = ingest(api, conversations)
            print(f"ingested {len(ids)} turns over HTTP in {time.perf_counter() - start:.1f} s")
            (home / "ids.json").write_text(json.dumps(ids))
        else:
            ids = json.loads((home / "ids.json").read_text())
            print(f"reusing {len(ids)} ingested turns in {home.relative_to(c.ROOT)}")
        api.post("/v1/recall", json={"query": "warm up", "scope": conversations[0].scope})
        rows = ask(api, conversations, ids)
        precision = pack_precision(api, conversations, ids)
    finally:
        server.stop()
        if cached is None:
            shutil.rmtree(home, ignore_errors=True)
    print()
    print(report(rows))
    print(
        f"pack precision at limit {PACK_LIMIT}: {precision['precision']:.3f} of items are evidence "
        f"({precision['items']:.1f} items a pack)"
    )
    if args.misses:
        show_misses(rows, args.misses, turns)
    if args.json:
        args.json.write_text(
            json.dumps([{**r, "q": {"id": r["q"].qid, "kind": r["q"].kind, "text": r["q"].text}} for r in rows])
        )


if __name__ == "__main__":
    main()
