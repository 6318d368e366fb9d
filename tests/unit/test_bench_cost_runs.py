"""bench/cost.py's consolidation section prices what AWS bills: Step Functions per state transition, a
Distributed Map one more per child execution it starts; X-Ray per trace recorded, of the requests its
default rule samples (the first each second, then 5 %)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cost_runs", BENCH / "cost.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_run_is_billed_its_states_and_one_transition_per_child_execution(cost: ModuleType) -> None:
    cost.STAGE_TASKS.update({"Begin", "Stage_collect", "Finish"})
    states = Counter({"Targets": 1, "Target": 10, "Begin": 10, "Stage_collect": 10, "Finish": 1})
    run = cost.RunTransitions(scopes=10, runs=1, states=states, children=10)
    assert run.transitions == 32 + 10
    assert run.stage_invocations == 21
    assert run.cost() == pytest.approx(42 * 0.025 / 1000 + 21 * 0.20 / 1e6)


def test_xray_records_the_first_request_each_second_and_five_percent_of_the_rest(cost: ModuleType) -> None:
    assert cost.xray_sampled(1) == 1.0
    assert cost.xray_sampled(0.5) == 1.0  # under one a second: every request
    assert cost.xray_sampled(10) == pytest.approx((1 + 0.05 * 9) / 10)
    assert cost.xray_sampled(100) == pytest.approx((1 + 0.05 * 99) / 100)
