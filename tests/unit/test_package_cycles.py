"""The package's layers, read from the imports of every module under shared/mneme (lazy and type-only
imports included): the ports, services and adapters never import the consolidation package (its records
and grounding rules live in the core, `mneme.records` and `mneme.grounding`), and no two of mneme's
parts (a subpackage, or a module at its root) import each other, directly or round a longer loop."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "mneme"
BELOW_CONSOLIDATION = ("ports", "services", "adapters")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (PACKAGE.parent / relative).is_dir()


def _imported(path: Path) -> set[str]:
    """The mneme modules `path` imports (`from mneme.x import y` names mneme.x.y when y is a module)."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")}
    return {name for name in found if name == "mneme" or name.startswith("mneme.")}


def _part(module: str) -> str:
    """The part of mneme a module belongs to: its subpackage, or itself at the package root."""
    return module.split(".")[1] if "." in module else "__init__"


def _imports() -> dict[str, set[str]]:
    return {_module(path): _imported(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(part: str) -> None:
        index[part] = low[part] = len(index)
        stack.append(part)
        for other in sorted(edges.get(part, ())):
            if other not in index:
                visit(other)
                low[part] = min(low[part], low[other])
            elif other in stack:
                low[part] = min(low[part], index[other])
        if low[part] == index[part]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == part:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for part in sorted(edges):
        if part not in index:
            visit(part)
    return groups


def test_ports_services_and_adapters_do_not_import_consolidation() -> None:
    # Given every module's imports
    imports = _imports()

    # When the ones below consolidation are read
    offending = sorted(
        f"{module} imports {name}"
        for module, names in imports.items()
        if _part(module) in BELOW_CONSOLIDATION
        for name in names
        if name == "mneme.consolidation" or name.startswith("mneme.consolidation.")
    )

    # Then none reaches into the consolidation package
    assert offending == []


def test_no_cycle_between_mneme_parts() -> None:
    # Given which part of mneme imports which
    edges: dict[str, set[str]] = defaultdict(set)
    for module, names in _imports().items():
        edges[_part(module)] |= {_part(name) for name in names if _part(name) != _part(module)}

    # Then no two parts import each other, directly or round a loop
    assert _cycles(edges) == []


def test_the_cycle_check_sees_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
