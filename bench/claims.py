"""Precision and recall of claim extraction on labelled utterances and labelled conversations.

Run: .venv/bin/python bench/claims.py [--extractor patterns|spacy] [--set NAME ...] [--turns] [--errors]
     [--show N]

Sets (`--set`, repeatable; default: every one):
  dev             bench/claims.txt: single utterances, the patterns were tuned on it
  heldout         bench/claims_heldout.txt: single utterances written after tuning on dev, never tuned on
  conversational  bench/claims_conversational.txt: chat turns written as a precision check, never tuned on
  chat            bench/claims_chat.txt: whole conversations labelled turn by turn (issue 42's dev part)
  chat-check      bench/claims_chat_check.txt: conversations written before tuning, never tuned on
  traps           bench/claims_traps.txt: short conversations of precision traps, a dev set (tuned on)
  fresh           bench/claims_fresh.txt: conversations written before the rules were read, never tuned on

A conversation is read as one window (`window_claims`: each turn with the turns around it); an utterance
set's line is a window of one turn. `--turns` reads every turn alone with `claims(text, speaker)` instead
(what a reasoner that sees one turn at a time gets). A predicted claim counts when it is on the turn
labelled with it and entity, property and value all equal the label after normalising case, leading
articles, "favorite"/"favourite" and trailing punctuation. `--show N` prints the first N claims found on
the sets with the sentence a fact would carry (`mneme.records.sentence`), for a reader to judge.
(`spacy` needs spaCy and en_core_web_sm; see bench/claims_spacy.py. It reads turns alone.)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

Triple = tuple[str, str, str]
Turn = tuple[str | None, str]  # (metadata speaker, text)
Extractor = Callable[[str, "str | None"], list[Triple]]
WindowExtractor = Callable[[Sequence[Turn]], list[tuple[int, Triple]]]
SETS = {
    "dev": "claims.txt",
    "heldout": "claims_heldout.txt",
    "conversational": "claims_conversational.txt",
    "chat": "claims_chat.txt",
    "chat-check": "claims_chat_check.txt",
    "traps": "claims_traps.txt",
    "fresh": "claims_fresh.txt",
}


class Conversation:
    """A window of labelled turns: a conversation of a chat set, or one line of an utterance set."""

    def __init__(self, shape: str, name: str) -> None:
        self.shape, self.name = shape, name
        self.turns: list[Turn] = []
        self.expected: list[list[Triple]] = []


def _turn(line: str) -> tuple[Turn, list[Triple]]:
    text, _, tail = line.partition("=>")
    text = text.strip()
    speaker = None
    if text.startswith("@"):
        speaker, _, text = text[1:].partition(" ")
    expected = [tuple(p.strip() for p in c.split("|")) for c in tail.split(";;") if c.strip()]
    assert all(len(c) == 3 for c in expected), line
    return (speaker, text), [(c[0], c[1], c[2]) for c in expected]


def load(path: Path) -> list[tuple[str, str, str | None, list[Triple]]]:
    """(domain, text, metadata speaker, expected claims) per labelled line of an utterance set."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        domain, _, rest = line.partition("|")
        (speaker, text), expected = _turn(rest)
        rows.append((domain.strip(), text, speaker, expected))
    return rows


def load_conversations(path: Path) -> list[Conversation]:
    """The windows of a set: `=== shape name` opens a conversation; an utterance set gives one per line."""
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    if not any(line.startswith("=== ") for line in lines):
        windows = []
        for domain, text, speaker, expected in load(path):
            window = Conversation(domain, text)
            window.turns.append((speaker, text))
            window.expected.append(expected)
            windows.append(window)
        return windows
    conversations: list[Conversation] = []
    for line in lines:
        if line.startswith("=== "):
            shape, _, name = line[4:].strip().partition(" ")
            conversations.append(Conversation(shape, name))
            continue
        turn, expected = _turn(line)
        conversations[-1].turns.append(turn)
        conversations[-1].expected.append(expected)
    return conversations


def norm(part: str) -> str:
    part = part.lower().replace("favorite", "favourite").strip(" .!'\"")
    return " ".join(re.sub(r"^(?:the|a|an)\s+", "", part).split())


