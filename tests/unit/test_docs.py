"""The docs live in the repository: none points outside it, and the code paths they name exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_doc_points_outside_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        assert "../shared" not in text and "DESIGN.md" not in text, doc.name


def test_every_doc_points_at_the_architecture() -> None:
    for doc in DOCS:
        if doc.name != "architecture.md":
            assert "architecture.md" in doc.read_text(), doc.name


def test_the_code_paths_named_in_the_architecture_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(
        re.findall(r"`((?:mneme/|functions/|services/|consolidation/|adapters/|http/|sttp/|local/)[\w/]*\.py)", text)
    )
    assert len(named) > 20
    for path in named:
        candidates = [ROOT / path, ROOT / "shared" / path, ROOT / "shared" / "mneme" / path]
        assert any(candidate.exists() for candidate in candidates), path
