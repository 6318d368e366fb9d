"""Recall on long conversations, measured the way a user meets it: through the HTTP API.

Every conversation in bench/conversations/set/*.txt is ingested into `mneme serve` (started here as a
subprocess on a temporary data folder, over loopback): one scope per conversation, every turn one
`remember` with `occurred_at` = the session's date and time plus one minute per turn and the speaker
in `metadata.speaker` (`--shape minutes`, the default). Three other shapes are how exported chat logs
arrive, with one time per session: `--shape session-time` remembers every turn alone with its
session's time; `--shape messages` sends each session as one conversation (`messages`, the session's
time for all of them); `--shape log` is `session-time` without session ids (a log that only has
times). Every question then goes to `recall` in its conversation's scope, and the results are scored
against the question's evidence turns:

    R@k      share of the question's evidence turns in the top k (k = 5, 10, 20)
    MRR      1 / rank of the first evidence turn in the top 20 (0 if none)
    nDCG@10  binary relevance, ideal = all evidence turns first

per kind of question (single, multi, temporal, update, open: what a person is like, would like or would
do, answered by the turns where they say what they like, do and value) and overall, plus the client-side latency of
`recall` (p50, p95). A fact is credited only with the turns whose words it shows the agent: a source
turn whose text is the fact's text, or one of the grounding lines its `sources` carry (`text`); a
roll-up likewise. Never with every id in its `sources`.

`--consolidate` recalls every question, runs one `POST /v1/consolidate` over the conversations' scopes
on the same store, waits for it, and recalls again: both tables side by side, the change per kind, the
facts and roll-ups written per 100 turns, and how often one turn takes more than one place among a
recall's results (a fact's grounding line and the turn itself, two roll-ups...). Its latency before and
after comes from the same minutes: every conversation is also ingested into a control scope that is
not consolidated, and each question is asked of the control and of the consolidated scope in turn.
`--same-time` gives every turn of a session the session's time (an imported chat log).

Nothing is cached between runs unless `--reuse` is given: then the ingested
data folder is kept under bench/.cache/, keyed by the set's files and by the code that decides what
is stored and indexed (adapters, models, text, indexing, remember); recall always runs on the code
of this checkout.

Set file format (one conversation per file):

    # conversation <name>
    # speakers: <A>, <B>
    ## 2024-03-02 19:40                       a session (date, optional time)
    <A>: turn text [q3 q17]                   trailing tags = evidence of those questions
    ? q1 single|multi|temporal|update|open | Question text?

Other '#' lines are comments. `--corpus FILE` reads the older corpus format instead (several
'# conversation' blocks in one file, '? qN | question' with no kind: every question is 'single').

    .venv/bin/python bench/conversations.py [--set DIR | --corpus FILE] [--shape SHAPE] [--reuse] [--misses KIND]
        [--consolidate] [--same-time] [--facts FILE]

The conversations in bench/conversations/long/ (long sessions, many turns a day, several sessions a
week) are the check `--consolidate` is reported on without tuning: `--set bench/conversations/long`.
bench/conversations/heldout/ (three conversations written for issue 43, mostly multi-hop and open
questions) was written before recall was tuned for those kinds and is never tuned on:
`--set bench/conversations/heldout`.
MNEME_BENCH_CODE=DIR serves the `shared` folder DIR (and the `functions` beside it) instead of this
checkout's (a before/after of code).
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
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as c
import httpx

SET = c.ROOT / "bench" / "conversations" / "set"
KINDS = ("single", "multi", "temporal", "update", "open")
KS = (5, 10, 20)
LIMIT = 20
TAGS = re.compile(r"\s*\[((?:q\d+[\s,]*)+)\]\s*$")
SESSION = re.compile(r"^##\s*(\d{4}-\d{2}-\d{2})(?:[ T](\d{1,2}:\d{2}))?\s*$")
QUESTION = re.compile(r"^\?\s*(q\d+)\s*(?:(\w+)\s*)?\|\s*(.+?)\s*$")
# what decides the stored and indexed data (a change here re-ingests under --reuse)
INGEST_CODE = ("adapters", "models.py", "language/text.py", "services/indexing.py", "services/remember.py")


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


def parse(path: Path, legacy: bool = False, same_time: bool = False) -> list[Conversation]:
    """The conversations of one file (a set file holds one; the older corpus several). `same_time`:
    every turn of a session at the session's time, as an imported chat log has it."""
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
            _question(conv, line, where, legacy)
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
        at = session_at if same_time else session_at + timedelta(minutes=turn_no)
        turn = Turn(key, speaker.strip(), text, at, f"s{session_no:02d}", qids)
        conv.turns.append(turn)
        turn_no += 1
    for conv in out:
        _link_evidence(conv)
    return out


