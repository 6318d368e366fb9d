"""The SDK as a distribution: its wheel, its dependencies and what importing it loads (no network)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_typed_package_and_needs_only_httpx_and_pydantic(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
         str(ROOT / "clients" / "python")],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("mneme_sdk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    assert {"mneme_sdk/py.typed", "mneme_sdk/client.py", "mneme_sdk/models.py", "mneme_sdk/errors.py"} <= names
    assert not any(name.startswith("mneme/") for name in names)  # none of the server
    required = [r.split(";")[0] for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert sorted(r.split(">")[0].split("=")[0].split("<")[0] for r in required) == ["httpx", "pydantic"]
    assert metadata["Name"] == "mneme-sdk"


def test_importing_the_sdk_loads_neither_numpy_nor_the_server() -> None:
    code = (
        "import sys, mneme_sdk; from mneme_sdk import Client, AsyncClient, MnemeError; import mneme_sdk.models; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'numpy', 'mneme', 'boto3', 'asyncio'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]"
