"""Artifacts a user can install (issue 45): `make dist` builds Mneme's and the SDK's wheels and sdists and the
TypeScript package's tarball, checked by twine and npm; from those files alone, Mneme and the SDK install into
fresh virtual environments and the TypeScript client into a fresh Node project, and each works against a
running server."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from mneme import cli

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    "mneme-0.1.0-py3-none-any.whl",
    "mneme-0.1.0.tar.gz",
    "mneme-client-0.1.0.tgz",
    "mneme_sdk-0.1.0-py3-none-any.whl",
    "mneme_sdk-0.1.0.tar.gz",
]
SDK_CHECK = """
import sys
from mneme_sdk import Client
with Client(sys.argv[1], sys.argv[2]) as mneme:
    print(mneme.health().status, mneme.recall("diet", scope="root.users.new-user").warnings)
"""
TS_CHECK = """
import { Mneme } from "mneme-client";
const mneme = new Mneme({ baseUrl: process.argv[2], apiKey: process.argv[3] });
const answer = await mneme.recall("diet", { scope: "root.users.new-user" });
console.log((await mneme.health()).status, JSON.stringify(answer.warnings));
"""


def run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    printed = run("make", "dist", f"DIST={out}", cwd=ROOT)
    assert printed.count("PASSED") == 4  # twine check --strict, each wheel and sdist
    return out


def fresh_venv(folder: Path) -> Path:
    run(sys.executable, "-m", "venv", folder)
    return folder / "bin"


def test_make_dist_builds_every_release_file_with_what_it_must_hold(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == FILES
    with zipfile.ZipFile(dist / "mneme-0.1.0-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        assert {"functions/recall.py", "mneme/bootstrap.py", "mneme/assets/console/index.html"} <= names
        assert wheel.read("mneme/assets/openapi.json") == (ROOT / "docs" / "openapi.json").read_bytes()
        assert not any(name.startswith("tests/") for name in names)
    with zipfile.ZipFile(dist / "mneme_sdk-0.1.0-py3-none-any.whl") as wheel:
        assert {"mneme_sdk/strands.py", "mneme_sdk/langgraph.py", "mneme_sdk/py.typed"} <= set(wheel.namelist())
        metadata = wheel.read("mneme_sdk-0.1.0.dist-info/METADATA").decode()
        assert "Provides-Extra: strands" in metadata and "Provides-Extra: examples" in metadata
    with tarfile.open(dist / "mneme-client-0.1.0.tgz") as package:
        names = set(package.getnames())
        assert {"package/dist/src/index.js", "package/dist/src/index.d.ts", "package/package.json"} <= names
        assert not any("/test/" in name for name in names)


def test_mneme_and_the_sdk_install_from_the_wheels_into_a_fresh_venv(
    dist: Path, server: str, home: Path, tmp_path: Path
) -> None:
    # Given a fresh virtual environment and nothing but the release files (their dependencies from the index)
    bin_ = fresh_venv(tmp_path / "venv")
    run(bin_ / "pip", "install", "--quiet", "--find-links", dist, dist / "mneme-0.1.0-py3-none-any.whl")
    # Then Mneme's CLI is there and prints the API document it serves, and the SDK talks to a running server
    assert run(bin_ / "mneme", "openapi") == (ROOT / "docs" / "openapi.json").read_text()
    key = cli.ensure_first_run()[0].read_text().strip()
    assert run(bin_ / "python", "-c", SDK_CHECK, server, key) == "ok ['scope_not_found']\n"


def test_the_sdk_installs_from_its_sdist(dist: Path, server: str, home: Path, tmp_path: Path) -> None:
    bin_ = fresh_venv(tmp_path / "venv")
    run(bin_ / "pip", "install", "--quiet", dist / "mneme_sdk-0.1.0.tar.gz")
    key = cli.ensure_first_run()[0].read_text().strip()
    assert run(bin_ / "python", "-c", SDK_CHECK, server, key) == "ok ['scope_not_found']\n"


def test_the_typescript_package_installs_into_a_fresh_node_project(
    dist: Path, server: str, home: Path, tmp_path: Path
) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"name": "my-agent", "private": True, "type": "module"}))
    run("npm", "install", "--no-audit", "--no-fund", "--loglevel=error", dist / "mneme-client-0.1.0.tgz", cwd=tmp_path)
    (tmp_path / "check.js").write_text(TS_CHECK)
    key = cli.ensure_first_run()[0].read_text().strip()
    assert run("node", "check.js", server, key, cwd=tmp_path) == 'ok ["scope_not_found"]\n'