def _question(conv: Conversation, line: str, where: str, legacy: bool) -> None:
    """A '? qN [kind] text' line: the question asked of the conversation."""
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


def _link_evidence(conv: Conversation) -> None:
    """Each question's evidence turns from the turns' tags; every question asked and evidenced."""
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


# -- the server ----------------------------------------------------------------------------------
class Server:
    """`mneme serve --port 0` on `home`, over loopback; stopped with the process."""

    def __init__(self, home: Path) -> None:
        code = Path(os.environ.get("MNEME_BENCH_CODE") or c.ROOT / "shared")  # its checkout's functions/ too
        env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{code.parent}", "PYTHONUNBUFFERED": "1"}
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
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drained: a full pipe blocks a server
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


SHAPES = ("minutes", "session-time", "messages", "log")


def ingest(api: httpx.Client, conversations: list[Conversation], shape: str = "minutes") -> dict[str, str]:
    """Every turn through `remember` in the given shape (see the module's doc); episode id -> turn key."""
    ids: dict[str, str] = {}
    for conv in conversations:
        sessions: dict[str, list[Turn]] = {}
        for turn in conv.turns:
            sessions.setdefault(turn.session, []).append(turn)
        for session, turns in sessions.items():
            if shape != "minutes":
                ids.update(ingest_log(api, conv, session, turns, shape))
                continue
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


def ingest_log(api: httpx.Client, conv: Conversation, session: str, turns: list[Turn], shape: str) -> dict[str, str]:
    """One session as an exported chat log gives it: every turn at the session's time, in order; alone
    (`session-time`) or as one conversation a hundred messages at a time (`messages`)."""
    at = turns[0].occurred_at.isoformat().replace("+00:00", "Z")
    common = {"scope": conv.scope, "session_id": f"{conv.scope.removeprefix('root.')}-{session}", "create_scope": True}
    ids: dict[str, str] = {}
    calls: list[tuple[list[Turn], dict[str, Any]]]
    if shape in ("session-time", "log"):
        bare = {key: value for key, value in common.items() if key != "session_id" or shape == "session-time"}
        calls = [
            ([t], {**bare, "content": t.text, "occurred_at": at, "metadata": {"speaker": t.speaker}}) for t in turns
        ]
    else:
        calls = [
            (
                turns[start : start + 100],
                {
                    **common,
                    "occurred_at": at,
                    "messages": [{"name": t.speaker, "content": t.text} for t in turns[start : start + 100]],
                },
            )
            for start in range(0, len(turns), 100)
        ]
    for batch, body in calls:
        reply = api.post("/v1/remember", json=body)
        if reply.status_code != 201:
            raise SystemExit(f"remember failed: {reply.status_code} {reply.text[:300]}")
        answer = reply.json()
        episode_ids = answer["episode_ids"] if "episode_ids" in answer else [answer["episode_id"]]
        ids.update(zip(episode_ids, (t.key for t in batch), strict=True))
    return ids


# -- scoring -------------------------------------------------------------------------------------
Shown = list[set[str]]  # per result, in rank order: the turn keys whose words it shows the agent


def score(top: list[str] | Shown, evidence: set[str]) -> dict[str, float]:
    """`top`: per result, the turn key it is (a string) or the turn keys it shows (a set)."""
    shown = [{r} if isinstance(r, str) else r for r in top]
    ranks = [i for i, keys in enumerate(shown, 1) if keys & evidence]
    row = {f"r{k}": len(evidence & set().union(*shown[:k])) / len(evidence) for k in KS}
    row["mrr"] = 1 / ranks[0] if ranks else 0.0
    dcg = sum(1 / math.log2(r + 1) for r in ranks if r <= 10)
    ideal = sum(1 / math.log2(r + 1) for r in range(1, min(len(evidence), 10) + 1))
    row["ndcg10"] = dcg / ideal
    return row


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


