"""docs/integrations.md runs as written (issue 45): every shell snippet on the page, in order, from a checkout-like
folder in the state the README's quick start leaves (a `mneme serve` running on its store `.mneme`, and `.venv`
with what `make examples` adds), and what each prints matches the page (ids, times and scores masked). Every
example under examples/ is one of those snippets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.serve import mneme_serve

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
MASKS = [
    (re.compile(r"\b(ep|fa|msg)_[0-9a-f]{8,}\b"), r"\1_<id>"),
    (re.compile(r"\b[0-9a-f]{8}…"), "<key>…"),
    (re.compile(r"\bada-[0-9a-f]{6}\b"), "ada-<user>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}( \d{2}:\d{2})?"), "<date>"),
    (re.compile(r"\b\d+\.\d+\b"), "<score>"),
]


@dataclass
class Snippet:
    line: int
    command: str
    prints: str | None  # the block the page says it prints, when it says so


def fenced_blocks(text: str) -> list[tuple[int, str, str, int]]:
    """(first line, language, content, line after the block) of every fenced block."""
    lines, found, index = text.splitlines(), [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = lines.index(opening.group(1), index + 1)
        found.append((index + 1, opening.group(2), "\n".join(lines[index + 1 : end]), end + 1))
        index = end + 1
    return found


def snippets() -> list[Snippet]:
    text = DOC.read_text()
    lines = text.splitlines()
    blocks = fenced_blocks(text)
    found: list[Snippet] = []
    for number, (line, language, content, after) in enumerate(blocks):
        assert language in ("sh", ""), f"line {line}: a {language} block: write it as a shell snippet that runs"
        if language != "sh":
            continue
        following = blocks[number + 1] if number + 1 < len(blocks) else None
        between = " ".join(lines[after : following[0] - 1]).strip() if following else ""
        prints = following[2] if following and following[1] == "" and between.startswith("prints") else None
        found.append(Snippet(line, content, prints))
    return found


def masked(text: str) -> list[str]:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text.rstrip("\n").splitlines()


@dataclass
class Checkout:
    folder: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checkout]:
    """A folder laid out like the repository root after `make serve` and `make examples`: `.venv` (this one),
    `examples/`, a copy of the TypeScript client without its node_modules, and `mneme serve` on `.mneme`."""
    folder = tmp_path_factory.mktemp("checkout")
    (folder / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    ignore = shutil.ignore_patterns("node_modules", "dist")
    shutil.copytree(ROOT / "clients" / "typescript", folder / "clients" / "typescript", ignore=ignore)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEME_")}
    command = [str(folder / ".venv" / "bin" / "mneme"), "serve", "--port", "0", "--workers", "1"]
    with mneme_serve(command, folder, env, folder / "serve.log") as url:
        # `make serve PORT=N`'s documented override, with the key `make serve` wrote
        key = (folder / ".mneme" / "admin.key").read_text().strip()
        yield Checkout(folder, {**env, "MNEME_URL": url, "MNEME_API_KEY": key})


def test_every_example_is_a_snippet_of_the_page() -> None:
    commands = "\n".join(s.command for s in snippets())
    for example in sorted((ROOT / "examples").glob("*.py")):
        assert f"examples/{example.name}" in commands, example.name
    assert "dist/examples/agent-loop.js" in commands


def test_make_examples_installs_what_the_examples_import() -> None:
    # The page's first command; this environment is `make install`'s, a superset of what it adds
    assert snippets()[0].command == "make examples"
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e 'clients/python[examples]'" in makefile
    sdk = (ROOT / "clients" / "python" / "pyproject.toml").read_text()
    extra = next(line for line in sdk.splitlines() if line.startswith("examples = "))
    for package in ("langgraph", "strands-agents", "openai-agents"):
        assert f'"{package}>=' in extra
    for module in ("langgraph", "langchain_core", "strands", "agents"):
        __import__(module)


@pytest.mark.parametrize("snippet", snippets()[1:], ids=lambda s: f"line-{s.line}")
def test_the_snippet_runs_and_prints_what_the_page_shows(checkout: Checkout, snippet: Snippet) -> None:
    done = subprocess.run(
        ["bash", "-c", snippet.command], cwd=checkout.folder, env=checkout.env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"line {snippet.line}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if snippet.prints is not None:
        assert masked(done.stdout)[-len(masked(snippet.prints)) :] == masked(snippet.prints), done.stdout
