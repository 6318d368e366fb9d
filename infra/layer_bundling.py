"""Asset bundling without Docker: CDK calls `try_bundle` first and never reaches the Docker image.

- `CopySources` builds the functions' code asset: `functions/` and `mneme/` side by side.
- `PipLayer` builds the dependency layer: `pip install --target <out>/python` of the locked requirements
  (infra/layer-requirements.txt, see layer_lock.py) for Lambda's platform (arm64, CPython 3.12), each
  package at its pinned version and hash, no dependency resolved at synth time.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, cast

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling

from infra.layer_lock import PROVIDED_BY_RUNTIME, PYTHON_VERSION, TARGET, normalize


def drop_distributions(site: Path, names: Iterable[str]) -> None:
    """Delete the files of installed distributions (listed in their RECORD), e.g. botocore pulled in
    by aws-xray-sdk."""
    wanted = {normalize(name) for name in names}
    root = site.resolve()
    for info in list(site.glob("*.dist-info")):
        if normalize(info.name.removesuffix(".dist-info").rsplit("-", 1)[0]) not in wanted:
            continue
        with (info / "RECORD").open(newline="") as record:
            paths = [(site / row[0]).resolve() for row in csv.reader(record) if row]
        for path in paths:
            if path.is_relative_to(root) and path.is_file():
                path.unlink()
        shutil.rmtree(info, ignore_errors=True)
    for directory, _, _ in sorted(os.walk(site), key=lambda entry: -len(entry[0])):
        if directory != str(site) and not os.listdir(directory):
            os.rmdir(directory)


def drop_test_suites(site: Path) -> list[Path]:
    """Delete the packages' own test suites (`<package>/**/tests`, e.g. numpy's 8 MB): never imported at
    run time. Returns what went."""
    suites = sorted({p for p in site.glob("*/**/tests") if p.is_dir() and not p.name.endswith(".dist-info")})
    for suite in suites:
        shutil.rmtree(suite, ignore_errors=True)
    return suites


@jsii.implements(ILocalBundling)
class CopySources:
    """Copies each source directory to `<output>/<name>`, leaving out bytecode caches."""

    def __init__(self, sources: Mapping[str, Path]) -> None:
        self.sources = dict(sources)

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        for name, source in self.sources.items():
            shutil.copytree(source, Path(output_dir) / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return True


@jsii.implements(ILocalBundling)
class PipLayer:
    """Installs the lock file into `<output>/python` (a layer's import path); pip reaches PyPI."""

    def __init__(self, lock_file: Path) -> None:
        self.lock_file = lock_file

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        site = Path(output_dir) / "python"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
             "--no-deps", "--require-hashes", "--target", str(site), *TARGET, "-r", str(self.lock_file)],
            check=True,
        )  # fmt: skip
        drop_distributions(site, PROVIDED_BY_RUNTIME)  # none is locked; kept as a guard
        drop_test_suites(site)
        shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: not on a layer's PATH
        return True


class LocalBundler(Protocol):
    """What jsii really calls: `try_bundle(output_dir, options)`, options positional (the Python stub of
    ILocalBundling declares them as keywords)."""

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool: ...


def bundling(local: LocalBundler) -> BundlingOptions:
    """CDK requires an image; it is never pulled because `local` bundles or raises."""
    image = DockerImage.from_registry(f"python:{PYTHON_VERSION}")
    return BundlingOptions(image=image, local=cast(ILocalBundling, local))
