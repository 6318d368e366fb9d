"""Precision of each rule family of the claim patterns, on the sets the patterns are tuned on.

Run: .venv/bin/python bench/claims_families.py [--set NAME ...] [--errors]

A claim belongs to a family when it disappears with that family switched off (one family at a time: a
pattern of `rules.RULES`, a shape of `rules.POSSESSIVES`, the "called" reading, appositions,
answers, confirmations); a claim two families both find belongs to neither ("shared"). Families that find
nothing on the sets are listed too: nothing vouches for them. Meant for the dev sets (`dev`, `chat`, `traps`);
never run it on a held-out set, whose errors must not be read.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "bench")]

from claims import SETS, key, load_conversations  # noqa: E402

from mneme.consolidation.claims import answers as claim_answers  # noqa: E402
from mneme.consolidation.claims import rules as claim_rules  # noqa: E402
from mneme.consolidation.claims import window as module  # noqa: E402

Found = tuple[str, int, int, tuple[str, str, str]]  # (set, window, turn, claim)


@contextmanager
def switched_off(owner: object, name: str, replacement: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def families() -> list[tuple[str, Callable[[], AbstractContextManager[None]]]]:
    out: list[tuple[str, Callable[[], AbstractContextManager[None]]]] = []
    for k, rule in enumerate(claim_rules.RULES):
        rest = tuple(r for j, r in enumerate(claim_rules.COMPILED) if j != k)
        out.append(
            (f"rule {k:2d} {rule[0]} ({rule[1]})", lambda rest=rest: switched_off(claim_rules, "COMPILED", rest))
        )
    for k, (shape, _) in enumerate(claim_rules.POSSESSIVES):
        rest_p = tuple(p for j, p in enumerate(claim_rules.POSSESSIVES) if j != k)
        out.append((f"possessive {k} {shape}", lambda rest=rest_p: switched_off(claim_rules, "POSSESSIVES", rest)))
    out.append(("called", lambda: switched_off(module, "_called", lambda clause: [])))
    out.append(("appositions", lambda: switched_off(module, "appositions", lambda sentence, owner: [])))
    out.append(("confirmations", lambda: switched_off(claim_answers, "_confirmed", lambda q, a, h: [])))
    out.append(("answers", lambda: switched_off(module, "answer_claims", lambda q, a, h: [])))
    return out


def run(names: list[str]) -> tuple[set[Found], set[Found]]:
    """Every claim found, and every claim labelled, over the sets."""
    found: set[Found] = set()
    wanted: set[Found] = set()
    for name in names:
        for w, window in enumerate(load_conversations(ROOT / "bench" / SETS[name])):
            found |= {(name, w, i, key(tuple(c))) for i, c in module.window_claims(window.turns)}
            wanted |= {(name, w, i, key(c)) for i, labelled in enumerate(window.expected) for c in labelled}
    return found, wanted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set", action="append", choices=("dev", "chat", "traps"), help="repeatable; default dev, chat and traps"
    )
    parser.add_argument("--errors", action="store_true", help="list each family's false positives")
    args = parser.parse_args()
    names = args.set or ["dev", "chat", "traps"]
    everything, wanted = run(names)
    owned: dict[str, set[Found]] = {}
    for family, off in families():
        with off():
            owned[family] = everything - run(names)[0]
    counted = Counter(claim for claims in owned.values() for claim in claims)
    print(f"sets {', '.join(names)}: {len(everything)} claims, {len(everything & wanted)} right")
    for family, claims in owned.items():
        mine = {c for c in claims if counted[c] == 1}
        tp, fp = len(mine & wanted), len(mine - wanted)
        precision = f"{tp / (tp + fp):.3f}" if tp + fp else "  -  "
        print(f"  {family:<44} precision {precision}  (tp {tp}, fp {fp})")
        if args.errors:
            for claim in sorted(mine - wanted):
                print(f"      fp {claim}")
    shared = {c for c in everything if counted[c] != 1}
    print(f"  {'shared or none':<44} tp {len(shared & wanted)}, fp {len(shared - wanted)}")


if __name__ == "__main__":
    main()
