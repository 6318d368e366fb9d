"""The TypeScript client (clients/typescript): its generated types are those of docs/openapi.json, and its
own tests (node's test runner) pass against a `mneme serve` they start. A change to the API that breaks
the client fails here. Needs Node 20+ and `make clients/typescript/node_modules/.installed`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"


@pytest.fixture(scope="module")
def installed() -> Path:
    assert (CLIENT / "node_modules" / ".installed").exists(), "run `make clients/typescript/node_modules/.installed`"
    return CLIENT


def test_the_generated_types_are_not_stale(installed: Path, tmp_path: Path) -> None:
    # Given the committed src/schema.d.ts, When openapi-typescript regenerates it from docs/openapi.json
    fresh = tmp_path / "schema.d.ts"
    generator = installed / "node_modules" / ".bin" / "openapi-typescript"
    subprocess.run(
        [generator, str(ROOT / "docs" / "openapi.json"), "--default-non-nullable", "false", "--output", str(fresh)],
        cwd=installed, check=True, capture_output=True,
    )  # fmt: skip
    # Then nothing changed: `cd clients/typescript && npm run generate` after changing the API
    assert fresh.read_text() == (installed / "src" / "schema.d.ts").read_text(), "run `npm run generate`"


def test_the_typescript_client_passes_its_tests_against_mneme_serve(installed: Path) -> None:
    done = subprocess.run(
        ["npm", "test", "--silent"], cwd=installed, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MNEME_PYTHON": sys.executable},
    )  # fmt: skip
    summary = dict(re.findall(r"^# (pass|fail) (\d+)$", done.stdout, re.M))
    assert done.returncode == 0 and summary.get("fail") == "0", done.stdout[-4000:] + done.stderr[-2000:]
    assert int(summary["pass"]) >= 8
