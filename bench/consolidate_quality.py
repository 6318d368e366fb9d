"""Does consolidation cost recall? R@10 and R@20 before and after consolidating a conversational corpus.

The corpus is bench/conversations/corpus.txt (three conversations of ten sessions, 42 questions with
their evidence turns), remembered one turn per episode with its speaker as a `Name:` prefix, on the
embedded engine with the real local embedding model and the extractive reasoner. Every question is
recalled over the whole tenant before and after `consolidate`. R@k is the share of a question's
evidence turns in the top k results, a fact credited only with the source turns whose words it shows
(a grounding line in `sources[].text`, or its own text), as bench/conversations.py does. Also: facts
written per 100 episodes, claims with entity/property/value, supersedes.

    .venv/bin/python bench/consolidate_quality.py [--misses]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from mneme import bootstrap  # noqa: E402
from mneme.adapters.sqlite.index import SqliteSearchIndex  # noqa: E402
from mneme.adapters.sqlite.store import SqliteRecordStore  # noqa: E402
from mneme.models import Principal, Role  # noqa: E402
from mneme.services.recall import RecallRequest  # noqa: E402
from mneme.services.remember import RememberItem  # noqa: E402
from mneme.settings import Settings  # noqa: E402

CORPUS = ROOT / "bench" / "conversations" / "corpus.txt"
TAG = re.compile(r"\s*\[(q\d+(?: q\d+)*)\]\s*$")


class Turn:
    def __init__(self, turn_id: str, scope: str, session: str, when: datetime, text: str) -> None:
        self.turn_id, self.scope, self.session, self.when, self.text = turn_id, scope, session, when, text


def load() -> tuple[list[Turn], dict[str, tuple[str, set[str]]]]:
    """The turns in order, and per question id: (question, evidence turn ids)."""
    turns: list[Turn] = []
    questions: dict[str, tuple[str, set[str]]] = {}
    evidence: dict[str, set[str]] = {}
    conversation, day, session = "", datetime(2026, 1, 1, tzinfo=UTC), 0
    for line in CORPUS.read_text().splitlines():
        if line.startswith("# conversation "):
            conversation, session = line.split()[-1], 0
        elif line.startswith("## "):
            day, session = datetime.fromisoformat(line[3:].strip()).replace(hour=9, tzinfo=UTC), session + 1
        elif line.startswith("? "):
            qid, _, text = line[2:].partition("|")
            questions[qid.strip()] = (text.strip(), evidence.get(qid.strip(), set()))
        elif line.strip() and not line.startswith("#"):
            tags = TAG.search(line)
            text = TAG.sub("", line).strip()
            index = sum(1 for t in turns if t.session == f"{conversation}-{session}")
            turn = Turn(f"{conversation}-s{session}-t{index}", f"root.{conversation}", f"{conversation}-{session}",
                        day + timedelta(minutes=2 * index), text)  # fmt: skip
            turns.append(turn)
            for qid in tags[1].split() if tags else []:
                evidence.setdefault(qid, set()).add(turn.turn_id)
    return turns, questions


def recall_at(
    services: bootstrap.Services, who: Principal, questions: dict, turn_of: dict, text_of: dict, k: int
) -> dict:
    """Per question: the share of its evidence turns in the top k (a fact credited with the turns it shows)."""
    scores = {}
    for qid, (question, evidence) in questions.items():
        response = services.recall.recall(who, RecallRequest(query=question, scope="root", limit=k))
        credited: set[str] = set()
        for result in response.results[:k]:
            if result.kind == "episode":
                credited.add(turn_of.get(result.id, ""))
            for source in result.sources or []:
                shown = source.get("text") or " ".join(result.content.split())
                if " ".join(text_of.get(source["id"], "\0").split()) in " ".join(shown.split()):
                    credited.add(turn_of.get(source["id"], ""))
        scores[qid] = len(evidence & credited) / len(evidence)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="questions whose R@10 dropped")
    args = parser.parse_args()
    turns, questions = load()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), consolidation={"settle_seconds": 0})
        services = bootstrap.build(
            settings,
            store=SqliteRecordStore(Path(tmp) / "m.db"),
            index=SqliteSearchIndex(Path(tmp) / "i.db"),
            background=False,
        )
        who = Principal(tenant="bench", principal="bench", roles=frozenset({Role.admin}))
        items = [
            RememberItem(
                scope=t.scope,
                content=t.text,
                create_scope=True,
                occurred_at=t.when,
                session_id=t.session,
                metadata={"turn": t.turn_id},
            )
            for t in turns
        ]
        written = [r.episode_id for start in range(0, len(items), 100)
                   for r in services.remember.remember(who, items[start : start + 100])]  # fmt: skip
        turn_of = {episode_id: turn.turn_id for episode_id, turn in zip(written, turns, strict=True)}
        text_of = {episode_id: turn.text for episode_id, turn in zip(written, turns, strict=True)}
        before = {k: recall_at(services, who, questions, turn_of, text_of, k) for k in (10, 20)}
        run = services.consolidation.start(who, None)
        after = {k: recall_at(services, who, questions, turn_of, text_of, k) for k in (10, 20)}
        facts = services.store.list_facts("bench")
    extracted = [f for f in facts if f.tier == "raw"]
    claims = [f for f in extracted if f.entity and f.property and f.value]
    superseded = [f for f in extracted if f.status == "superseded"]
    print(f"corpus: {len(turns)} turns, {len(questions)} questions; run {run.status}")
    for k in (10, 20):
        b, a = (sum(s[k].values()) / len(questions) for s in (before, after))
        print(f"R@{k}: before {b:.3f}  after {a:.3f}")
    print(f"facts written per 100 episodes: {len(extracted) / len(turns) * 100:.1f} "
          f"({len(extracted)} facts, {len(facts) - len(extracted)} roll-ups)")  # fmt: skip
    print(f"claims with entity/property/value: {len(claims)}; supersedes: {len(superseded)}")
    for fact in sorted(claims, key=lambda f: (f.entity or "", f.property or "")):
        print(f"  {fact.status:<10} {fact.entity} / {fact.property} / {fact.value}")
    if args.misses:
        for qid, (question, _) in questions.items():
            if after[10][qid] < before[10][qid]:
                print(f"  worse at 10: {qid} {question!r} {before[10][qid]:.2f} -> {after[10][qid]:.2f}")


if __name__ == "__main__":
    main()