def key(claim: Triple) -> Triple:
    return (norm(claim[0]), norm(claim[1]), norm(claim[2]))


def patterns() -> Extractor:
    from mneme.consolidation.claims.window import claims

    return lambda text, speaker: [tuple(c) for c in claims(text, speaker)]  # type: ignore[misc]


def spacy_extractor() -> Extractor:
    sys.path.insert(0, str(ROOT / "bench"))
    from claims_spacy import SpacyClaims

    return SpacyClaims().claims


def one_at_a_time(extract: Extractor) -> WindowExtractor:
    """Every turn read alone."""
    return lambda turns: [(i, claim) for i, (speaker, text) in enumerate(turns) for claim in extract(text, speaker)]


def windowed() -> WindowExtractor:
    from mneme.consolidation.claims import window as module

    if not hasattr(module, "window_claims"):  # the code before issue 42: every turn alone
        return one_at_a_time(patterns())
    return lambda turns: [(i, tuple(c)) for i, c in module.window_claims(turns)]  # type: ignore[misc]


class Score:
    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0

    def add(self, predicted: set[tuple[int, Triple]], wanted: set[tuple[int, Triple]]) -> None:
        self.tp += len(predicted & wanted)
        self.fp += len(predicted - wanted)
        self.fn += len(wanted - predicted)

    def line(self) -> str:
        precision, recall = self.tp / max(self.tp + self.fp, 1), self.tp / max(self.tp + self.fn, 1)
        return f"precision {precision:.3f}  recall {recall:.3f}  (tp {self.tp}, fp {self.fp}, fn {self.fn})"


def evaluate(name: str, read: WindowExtractor, errors: bool, shown: list[tuple[str, Triple]]) -> Score:
    windows = load_conversations(ROOT / "bench" / SETS[name])
    total, shapes = Score(), dict[str, Score]()
    for window in windows:
        found = read(window.turns)
        predicted = {(i, key(c)) for i, c in found}
        wanted = {(i, key(c)) for i, claims in enumerate(window.expected) for c in claims}
        total.add(predicted, wanted)
        shapes.setdefault(window.shape, Score()).add(predicted, wanted)
        shown.extend((window.turns[i][1], c) for i, c in found)
        if errors:
            for i in sorted({i for i, _ in predicted ^ wanted}):
                extra = sorted(c for j, c in predicted - wanted if j == i)
                missed = sorted(c for j, c in wanted - predicted if j == i)
                print(f"  [{name} {window.name} #{i}] {window.turns[i][1]!r}\n    extra {extra}\n    missed {missed}")
    turns = sum(len(w.turns) for w in windows)
    labelled = sum(len(c) for w in windows for c in w.expected)
    print(f"set {name}: {len(windows)} windows, {turns} turns, {labelled} labelled claims")
    for shape, score in sorted(shapes.items()):
        print(f"  {shape:<14} {score.line()}")
    print(f"  {'all':<14} {total.line()}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extractor", choices=("patterns", "spacy"), default="patterns")
    parser.add_argument("--set", choices=(*SETS, "all"), action="append", help="repeatable; default every set")
    parser.add_argument("--turns", action="store_true", help="read every turn alone, without its window")
    parser.add_argument("--errors", action="store_true", help="list false positives and misses")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="print N claims found, with sentences")
    args = parser.parse_args()
    names = list(SETS) if not args.set or "all" in args.set else args.set
    if args.extractor == "spacy":
        read = one_at_a_time(spacy_extractor())
    else:
        read = one_at_a_time(patterns()) if args.turns else windowed()
    how = "each turn alone" if args.turns or args.extractor == "spacy" else "windows"
    print(f"extractor {args.extractor}, {how}")
    shown: list[tuple[str, Triple]] = []
    started = time.perf_counter()
    for name in names:
        evaluate(name, read, args.errors, shown)
    elapsed = time.perf_counter() - started
    turns = sum(len(w.turns) for name in names for w in load_conversations(ROOT / "bench" / SETS[name]))
    print(f"{turns / elapsed:,.0f} turns/s")
    if args.show:
        from mneme.records import sentence

        for text, (entity, prop, value) in shown[: args.show]:
            print(f"  {sentence(entity, prop, value):<60} <- {text}")


if __name__ == "__main__":
    main()
