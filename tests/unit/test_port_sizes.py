"""Ports stay small: each role port of the record store (and every other port) declares at most 15
methods; `RecordStore`, the composition root's union of the roles, declares none of its own."""

from __future__ import annotations

import ast
from pathlib import Path

PORTS = Path(__file__).resolve().parents[2] / "shared" / "mneme" / "ports.py"
MOST = 15


def _methods() -> dict[str, int]:
    tree = ast.parse(PORTS.read_text())
    return {
        node.name: sum(isinstance(item, ast.FunctionDef) for item in node.body)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def test_no_port_declares_more_than_15_methods() -> None:
    # Given the ports' declared methods
    counts = _methods()

    # Then none is a grab bag
    assert {port: n for port, n in counts.items() if n > MOST} == {}


def test_record_store_is_the_union_of_its_roles() -> None:
    # Given the record store port
    store = next(node for node in ast.parse(PORTS.read_text()).body if getattr(node, "name", "") == "RecordStore")
    assert isinstance(store, ast.ClassDef)

    # Then it adds no method of its own and joins every store role
    roles = {base.id for base in store.bases if isinstance(base, ast.Name)} - {"Protocol"}
    assert not any(isinstance(item, ast.FunctionDef) for item in store.body)
    assert {"ScopeStore", "MemoryStore", "EpisodeStore", "ConsolidationStore", "FactStore"} <= roles