def shown_turns(result: dict[str, Any], ids: dict[str, str], turns: dict[str, Turn]) -> set[str]:
    """The turns a result shows the agent: an episode, itself; a fact or roll-up, the source turns whose
    text it carries (its own text, or a grounding line in `sources[].text`), whatever else it cites."""
    if result["kind"] != "fact":
        return {ids.get(result["id"], result["id"])}
    shown_text = _plain(" ".join([result["content"], *(s.get("text") or "" for s in result.get("sources") or [])]))
    keys = (ids.get(s["id"]) for s in result.get("sources") or [])
    return {k for k in keys if k is not None and _plain(turns[k].text) in shown_text}


def ask(
    api: httpx.Client, conversations: list[Conversation], ids: dict[str, str], turns: dict[str, Turn] | None = None
) -> list[dict[str, Any]]:
    turns = turns if turns is not None else {t.key: t for conv in conversations for t in conv.turns}
    rows = []
    for conv in conversations:
        for q in conv.questions.values():
            start = time.perf_counter()
            reply = api.post("/v1/recall", json={"query": q.text, "scope": conv.scope, "limit": LIMIT})
            elapsed = time.perf_counter() - start
            if reply.status_code != 200:
                raise SystemExit(f"recall failed: {reply.status_code} {reply.text[:300]}")
            results = reply.json()["results"]
            shown = [shown_turns(r, ids, turns) for r in results]
            top = [ids.get(r["id"], r["id"]) for r in results]
            seen = [key for keys in shown for key in keys]
            repeated = len(seen) - len(set(seen))
            rows.append(
                {"conv": conv.name, "q": q, "top": top, "ms": elapsed * 1000, "repeated": repeated,
                 "facts": sum(1 for r in results if r["kind"] == "fact"), **score(shown, q.evidence)}
            )  # fmt: skip
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


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]], control: list[dict[str, Any]]) -> str:
    """Per kind and overall: each metric before -> after, and whether R@10 and R@20 held; the latency of
    the control scopes (unconsolidated) -> the consolidated ones, asked in turn."""
    lines = []
    for kind in [*KINDS, "overall"]:
        b = [r for r in before if kind == "overall" or r["q"].kind == kind]
        a = [r for r in after if kind == "overall" or r["q"].kind == kind]
        if not b:
            continue
        cells = []
        for m in ("r5", "r10", "r20", "mrr"):
            x, y = statistics.fmean(r[m] for r in b), statistics.fmean(r[m] for r in a)
            mark = " (worse)" if m in ("r10", "r20") and y < x - 1e-9 else ""
            cells.append(f"{m.upper().replace('R', 'R@') if m != 'mrr' else 'MRR'} {x:.3f} -> {y:.3f}{mark}")
        lines.append(f"  {kind:<8} " + "  ".join(cells))
    ms_b, ms_a = [r["ms"] for r in control], [r["ms"] for r in after]
    lines.append(
        f"  recall latency (client, ms), unconsolidated control -> consolidated, asked in turn: "
        f"p50 {percentile(ms_b, 50):.1f} -> {percentile(ms_a, 50):.1f}  "
        f"p95 {percentile(ms_b, 95):.1f} -> {percentile(ms_a, 95):.1f}"
    )
    for name, rows in (("before", before), ("after", after)):
        repeats = sum(1 for r in rows if r["repeated"])
        lines.append(
            f"  {name}: recalls showing one turn in more than one place {repeats}/{len(rows)} "
            f"({repeats / len(rows):.1%}); results that are facts or roll-ups {sum(r['facts'] for r in rows)}"
        )
    return "\n".join(lines)


def control(conv: Conversation) -> Conversation:
    """A copy of `conv` under a scope of its own (turn keys prefixed `control/`), left unconsolidated."""
    turns = [Turn(f"control/{t.key}", t.speaker, t.text, t.occurred_at, t.session, t.questions) for t in conv.turns]
    questions = {
        q.qid: Question(q.qid, q.kind, q.text, {f"control/{k}" for k in q.evidence}) for q in conv.questions.values()
    }
    return Conversation(f"control {conv.name}", conv.source, conv.speakers, turns, questions)


