"""The dependency layer's lock file: `infra/layer-requirements.txt`, every package pinned with its hash.

The layer (layer_bundling.PipLayer) installs exactly this file (`--no-deps --require-hashes`), so every
synth builds the same layer whatever PyPI published since. The lock is resolved from pyproject's
`[project].dependencies` for Lambda's platform (CPython 3.12 on arm64), then leaves out:
- what the Lambda runtime already ships (boto3 and its dependencies: a second copy would shadow them);
- opensearch-py's gRPC transport (`opensearch-protobufs`, `grpcio`, `protobuf`, ~17 MB): opensearch-py
  declares it but imports it only for its gRPC client, which Mneme does not use (it speaks HTTP).

Its first line records a digest of those inputs; tests/infra/test_layer_lock.py fails when pyproject
changed and the lock did not. Regenerate (needs PyPI, not AWS):

    .venv/bin/python infra/layer_lock.py           # writes infra/layer-requirements.txt
    .venv/bin/python infra/layer_lock.py --check   # exit 1 when stale
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parent / "pyproject.toml"
LOCK_FILE = HERE / "layer-requirements.txt"
# Lambda's Python runtime provides boto3 and its dependencies; a second copy would shadow them.
PROVIDED_BY_RUNTIME = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")
# opensearch-py's optional gRPC transport: nothing in Mneme imports it.
UNUSED = ("opensearch-protobufs", "grpcio", "protobuf")
# Installed from this repository (clients/python) for the CLI and the MCP server; no Lambda imports it.
FROM_REPOSITORY = ("mneme-sdk",)
PYTHON_VERSION = "3.12"
# manylinux2014 for older wheels, manylinux_2_28 for newer ones (numpy >= 2.3); AL2023 has glibc 2.34.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
TARGET = ["--implementation", "cp", "--python-version", PYTHON_VERSION, "--only-binary=:all:"] + [
    arg for platform in PLATFORMS for arg in ("--platform", platform)
]
INPUTS_PREFIX = "# inputs: "


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """The project's `[project].dependencies`, without those the Lambda runtime provides or no Lambda uses."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    provided = {normalize(name) for name in (*PROVIDED_BY_RUNTIME, *FROM_REPOSITORY)}
    return [req for req in dependencies if requirement_name(req) not in provided]


def inputs_digest(pyproject: Path = PYPROJECT) -> str:
    """What the lock was resolved from: the requirements, the target platform and the exclusions."""
    inputs = {"requirements": sorted(runtime_requirements(pyproject)), "target": TARGET,
              "excluded": sorted(normalize(n) for n in (*PROVIDED_BY_RUNTIME, *UNUSED))}  # fmt: skip
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock: Path = LOCK_FILE) -> str | None:
    first = lock.read_text().splitlines()[0] if lock.is_file() else ""
    return first.removeprefix(INPUTS_PREFIX) if first.startswith(INPUTS_PREFIX) else None


def pins(lock: Path = LOCK_FILE) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every pinned package in the lock."""
    found: dict[str, tuple[str, list[str]]] = {}
    text = lock.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            requirement, *options = line.split()
            name, version = requirement.split("==")
            found[normalize(name)] = (version, [o.removeprefix("--hash=") for o in options])
    return found


def resolve(pyproject: Path = PYPROJECT) -> list[tuple[str, str, str]]:
    """(name, version, sha256) of the runtime requirements' full closure on Lambda's platform."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
             "--ignore-installed", "--target", str(Path(scratch) / "site"), "--report", str(report), *TARGET,
             *runtime_requirements(pyproject)],
            check=True,
        )  # fmt: skip
        installs = json.loads(report.read_text())["install"]
    return [
        (normalize(item["metadata"]["name"]), item["metadata"]["version"],
         item["download_info"]["archive_info"]["hashes"]["sha256"])
        for item in installs
    ]  # fmt: skip


def render(pyproject: Path = PYPROJECT) -> str:
    excluded = {normalize(n) for n in (*PROVIDED_BY_RUNTIME, *UNUSED)}
    lines = [
        f"{INPUTS_PREFIX}{inputs_digest(pyproject)}",
        "# The Lambda layer's packages (cp312, manylinux aarch64), installed with --no-deps --require-hashes.",
        "# Generated by infra/layer_lock.py from pyproject.toml; do not edit. Left out: " + ", ".join(sorted(excluded)),
    ]
    for name, version, sha256 in sorted(resolve(pyproject)):
        if name not in excluded:
            lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha256}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        fresh = recorded_digest() == inputs_digest()
        print("layer lock is current" if fresh else f"{LOCK_FILE.name} is stale: run infra/layer_lock.py")
        return 0 if fresh else 1
    LOCK_FILE.write_text(render())
    print(f"wrote {LOCK_FILE} ({len(pins())} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
