"""What a deployed function can import, rebuilt on this machine: the code asset, the locked layer and
the packages Lambda's Python runtime provides, each in its own directory.

The layer's wheels are built for arm64 (infra/layer_bundling.PipLayer) and do not load on this x86_64
host, so the same distributions are copied from the development environment, file by file as their
dist-info RECORD lists them, after checking that each is the version the lock pins.
"""

from __future__ import annotations

import csv
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from infra.layer_bundling import CopySources
from infra.layer_lock import LOCK_FILE, PROVIDED_BY_RUNTIME, normalize, pins
from infra.mneme_infra.functions import CODE_SOURCES

# Pins this interpreter cannot install, and the version that stands in for them (same major version).
# numpy 2.5 requires Python >= 3.12 (Lambda runs 3.12); this machine's 3.11 has the 2.4 line at most.
STAND_INS = {"numpy": "2.4"}


@dataclass(frozen=True)
class LambdaPaths:
    code: Path  # /var/task
    layer: Path  # /opt/python
    runtime: Path  # what the runtime puts on the path: boto3 and its dependencies

    @property
    def import_path(self) -> list[str]:
        return [str(self.code), str(self.layer), str(self.runtime)]


def version_mismatches(names: list[str] | None = None) -> list[str]:
    """Each locked distribution whose installed version is not the pin (nor its stand-in), described."""
    found = []
    for name, (pinned, _) in sorted(pins(LOCK_FILE).items()):
        if names is not None and name not in names:
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            found.append(f"{name}: the lock pins {pinned}, the environment has none")
            continue
        stand_in = STAND_INS.get(name)
        if installed != pinned and not (stand_in and installed.startswith(stand_in + ".")):
            found.append(f"{name}: the lock pins {pinned}, the environment has {installed}")
    return found


def copy_distribution(name: str, target: Path) -> int:
    """Copy the files an installed distribution's RECORD lists (its dist-info included) under `target`;
    returns how many. Scripts installed outside site-packages (`../../bin`) and bytecode are left out."""
    distribution = metadata.distribution(name)
    site = Path(str(distribution.locate_file(""))).resolve()
    record = distribution.read_text("RECORD")
    assert record is not None, f"{name} has no RECORD"
    copied = 0
    for row in csv.reader(record.splitlines()):
        if not row:
            continue
        source = (site / row[0]).resolve()
        if not source.is_relative_to(site) or "__pycache__" in source.parts or not source.is_file():
            continue
        destination = target / source.relative_to(site)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        copied += 1
    return copied


def build(root: Path, *, leave_out: tuple[str, ...] = ()) -> LambdaPaths:
    """The three directories under `root`; `leave_out` drops locked distributions (to see a scenario fail)."""
    paths = LambdaPaths(root / "task", root / "opt" / "python", root / "runtime")
    # sources only: the tier imports them with this interpreter, which a 3.12 pyc would not serve anyway
    CopySources(CODE_SOURCES, source_only=True).try_bundle(str(paths.code), None)  # type: ignore[arg-type]
    for name in pins(LOCK_FILE):
        if name not in {normalize(n) for n in leave_out}:
            copy_distribution(name, paths.layer)
    for name in PROVIDED_BY_RUNTIME:
        copy_distribution(name, paths.runtime)
    return paths
