"""A client generated from docs/openapi.json by a standard generator (openapi-python-client) type-checks
against the spec and serves one call per route against the local server.

The client is generated at test time into a temporary folder (generated code is not committed). The test
is skipped, saying why, only when the generator is not installed (`pip install openapi-python-client`).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mneme import cli
from mneme.http import routes

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "openapi.json"
DRIVER = Path(__file__).resolve().parent / "generated" / "driver.py"
BIN = Path(sys.executable).parent
GENERATOR = shutil.which("openapi-python-client") or str(BIN / "openapi-python-client")
# The generator names a model's local variable after the model; `Layers` with a field `layers` shadows it.
CONFIG = {"class_overrides": {"Layers": {"class_name": "LayersOperation", "module_name": "layers_operation"}}}
# The generator's own client.py forwards `*args: object` to httpx's typed __exit__: its defect, not the spec's.
MYPY_INI = "[mypy]\nstrict = True\n[mypy-mneme_api.client]\ndisable_error_code = arg-type\n"

pytestmark = pytest.mark.skipif(
    not Path(GENERATOR).exists(), reason="openapi-python-client is not installed (pip install openapi-python-client)"
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generated")
    (folder / "config.json").write_text(json.dumps(CONFIG))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # its post-hooks run ruff
    subprocess.run(
        [GENERATOR, "generate", "--path", str(DOCUMENT), "--output-path", str(folder / "mneme_api"),
         "--meta", "none", "--config", str(folder / "config.json")],
        check=True, capture_output=True, env=env, timeout=300,
    )  # fmt: skip
    shutil.copy(DRIVER, folder / "driver.py")
    (folder / "mypy.ini").write_text(MYPY_INI)
    return folder


@pytest.fixture
def importable(generated: Path) -> Iterator[None]:
    sys.path.insert(0, str(generated))
    yield
    sys.path.remove(str(generated))
    for name in [name for name in sys.modules if name == "driver" or name.startswith("mneme_api")]:
        del sys.modules[name]


def test_the_generated_client_and_one_call_per_route_type_check_under_mypy_strict(generated: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental", "--cache-dir", os.devnull,
         "mneme_api", "driver.py"],
        cwd=generated, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_generated_client_calls_every_route_of_the_local_server(server: str, importable: None) -> None:
    # Given the local server and its admin key
    key_file, _ = cli.ensure_first_run()
    driver = importlib.import_module("driver")
    # When the generated client calls every operation
    called = driver.drive(server, key_file.read_text().strip())
    # Then every route of the table was served with the answer its spec declares
    assert sorted(called) == sorted(f"{route.method} {route.path}" for route in routes.ROUTES)
