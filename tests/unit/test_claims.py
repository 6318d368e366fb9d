"""Claims from conversation: the patterns on a few cases, and the labelled set's precision floor."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mneme.consolidation.claims import Claim, claims
from mneme.consolidation.reasoning import ExtractiveReasoner
from mneme.grounding import split_speaker
from mneme.records import Turn

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Maya: I moved to Berlin last year.", [Claim("Maya", "lives in", "Berlin")]),
        ("Tom: My favourite band is Radiohead.", [Claim("Tom", "favourite band", "Radiohead")]),
        ("Priya: I work as a data engineer.", [Claim("Priya", "works as", "data engineer")]),
        ("Ben: We switched to Postgres for billing.", [Claim("Ben", "uses", "Postgres")]),
        ("Ben: I no longer work at Google, I work at Stripe now.", [Claim("Ben", "works at", "Stripe")]),
        ("Maya: My brother lives in Madrid.", [Claim("Maya's brother", "lives in", "Madrid")]),
        ("Acme's billing plan is Premium since the upgrade.", [Claim("Acme", "billing plan", "Premium")]),
        ("Priya: We moved from Jira to Linear, did you get the invite?", [Claim("Priya", "uses", "Linear")]),
        ("Maya: So you live in Berlin, right?", []),
        ("Maya: Cool! What did it look like?", []),
        ("Tom: Thanks, that helps a lot.", []),
        ("Maya: I might move to Lisbon next year.", []),
        ("Maya: I don't live in Paris anymore.", []),
        ("I moved to Berlin.", []),  # no speaker: no owner for "I"
    ],
)
def test_conversational_claims(text: str, expected: list[Claim]) -> None:
    assert claims(text) == expected


def test_the_speaker_comes_from_the_prefix_or_the_caller() -> None:
    assert split_speaker("Dr Okafor: Take it twice a day.") == ("Dr Okafor", "Take it twice a day.")
    assert claims("I live in Oslo.", speaker="Leo") == [Claim("Leo", "lives in", "Oslo")]


def test_the_extractive_reasoner_states_the_claim_in_a_sentence_of_its_own() -> None:
    def said(*texts: str) -> list[Turn]:
        return [Turn(number=n, text=text, at=datetime(2026, 3, 1, tzinfo=UTC)) for n, text in enumerate(texts, 1)]

    [proposal] = ExtractiveReasoner().propose(said("Maya: I moved to Berlin last year.")).facts
    assert (proposal.entity, proposal.property, proposal.value) == ("Maya", "lives in", "Berlin")
    assert proposal.summary == "Maya lives in Berlin."  # not a copy of the turn
    [dog] = ExtractiveReasoner().propose(said("Tom: My dog is called Biscuit.")).facts
    assert dog.summary == "Tom's dog's name is Biscuit."
    chat = ExtractiveReasoner().propose(said("Maya: Haha, that's hilarious.", "Maya: Haha that's hilarious!"))
    assert chat.facts == []  # small talk states no claim: it stays episodes


def test_the_labelled_set_keeps_precision_above_0_9() -> None:
    spec = importlib.util.spec_from_file_location("bench_claims", BENCH / "claims.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = [row for name in ("claims.txt", "claims_heldout.txt") for row in bench.load(BENCH / name)]
    assert len(rows) >= 200
    tp = fp = fn = 0
    for _, text, speaker, expected in rows:
        predicted = {bench.key(tuple(c)) for c in claims(text, speaker)}
        wanted = {bench.key(c) for c in expected}
        tp, fp, fn = tp + len(predicted & wanted), fp + len(predicted - wanted), fn + len(wanted - predicted)
    assert tp / (tp + fp) >= 0.9 and tp / (tp + fn) >= 0.85
