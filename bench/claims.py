"""Precision and recall of claim extraction on the labelled utterances in bench/claims.txt.

Run: .venv/bin/python bench/claims.py [--extractor patterns|spacy] [--set dev|heldout|conversational|all] [--errors]
(`conversational`: bench/claims_conversational.txt, chat turns written as a check and not tuned on.)
(`spacy` needs spaCy and the en_core_web_sm pipeline installed; see bench/claims_spacy.py.)
A predicted claim counts when entity, property and value all equal an expected one after normalising
case, articles, "favorite"/"favourite" and trailing punctuation.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

Triple = tuple[str, str, str]
Extractor = Callable[[str, "str | None"], list[Triple]]


def load(path: Path) -> list[tuple[str, str, str | None, list[Triple]]]:
    """(domain, text, metadata speaker, expected claims) per labelled line."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        head, _, tail = line.partition("=>")
        domain, _, text = (part.strip() for part in head.partition("|"))
        speaker = None
        if text.startswith("@"):
            speaker, _, text = text[1:].partition(" ")
        expected = [tuple(p.strip() for p in c.split("|")) for c in tail.split(";;") if c.strip()]
        assert all(len(c) == 3 for c in expected), line
        rows.append((domain, text, speaker, [(c[0], c[1], c[2]) for c in expected]))
    return rows


def norm(part: str) -> str:
    part = part.lower().replace("favorite", "favourite").strip(" .!'\"")
    return " ".join(re.sub(r"^(?:the|a|an)\s+", "", part).split())


def key(claim: Triple) -> Triple:
    return (norm(claim[0]), norm(claim[1]), norm(claim[2]))


def patterns() -> Extractor:
    from mneme.consolidation.claims import claims

    return lambda text, speaker: [tuple(c) for c in claims(text, speaker)]  # type: ignore[misc]


def spacy_extractor() -> Extractor:
    sys.path.insert(0, str(ROOT / "bench"))
    from claims_spacy import SpacyClaims

    return SpacyClaims().claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extractor", choices=("patterns", "spacy"), default="patterns")
    parser.add_argument("--errors", action="store_true", help="list false positives and misses")
    parser.add_argument(
        "--set",
        choices=("dev", "heldout", "conversational", "all"),
        default="all",
        help="dev: claims.txt (patterns tuned on it)",
    )
    args = parser.parse_args()
    extract = patterns() if args.extractor == "patterns" else spacy_extractor()
    files = {
        "dev": ["claims.txt"],
        "heldout": ["claims_heldout.txt"],
        "conversational": ["claims_conversational.txt"],
        "all": ["claims.txt", "claims_heldout.txt", "claims_conversational.txt"],
    }
    rows = [row for name in files[args.set] for row in load(ROOT / "bench" / name)]
    tp = fp = fn = 0
    per_domain: dict[str, list[int]] = {}
    started = time.perf_counter()
    for domain, text, speaker, expected in rows:
        predicted = {key(c) for c in extract(text, speaker)}
        wanted = {key(c) for c in expected}
        hits = len(predicted & wanted)
        tp, fp, fn = tp + hits, fp + len(predicted - wanted), fn + len(wanted - predicted)
        counts = per_domain.setdefault(domain, [0, 0, 0])
        counts[0] += hits
        counts[1] += len(predicted - wanted)
        counts[2] += len(wanted - predicted)
        if args.errors and predicted != wanted:
            print(f"  {text!r}\n    extra {sorted(predicted - wanted)}\n    missed {sorted(wanted - predicted)}")
    elapsed = time.perf_counter() - started
    with_claims = sum(1 for row in rows if row[3])
    print(
        f"extractor {args.extractor}, set {args.set}: {len(rows)} utterances "
        f"({with_claims} with claims, {tp + fn} claims)"
    )
    for domain, (t, f, n) in sorted(per_domain.items()):
        print(f"  {domain:<9} precision {t / max(t + f, 1):.3f}  recall {t / max(t + n, 1):.3f}")
    print(f"precision {tp / max(tp + fp, 1):.3f}  recall {tp / max(tp + fn, 1):.3f}  (tp {tp}, fp {fp}, fn {fn})")
    print(f"{len(rows) / elapsed:,.0f} utterances/s")


if __name__ == "__main__":
    main()
