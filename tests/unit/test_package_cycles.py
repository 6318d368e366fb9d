"""The package's layers, read from the imports of every module under shared/mneme (lazy and type-only
imports included): the ports, services and adapters never import the consolidation package (its records
and grounding rules live in the core, `mneme.records` and `mneme.language.grounding`), no two of mneme's parts (a
subpackage, or a module at its root) import each other, directly or round a longer loop, nor do any two
modules; and only the HTTP layer and `mneme.observability` import Powertools."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "mneme"
BELOW_CONSOLIDATION = ("ports", "services", "adapters")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (PACKAGE.parent / relative).is_dir()


def _import_names(path: Path) -> Iterator[tuple[str, str | None]]:
    """(module, name) for each name an import of `path` takes: `import a.b` is (a.b, None), `from a import b`
    (a, b), a relative import made absolute."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield from ((base, alias.name) for alias in node.names)


def _imported(path: Path, *, external: bool = False) -> set[str]:
    """The mneme modules `path` imports (`from mneme.x import y` names mneme.x.y when y is a module, and
    mneme.x too); with `external`, every module it names, of any package."""
    found: set[str] = set()
    for base, name in _import_names(path):
        found.add(base)
        if name is not None and _is_module(f"{base}.{name}"):
            found.add(f"{base}.{name}")
    return found if external else {name for name in found if name == "mneme" or name.startswith("mneme.")}


def _modules_imported(path: Path) -> set[str]:
    """The mneme modules `path` imports, a package only where a name is taken from its `__init__` itself
    (`from mneme.x import y` with y a module names mneme.x.y alone)."""
    found = {
        f"{base}.{name}" if name is not None and _is_module(f"{base}.{name}") else base
        for base, name in _import_names(path)
    }
    return {name for name in found if name.startswith("mneme.") and name != _module(path)}


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


def test_no_circle_between_mneme_modules() -> None:
    # Given which module imports which, at the top, inside a function or for type checking only
    edges = {_module(path): _modules_imported(path) for path in sorted(PACKAGE.rglob("*.py"))}

    # Then no two modules import each other, directly or round a loop (the CLI's commands do not import the
    # parser that registers them, recall's stages do not import the service that runs them)
    assert _cycles(edges) == []


def test_only_the_http_layer_and_observability_import_powertools() -> None:
    # Given every module's imports, of any package
    importers = sorted(
        _module(path)
        for path in PACKAGE.rglob("*.py")
        if any(name.split(".")[0] == "aws_lambda_powertools" for name in _imported(path, external=True))
    )

    # Then the domain counts and logs through mneme.observability (`count`, `logger`), never Powertools itself
    assert [name for name in importers if not name.startswith("mneme.http.")] == ["mneme.observability"]


def test_the_cycle_check_sees_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
