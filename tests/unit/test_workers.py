"""`mneme serve --workers`: 'auto' (the default) is one process per usable CPU, capped; a number overrides it."""

from __future__ import annotations

import pytest

from mneme.cli.app import parser
from mneme.errors import InvalidInput
from mneme.local import workers


def test_the_default_is_auto() -> None:
    assert parser().parse_args(["serve"]).workers == "auto"
    assert parser().parse_args(["serve", "--workers", "1"]).workers == "1"


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 2), (3, 3), (16, workers.AUTO_MAX)])
def test_auto_is_the_usable_cpus_capped(monkeypatch: pytest.MonkeyPatch, cpus: int, expected: int) -> None:
    monkeypatch.setattr(workers, "usable_cpus", lambda: cpus)
    assert workers.worker_count("auto") == expected
    assert workers.worker_count(" AUTO ") == expected


def test_a_number_overrides_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "usable_cpus", lambda: 16)
    assert workers.worker_count("1") == 1
    assert workers.worker_count("6") == 6  # above the cap when asked for


@pytest.mark.parametrize("value", ["0", "-1", "two", "", "1.5", "²"])
def test_bad_counts_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput):
        workers.worker_count(value)


def test_usable_cpus_is_at_least_one() -> None:
    assert workers.usable_cpus() >= 1
