"""The benchmarks run by hand, outside the suite: every name they import from the project must still exist
(bench/attack.py imported ROLE_RANK from mneme.models after it moved to mneme.identity, and failed at start)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*REPO.glob("bench/*.py"), *REPO.glob("examples/*.py")])
OURS = ("mneme", "mneme_sdk", "infra", "functions", "tests")


def project_imports(script: Path) -> list[tuple[str, str]]:
    tree = ast.parse(script.read_text(), filename=str(script))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS
        for alias in node.names
    ]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_project_name_a_script_imports_exists(script: Path) -> None:
    for module, name in project_imports(script):
        imported = importlib.import_module(module)
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), f"{module}.{name}"
