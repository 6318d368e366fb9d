"""Asset bundling without Docker: CDK calls `try_bundle` first and never reaches the Docker image.

- `CopySources` builds the functions' code asset: `functions/` and `mneme/` side by side.
- `PipLayer` builds the dependency layer: `pip install --target <out>/python` of the runtime
  requirements for Lambda's platform (arm64, CPython 3.12), minus what the runtime already ships.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, cast

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling

# Lambda's Python runtime provides boto3 and its dependencies; a second copy would shadow them.
PROVIDED_BY_RUNTIME = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")
PYTHON_VERSION = "3.12"
# manylinux2014 for older wheels, manylinux_2_28 for newer ones (numpy >= 2.3); AL2023 has glibc 2.34.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: Path) -> list[str]:
    """The project's `[project].dependencies`, without the packages the Lambda runtime provides."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    provided = {_normalize(name) for name in PROVIDED_BY_RUNTIME}
    return [req for req in dependencies if _normalize(re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]) not in provided]


def drop_distributions(site: Path, names: Iterable[str]) -> None:
    """Delete the files of installed distributions (listed in their RECORD), e.g. botocore pulled in
    by aws-xray-sdk."""
    wanted = {_normalize(name) for name in names}
    root = site.resolve()
    for info in list(site.glob("*.dist-info")):
        if _normalize(info.name.removesuffix(".dist-info").rsplit("-", 1)[0]) not in wanted:
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
    """Installs `requirements` into `<output>/python` (a layer's import path); pip reaches PyPI."""

    def __init__(self, requirements: Sequence[str]) -> None:
        self.requirements = list(requirements)

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        site = Path(output_dir) / "python"
        platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
             "--target", str(site), "--implementation", "cp", "--python-version", PYTHON_VERSION,
             "--only-binary=:all:", *platforms, *self.requirements],
            check=True,
        )  # fmt: skip
        drop_distributions(site, PROVIDED_BY_RUNTIME)
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
