"""The dependency layer's lock (infra/layer-requirements.txt) against pyproject.toml, offline."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from infra.layer_lock import (
    FROM_REPOSITORY,
    LOCK_FILE,
    PROVIDED_BY_RUNTIME,
    UNUSED,
    inputs_digest,
    normalize,
    pins,
    recorded_digest,
)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_lock_was_resolved_from_the_current_pyproject_dependencies() -> None:
    # Given pyproject's runtime dependencies, the target platform and the exclusions
    # Then the digest the lock recorded is theirs: run `infra/layer_lock.py` after changing any of them
    assert recorded_digest(LOCK_FILE) == inputs_digest(PYPROJECT), "infra/layer-requirements.txt is stale"


def test_lock_is_stale_when_a_dependency_changes(tmp_path: Path) -> None:
    changed = tmp_path / "pyproject.toml"
    changed.write_text(PYPROJECT.read_text().replace('"numpy>=2.0"', '"numpy>=2.1"'))
    assert inputs_digest(changed) != recorded_digest(LOCK_FILE)


def test_every_direct_dependency_is_pinned_within_its_range_with_a_hash() -> None:
    locked = pins(LOCK_FILE)
    for text in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]:
        requirement = Requirement(text)
        name = normalize(requirement.name)
        if name in {normalize(n) for n in (*PROVIDED_BY_RUNTIME, *FROM_REPOSITORY)}:
            assert name not in locked
            continue
        version, hashes = locked[name]
        assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} outside {text}"
        assert hashes and all(h.startswith("sha256:") and len(h) == 71 for h in hashes)


def test_lock_leaves_out_the_runtime_sdk_and_the_unused_grpc_transport() -> None:
    locked = set(pins(LOCK_FILE))
    assert not locked & {normalize(n) for n in (*PROVIDED_BY_RUNTIME, *UNUSED)}
    assert {"pydantic-core", "aws-xray-sdk", "numpy", "opensearch-py"} <= locked


def test_the_sdk_stays_out_of_the_layer_and_out_of_every_lambda() -> None:
    # The SDK (clients/python) serves the CLI and the MCP server; no Lambda handler reaches it
    assert "mneme-sdk" not in pins(LOCK_FILE)
    root = PYPROJECT.parent
    importers = {
        source.relative_to(root).as_posix()
        for source in [*root.joinpath("shared", "mneme").rglob("*.py"), *root.joinpath("functions").glob("*.py")]
        if "mneme_sdk" in source.read_text()
    }
    allowed = {"shared/mneme/mcp/server.py", "shared/mneme/mcp/records.py", "shared/mneme/local/embedded.py"}
    assert importers and all(path in allowed or path.startswith("shared/mneme/cli/") for path in importers), importers


def test_nothing_imports_the_left_out_grpc_packages() -> None:
    root = PYPROJECT.parent
    sources = [*root.joinpath("shared", "mneme").rglob("*.py"), *root.joinpath("functions").glob("*.py")]
    for source in sources:
        text = source.read_text()
        assert "import grpc" not in text and "opensearch_protobufs" not in text and "google.protobuf" not in text
