"""The child's folded scope summary (workflow.SCOPE_SUMMARY), evaluated by jsonata-python: what `finish`
adds up is unchanged, and a run of MAX_TARGETS_PER_RUN scopes returns less than the 256 KiB state limit."""

from __future__ import annotations

import json
from typing import Any

import jsonata

from infra.mneme_infra.workflow import MESSAGE_CHARS, SCOPE_SUMMARY
from mneme.consolidation.service import MAX_TARGETS_PER_RUN
from mneme.consolidation.stages import STAGE_NAMES

STATE_LIMIT = 256 * 1024
TARGET = {"tenant": "t" * 128, "scope_id": "0f5c8a4e-2d7b-4c1e-9a3f-6b8d0e1f2a3c", "run_id": "run_" + "a" * 32}


def fold(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bindings = f"$batches := {json.dumps(batches)}; $target := {json.dumps(TARGET)};"
    expression = "(" + bindings + " " + " ".join(SCOPE_SUMMARY.split())[1:]
    result: list[dict[str, Any]] = jsonata.Jsonata(expression).evaluate(None)
    return result


def batch(counters: dict[str, dict[str, int]], errors: list[dict[str, Any]] = (), episodes: int = 1) -> dict[str, Any]:  # type: ignore[assignment]
    return {**TARGET, "started_at": "2026-11-30T21:00:00.000Z", "counters": counters, "errors": list(errors),
            "episode_ids": [f"ep-{i}" for i in range(min(episodes, 1))]}  # fmt: skip


def totals(batches: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """What `finish` (`_merge`) adds up from the batches it is given."""
    summed: dict[str, dict[str, int]] = {}
    for b in batches:
        for stage, counters in b["counters"].items():
            for name, value in counters.items():
                summed.setdefault(stage, {}).setdefault(name, 0)
                summed[stage][name] += value
    return summed


def test_the_fold_keeps_what_finish_adds_up() -> None:
    batches = [
        batch({"collect": {"episodes_read": 200}, "extract": {"proposals": 3}}),
        batch({"collect": {"episodes_read": 5}, "commit": {"facts_written": 2}, "extract": {"errors": 1}},
              [{"stage": "extract", "message": "x" * 900, "source": "step_functions"}], episodes=0),
    ]  # fmt: skip
    (summary,) = fold(batches)
    assert summary["counters"] == totals(batches)
    assert [(e["stage"], len(e["message"])) for e in summary["errors"]] == [("extract", MESSAGE_CHARS)]
    assert summary["episode_ids"] == ["ep-0"] and summary["scope_id"] == TARGET["scope_id"]
    assert fold([batch({}, episodes=0)])[0] | {"started_at": None} == {**TARGET, "started_at": None,
                                                                          "counters": {}, "errors": [],
                                                                          "episode_ids": []}  # fmt: skip


def test_a_run_of_the_most_scopes_returns_less_than_the_state_limit() -> None:
    # Given the largest scope summary: the counters a batch records (measured on SQLite), each at nine
    # digits, a 128-character tenant, and one error with a long message
    names = {"collect": ["episodes_read", "skipped_leased"], "cluster": ["clusters"],
             "extract": ["reasoner_calls", "proposals", "rejected", "errors"],
             "reconcile": ["create", "reinforce", "supersede", "unresolved", "kept_as_episode"],
             "commit": ["facts_written", "contradictions"], "rollup": ["rollups"],
             "checkpoint": ["advanced"]}  # fmt: skip
    assert set(names) == set(STAGE_NAMES)
    counters = {stage: dict.fromkeys(found, 999_999_999) for stage, found in names.items()}
    error = {"stage": "extract", "message": "y" * 2000, "source": "step_functions"}
    (largest,) = fold([batch(counters), batch(counters, [error])])
    # Then MAX_TARGETS_PER_RUN of them, as the Map's output, stay inside the limit
    output = {"tenant": TARGET["tenant"], "run_id": TARGET["run_id"], "batches": [largest] * MAX_TARGETS_PER_RUN}
    assert len(json.dumps(output).encode()) < STATE_LIMIT