def alternated(
    api: httpx.Client, pairs: list[tuple[Conversation, Conversation]], ids: dict[str, str], turns: dict[str, Turn]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows of the consolidated scopes, rows of their controls), each question asked of both in turn."""
    mine: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    n = 0
    for conv, ctl in pairs:
        for qid in conv.questions:
            both = [
                (Conversation(conv.name, conv.source, conv.speakers, conv.turns, {qid: conv.questions[qid]}), mine),
                (Conversation(ctl.name, ctl.source, ctl.speakers, ctl.turns, {qid: ctl.questions[qid]}), theirs),
            ]
            for one, rows in both if n % 2 else both[::-1]:
                rows.extend(ask(api, [one], ids, turns))
            n += 1
    return mine, theirs


def consolidate(api: httpx.Client, scopes: list[str], timeout: float = 1800) -> dict[str, Any]:
    """One `POST /v1/consolidate` over `scopes`, waited for: the finished run record."""
    time.sleep(2.5)  # past the settle window, so the run reads every turn
    reply = api.post("/v1/consolidate", json={"scopes": scopes})
    if reply.status_code != 202:
        raise SystemExit(f"consolidate failed: {reply.status_code} {reply.text[:300]}")
    run_id = reply.json()["run_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.get(f"/v1/consolidations/{run_id}").json()
        if run.get("status") != "running":
            return dict(run)
        time.sleep(1)
    raise SystemExit(f"run {run_id} still running after {timeout:.0f} s")


def written(home: Path) -> list[dict[str, Any]]:
    """Every fact and roll-up in the store (extracted facts are tier raw, roll-ups daily, weekly, ...)."""
    import sqlite3

    with sqlite3.connect(home / "mneme.db") as db:
        return sorted((json.loads(doc) for (doc,) in db.execute("SELECT doc FROM facts")), key=lambda f: f["fact_id"])


def show_written(facts: list[dict[str, Any]], run: dict[str, Any], turns: int) -> None:
    """What one run wrote, for a reader: reasoner calls and tokens per 100 episodes, facts and roll-ups per 100
    turns, a sample of 30 facts (every n-th by id) and three roll-ups (the longest daily, a weekly, another)."""
    read = max(run["stages"].get("collect", {}).get("counters", {}).get("episodes_read", 0), 1)
    extract = run["stages"].get("extract", {}).get("counters", {})
    tokens = extract.get("input_tokens", 0) + extract.get("output_tokens", 0)
    calls, windows = extract.get("reasoner_calls", 0), run["stages"].get("cluster", {}).get("counters", {})
    print(f"  reasoner: {calls} calls for {read} episodes ({calls / read * 100:.1f} per 100), {tokens} tokens "
          f"({tokens / read * 100:.0f} per 100); cluster {windows}")  # fmt: skip
    claims = [f for f in facts if f.get("tier", "raw") == "raw"]
    rollups = [f for f in facts if f.get("tier", "raw") != "raw"]
    print(f"  written: {len(claims)} facts, {len(rollups)} roll-ups; per 100 turns {len(claims) / turns * 100:.1f} "
          f"facts, {len(rollups) / turns * 100:.1f} roll-ups")  # fmt: skip
    step = max(1, len(claims) // 30)
    print(f"  a sample of facts (every {step}-th by id):")
    for fact in claims[::step][:30]:
        print(f"    - {fact['summary']}  [{fact.get('status')}{', stale' if fact.get('stale') else ''}]")
    dailies = sorted((f for f in rollups if f["tier"] == "daily"), key=lambda f: -len(f["summary"]))
    weeklies = [f for f in rollups if f["tier"] == "weekly"]
    for fact in [*dailies[:1], *weeklies[:1], *dailies[len(dailies) // 2 : len(dailies) // 2 + 1]]:
        print(f"  roll-up ({fact['tier']}, from {fact['valid_from'][:10]}, {len(fact['source_episode_ids'])} turns):")
        print("    " + fact["summary"].replace("\n", "\n    "))


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
    parser.add_argument("--shape", choices=SHAPES, default="minutes", help="how the turns are remembered")
    parser.add_argument("--consolidate", action="store_true", help="recall, consolidate once, recall again")
    parser.add_argument("--same-time", action="store_true", help="every turn of a session at the session's time")
    parser.add_argument("--facts", type=Path, help="with --consolidate: write every fact the run wrote here (JSON)")
    args = parser.parse_args()
    files = [args.corpus] if args.corpus else sorted(args.set.glob("*.txt"))
    if not files:
        raise SystemExit(f"no conversations in {args.set} (try --corpus bench/conversations/corpus.txt)")
    conversations = [conv for f in files for conv in parse(f, legacy=bool(args.corpus), same_time=args.same_time)]
    turns = {t.key: t for conv in conversations for t in conv.turns}
    questions = sum(len(conv.questions) for conv in conversations)
    sessions = sum(len({t.session for t in conv.turns}) for conv in conversations)
    print(f"conversations: {len(conversations)} ({', '.join(f.name for f in files)})")
    print(f"{sessions} sessions, {len(turns)} turns, {questions} questions; recall limit {LIMIT}, default scoring")
    print(f"ingest shape: {args.shape}")

    if args.consolidate and args.reuse:
        raise SystemExit("--consolidate changes the store: it cannot be --reuse'd")
    shaped = "" if args.shape == "minutes" else f"-{args.shape}"
    label = f"conversations-{fingerprint(files)}{shaped}{'-same-time' if args.same_time else ''}"
    cached = c.CACHE / label if args.reuse else None
    home = cached if cached is not None else Path(tempfile.mkdtemp(prefix="mneme-conv-"))
    fresh = not (home / "ids.json").exists()
    if fresh and cached is not None:
        shutil.rmtree(cached, ignore_errors=True)
        cached.mkdir(parents=True)
    server = Server(home)
    try:
        api = server.client("bench-conversations")
        controls = [control(conv) for conv in conversations] if args.consolidate else []
        turns.update({t.key: t for conv in controls for t in conv.turns})
        if fresh:
            start = time.perf_counter()
            ids = ingest(api, [*conversations, *controls], args.shape)
            print(f"ingested {len(ids)} turns over HTTP in {time.perf_counter() - start:.1f} s")
            (home / "ids.json").write_text(json.dumps(ids))
        else:
            ids = json.loads((home / "ids.json").read_text())
            print(f"reusing {len(ids)} ingested turns in {home.relative_to(c.ROOT)}")
        api.post("/v1/recall", json={"query": "warm up", "scope": conversations[0].scope})
        rows = ask(api, conversations, ids, turns)
        precision = pack_precision(api, conversations, ids)
        if args.consolidate:
            started = time.perf_counter()
            run = consolidate(api, [conv.scope for conv in conversations])
            took = time.perf_counter() - started
            api.post("/v1/recall", json={"query": "warm up", "scope": conversations[0].scope})
            after, unconsolidated = alternated(api, list(zip(conversations, controls, strict=True)), ids, turns)
            facts = written(home)
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
    if args.consolidate:
        errors = sum(len(stage.get("errors", [])) for stage in run["stages"].values())
        print(f"\none run: {run['status']} in {took:.1f} s; errors {errors}")
        print(f"after consolidation:\n{report(after)}\n")
        print(compare(rows, after, unconsolidated))
        show_written(facts, run, sum(len(conv.turns) for conv in conversations))
        for b, a in zip(rows, after, strict=True):
            if a["r10"] < b["r10"] or a["r20"] < b["r20"]:
                print(f"  worse: {b['conv']} {b['q'].qid} [{b['q'].kind}] {b['q'].text!r} R@10 {b['r10']:.2f} -> "
                      f"{a['r10']:.2f}; top 10 after: {' '.join(a['top'][:10])}")  # fmt: skip
        rows = after
        if args.facts:
            args.facts.write_text(json.dumps(facts, indent=1, default=str))
    if args.misses:
        show_misses(rows, args.misses, turns)
    if args.json:
        args.json.write_text(
            json.dumps([{**r, "q": {"id": r["q"].qid, "kind": r["q"].kind, "text": r["q"].text}} for r in rows])
        )


if __name__ == "__main__":
    main()
