"""Asset bundling without Docker: CDK calls `try_bundle` first and never reaches the Docker image.

- `CopySources` builds the functions' code asset: `functions/` and `mneme/` side by side.
- `PipLayer` builds the dependency layer: `pip install --target <out>/python` of the locked requirements
  (infra/layer-requirements.txt, see layer_lock.py) for Lambda's platform (arm64, CPython 3.12), each
  package at its pinned version and hash, no dependency resolved at synth time.

Both ship bytecode compiled by a CPython 3.12 (`compile_bytecode`): Lambda's file system is read-only, so
a module without a usable `__pycache__/*.cpython-312.pyc` is compiled again on every cold start. Without a
3.12 the bundling fails (and the synth with it) unless the operator asked for source-only assets
(`mneme:source_only_assets`).
"""

from __future__ import annotations

import csv
import glob
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

# Where Lambda extracts the code asset and the layer: the file names compiled into the bytecode, shown
# in tracebacks only when the source is missing (an import from a .py next to its .pyc uses the .py's path).
CODE_ROOT, LAYER_ROOT = "/var/task", "/opt/python"
BUILD_PYTHON_VARIABLE = "MNEME_BUILD_PYTHON"


def build_python() -> str | None:
    """A CPython of Lambda's version (PYTHON_VERSION): $MNEME_BUILD_PYTHON, this interpreter, `python3.12` on
    PATH or pyenv's versions; None when none of them runs as that version."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = [
        os.environ.get(BUILD_PYTHON_VARIABLE),
        sys.executable,
        shutil.which(f"python{PYTHON_VERSION}"),
        *sorted(glob.glob(str(pyenv / f"{PYTHON_VERSION}.*" / "bin" / f"python{PYTHON_VERSION}")), reverse=True),
    ]
    for candidate in filter(None, candidates):
        if runs_as(candidate, PYTHON_VERSION):
            return candidate
    return None


def runs_as(python: str, version: str) -> bool:
    """Whether `python` starts and is CPython `version` (pyenv's shims exist on PATH for versions not
    selected, and fail when run)."""
    probe = "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.split() == ["cpython", version]


class NoBuildPython(RuntimeError):
    """No CPython of Lambda's version to compile the assets with, and source-only assets were not asked for."""


NO_BUILD_PYTHON = (
    f"no CPython {PYTHON_VERSION} (Lambda's Python) to compile the assets' bytecode with; without it every cold "
    "start compiles every module again (about 2.5 times the CPU: bench/cold_start.py). Get one: "
    f"`pyenv install {PYTHON_VERSION}` (found under $PYENV_ROOT/versions), your system's python{PYTHON_VERSION} "
    f"package (e.g. `apt-get install python{PYTHON_VERSION}`), or `uv python install {PYTHON_VERSION}`; or name it "
    f"with {BUILD_PYTHON_VARIABLE}=/path/to/python{PYTHON_VERSION}. To ship sources only anyway: "
    "-c mneme:source_only_assets=true"
)


def compile_bytecode(root: Path, runtime_root: str, *, source_only: bool = False) -> bool:
    """Writes `__pycache__/*.cpython-312.pyc` for every .py under `root` with a CPython 3.12, so Lambda
    imports them instead of compiling each module at every cold start (it cannot write the cache: its file
    system is read-only). Without a 3.12 interpreter it raises `NoBuildPython` (which fails the synth),
    unless `source_only`: then the asset ships sources only and stderr says so. With `source_only` and a
    3.12 found, bytecode is still written. Returns whether bytecode was written.

    Invalidation mode `unchecked-hash` (PEP 552; py_compile.PycInvalidationMode): the default, `timestamp`,
    stores the source's mtime and size, which the import system compares with the file's at every import;
    what mtimes the files carry once zipped, uploaded and extracted by Lambda is not ours to promise, and
    a mismatch makes the pyc stale: ignored, and the module compiled again.
    `checked-hash` would read and hash every source at each import. `unchecked-hash` pycs are used as they
    are, without looking at the source: right for files that never change once deployed.
    """
    python = build_python()
    if python is None and not source_only:
        raise NoBuildPython(f"layer_bundling: {NO_BUILD_PYTHON}")
    if python is None:
        print(
            f"layer_bundling: no CPython {PYTHON_VERSION} found: {root.name} ships sources only "
            "(mneme:source_only_assets), and Lambda compiles them at every cold start",
            file=sys.stderr,
        )
        return False
    done = subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", "-d", runtime_root,
         str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:  # a file that does not compile (compileall goes on with the others) ships as source
        print(f"layer_bundling: some of {root.name} did not compile:\n{done.stdout}{done.stderr}", file=sys.stderr)
    return True


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
    """Copies each source directory to `<output>/<name>` without its bytecode caches, then compiles it for
    Lambda's Python."""

    def __init__(self, sources: Mapping[str, Path], *, source_only: bool = False) -> None:
        self.sources, self.source_only = dict(sources), source_only

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        for name, source in self.sources.items():
            shutil.copytree(source, Path(output_dir) / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        compile_bytecode(Path(output_dir), CODE_ROOT, source_only=self.source_only)
        return True


@jsii.implements(ILocalBundling)
class PipLayer:
    """Installs the lock file into `<output>/python` (a layer's import path), then compiles it for Lambda's
    Python; pip reaches PyPI."""

    def __init__(self, lock_file: Path, *, source_only: bool = False) -> None:
        self.lock_file, self.source_only = lock_file, source_only

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        if not self.source_only and build_python() is None:  # before pip's minutes, not after
            raise NoBuildPython(f"layer_bundling: {NO_BUILD_PYTHON}")
        site = Path(output_dir) / "python"
        self.install(site)
        drop_distributions(site, PROVIDED_BY_RUNTIME)  # none is locked; kept as a guard
        drop_test_suites(site)
        shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: not on a layer's PATH
        compile_bytecode(site, LAYER_ROOT, source_only=self.source_only)
        return True

    def install(self, site: Path) -> None:
        """The locked wheels for arm64 CPython 3.12, without bytecode (compiled after, for that Python)."""
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
             "--no-deps", "--require-hashes", "--target", str(site), *TARGET, "-r", str(self.lock_file)],
            check=True,
        )  # fmt: skip


class LocalBundler(Protocol):
    """What jsii really calls: `try_bundle(output_dir, options)`, options positional (the Python stub of
    ILocalBundling declares them as keywords)."""

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool: ...


def bundling(local: LocalBundler) -> BundlingOptions:
    """CDK requires an image; it is never pulled because `local` bundles or raises."""
    image = DockerImage.from_registry(f"python:{PYTHON_VERSION}")
    return BundlingOptions(image=image, local=cast(ILocalBundling, local))
