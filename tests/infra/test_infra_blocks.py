"""Config from CDK context, the function registry and the Docker-free bundlers, without a synth."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from pydantic import ValidationError

from infra import layer_bundling
from infra.layer_bundling import CopySources, PipLayer, bundling, drop_distributions, drop_test_suites
from infra.layer_lock import runtime_requirements
from infra.mneme_infra.access import bedrock_model_arns, is_inference_profile
from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.functions import Functions
from infra.mneme_infra.search import Search
from infra.mneme_infra.specs import EXTRA_FUNCTIONS, REPO, SPECS
from mneme.http.routes import FUNCTIONS
from mneme.settings import BedrockEmbedderSettings, BedrockReasonerSettings

PYPROJECT = REPO / "pyproject.toml"


def config_from(context: dict[str, object]) -> InfraConfig:
    return InfraConfig.from_context(App(context=context).node)


def test_config_defaults_protect_data() -> None:
    config = config_from({})
    assert (config.stage, config.removal, config.protect_data) == ("dev", RemovalPolicy.RETAIN, True)
    assert config.authorizer_cache_seconds == 300


def test_config_reads_prefixed_context_and_coerces_cli_strings() -> None:
    config = config_from({"mneme:stage": "alice", "mneme:log_retention_days": "7", "other:key": "ignored"})
    assert (config.stage, config.log_retention_days) == ("alice", 7)


def test_config_defaults_match_the_application_settings() -> None:
    config = config_from({})
    embedder, reasoner = BedrockEmbedderSettings(kind="bedrock"), BedrockReasonerSettings(kind="bedrock")
    assert (config.embedding_model_id, config.embedding_dimensions) == (embedder.model_id, embedder.dimensions)
    assert config.reasoner_model_id == reasoner.model_id
    assert (config.consolidation_schedule, config.map_concurrency, config.max_batches_per_scope) == (
        "rate(15 minutes)",
        4,
        50,
    )
    assert config.collection_name == "mneme-dev-sa"
    assert config_from({"mneme:stage": "alice"}).collection_name == "mneme-alice-sa"


def test_collection_name_changes_with_every_create_only_setting_and_fits_the_policy_names() -> None:
    """A new name is what lets CloudFormation replace the collection instead of rolling back."""
    names = {
        config_from({**standby, **key}).collection_name
        for standby in ({}, {"mneme:search_standby_replicas": "false"})
        for key in ({}, {"mneme:search_encryption": "customer_managed"})
    }
    assert names == {"mneme-dev-sa", "mneme-dev-sk", "mneme-dev-na", "mneme-dev-nk"}
    assert config_from({"mneme:search_collection_name": "memory"}).collection_name == "memory-sa"
    with pytest.raises(ValidationError, match="search_collection_name"):  # mneme-<20 chars>-sa-data: 35 > 32
        config_from({"mneme:stage": "a-stage-of-twenty-ch"})
    stage = config_from({"mneme:stage": "a-stage-of-twenty-ch", "mneme:search_collection_name": "mneme-long"})
    assert stage.collection_name == "mneme-long-sa"


@pytest.mark.parametrize("schedule", ["rate(1 minute)", "rate(15 minutes)", "rate(2 hours)", "cron(0 3 * * ? *)"])
def test_config_accepts_scheduler_expressions(schedule: str) -> None:
    assert config_from({"mneme:consolidation_schedule": schedule}).consolidation_schedule == schedule


@pytest.mark.parametrize(
    "context",
    [
        {"mneme:stag": "typo"},
        {"mneme:log_retention_days": "10"},
        {"mneme:stage": "Prod_1"},
        {"mneme:removal_policy": "snapshot"},
        {"mneme:consolidation_schedule": "rate(1 minutes)"},
        {"mneme:consolidation_schedule": "every 15 minutes"},
        {"mneme:embedding_dimensions": "384"},
        {"mneme:embedding_model_id": "Titan v2"},
        {"mneme:map_concurrency": "0"},
        {"mneme:search_collection_name": "x"},
        {"mneme:search_collection_name": "a-name-that-is-far-too-long-for-aoss"},
        {"mneme:alarm_email": "not-an-address"},
    ],
)
def test_config_rejects_unknown_keys_and_bad_values(context: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        config_from(context)


def test_every_function_has_a_spec_and_its_handler_exists() -> None:
    import importlib

    for name in [*FUNCTIONS, *EXTRA_FUNCTIONS]:
        assert name in SPECS, "add a FunctionSpec (memory, timeout, table access) to infra/mneme_infra/functions.py"
        module, handler = SPECS[name].entry(name)
        assert callable(getattr(importlib.import_module(f"functions.{module}"), handler)), name


def test_a_function_without_a_spec_fails_the_synth() -> None:
    stack = Stack(App(context={"aws:cdk:bundling-stacks": []}), "S")
    table = dynamodb.Table(stack, "T", partition_key=dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING))
    search = Search(stack, "Search", config=InfraConfig())
    with pytest.raises(ValueError, match="FunctionSpec"):
        Functions(stack, "F", config=InfraConfig(), table=table, search=search, names=["no_such_function"])


@pytest.mark.parametrize(
    ("model_id", "profile"),
    [("amazon.titan-embed-text-v2:0", False), ("us.anthropic.claude-3-5-haiku-20241022-v1:0", True),
     ("global.anthropic.claude-sonnet-4-20250514-v1:0", True), ("cohere.embed-english-v3", False)],
)  # fmt: skip
def test_bedrock_arns_distinguish_models_from_inference_profiles(model_id: str, profile: bool) -> None:
    stack = Stack(App(), "S")
    arns = [stack.resolve(arn) for arn in bedrock_model_arns(stack, model_id)]
    assert is_inference_profile(model_id) is profile
    assert len(arns) == (2 if profile else 1)
    assert ("inference-profile/" + model_id in str(arns)) is profile
    assert "foundation-model/" + (model_id.split(".", 1)[1] if profile else model_id) in str(arns)


def test_layer_requirements_are_the_project_dependencies_without_boto3() -> None:
    requirements = runtime_requirements(PYPROJECT)
    names = {req.split("[")[0].split(">")[0].split("=")[0].strip() for req in requirements}
    assert "boto3" not in names
    assert {"aws-lambda-powertools", "pydantic", "pydantic-settings", "numpy"} <= names


def test_drop_distributions_removes_recorded_files_only(tmp_path: Path) -> None:
    for dist, module in (("botocore-1.0", "botocore"), ("numpy-2.0", "numpy")):
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text("")
        (tmp_path / f"{dist}.dist-info").mkdir()
        (tmp_path / f"{dist}.dist-info" / "RECORD").write_text(f"{module}/__init__.py,,\n{dist}.dist-info/RECORD,,\n")
    drop_distributions(tmp_path, ["botocore"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["numpy", "numpy-2.0.dist-info"]


def test_drop_test_suites_removes_packages_tests_only(tmp_path: Path) -> None:
    for path in ("numpy/_core/tests/test_a.py", "numpy/tests/test_b.py", "numpy/testing/__init__.py",
                 "numpy/_core/multiarray.py", "pydantic/__init__.py"):  # fmt: skip
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert {p.relative_to(tmp_path).as_posix() for p in drop_test_suites(tmp_path)} == {"numpy/_core/tests",
                                                                                         "numpy/tests"}  # fmt: skip
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")) == [
        "numpy/_core/multiarray.py", "numpy/testing/__init__.py", "pydantic/__init__.py"]  # fmt: skip


LAMBDA_PYTHON = layer_bundling.build_python()
needs_lambda_python = pytest.mark.skipif(
    LAMBDA_PYTHON is None, reason="no CPython 3.12 (MNEME_BUILD_PYTHON, python3.12 on PATH, pyenv) to compile with"
)
# Run by Lambda's Python: every .py has a pyc of that version, hash-based and unchecked (flags 0b01), of this
# very source; imported with the sources replaced, the modules still load, so the import system used the pycs.
CHECK_BYTECODE = """
import importlib.util, json, pathlib, sys
root = pathlib.Path(sys.argv[1])
problems = []
for source in sorted(root.rglob("*.py")):
    pyc = pathlib.Path(importlib.util.cache_from_source(str(source)))
    if not pyc.is_file():
        problems.append(f"no pyc: {source.relative_to(root)}")
        continue
    header = pyc.read_bytes()[:16]
    expected = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + importlib.util.source_hash(source.read_bytes())
    if header != expected:
        problems.append(f"not an unchecked-hash pyc of this source: {pyc.relative_to(root)}")
for source in root.rglob("*.py"):
    source.write_text("raise SystemExit('compiled at import: ' + __name__)")
sys.path.insert(0, str(root))
for module in sys.argv[2:]:
    __import__(module)
print(json.dumps(problems))
"""


def lambda_bytecode_problems(root: Path, *modules: str) -> list[str]:
    assert LAMBDA_PYTHON is not None
    done = subprocess.run([LAMBDA_PYTHON, "-c", CHECK_BYTECODE, str(root), *modules], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    problems: list[str] = json.loads(done.stdout)
    return problems


@needs_lambda_python
def test_code_asset_ships_lambdas_bytecode_for_every_module_and_not_the_developers(tmp_path: Path) -> None:
    # Given a developer's tree with bytecode of their own Python in __pycache__
    sources = tmp_path / "src"
    for name in ("functions", "mneme"):
        (sources / name).mkdir(parents=True)
    (sources / "mneme" / "__init__.py").write_text("")
    (sources / "mneme" / "errors.py").write_text("class Refused(Exception):\n    pass\n")
    (sources / "functions" / "__init__.py").write_text("")
    (sources / "functions" / "retrieve.py").write_text("from mneme.errors import Refused\n")
    (sources / "mneme" / "__pycache__").mkdir()
    (sources / "mneme" / "__pycache__" / "errors.cpython-311.pyc").write_bytes(b"stale")
    # When the code asset is bundled
    local = CopySources({name: sources / name for name in ("functions", "mneme")})
    output = tmp_path / "asset"
    assert local.try_bundle(str(output), bundling(local)) is True
    # Then Lambda's Python imports the functions from bytecode, never compiling on its read-only disk
    assert lambda_bytecode_problems(output, "functions.retrieve") == []
    assert not list(output.rglob("*.cpython-311.pyc"))


@needs_lambda_python
def test_code_asset_holds_functions_and_the_domain_package_compiled(tmp_path: Path) -> None:
    sources = {"functions": REPO / "functions", "mneme": REPO / "shared" / "mneme"}
    local = CopySources(sources)
    assert local.try_bundle(str(tmp_path), bundling(local)) is True
    assert (tmp_path / "functions" / "retrieve.py").is_file()
    assert (tmp_path / "mneme" / "http/routes.py").is_file()
    assert lambda_bytecode_problems(tmp_path, "mneme.errors") == []


class FakePipLayer(PipLayer):
    """pip without PyPI: installs a small package, with a test suite the layer leaves out."""

    def install(self, site: Path) -> None:
        for path, text in {"events/__init__.py": "from events.core import fire\n", "events/core.py": "fire = 1\n",
                           "events/tests/test_core.py": "assert False\n"}.items():  # fmt: skip
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            (site / path).write_text(text)


@needs_lambda_python
def test_layer_ships_lambdas_bytecode_for_every_module(tmp_path: Path) -> None:
    local = FakePipLayer(tmp_path / "unused.txt")
    assert local.try_bundle(str(tmp_path / "layer"), bundling(local)) is True
    site = tmp_path / "layer" / "python"
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*.pyc")) == [
        "events/__pycache__/__init__.cpython-312.pyc", "events/__pycache__/core.cpython-312.pyc"]  # fmt: skip
    assert lambda_bytecode_problems(site, "events") == []


def test_without_lambdas_python_bundling_fails_and_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layer_bundling, "build_python", lambda: None)
    local = FakePipLayer(tmp_path / "unused.txt")
    with pytest.raises(layer_bundling.NoBuildPython, match=r"pyenv install 3\.12.*source_only_assets=true"):
        local.try_bundle(str(tmp_path / "layer"), bundling(local))


def test_source_only_assets_ship_sources_when_the_operator_asks_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(layer_bundling, "build_python", lambda: None)
    local = FakePipLayer(tmp_path / "unused.txt", source_only=True)
    assert local.try_bundle(str(tmp_path / "layer"), bundling(local)) is True
    assert (tmp_path / "layer" / "python" / "events" / "core.py").is_file()
    assert not list(tmp_path.rglob("*.pyc"))
    assert "ships sources only (mneme:source_only_assets)" in capsys.readouterr().err


def test_a_synth_without_lambdas_python_fails_unless_source_only_assets_are_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole app, assets bundled as `cdk synth` bundles them (the layer's pip swapped for a tiny package)."""
    from infra.mneme_infra.stack import build_app
    from tests.infra.synth import CDK_JSON

    monkeypatch.setattr(layer_bundling, "build_python", lambda: None)
    monkeypatch.setattr(PipLayer, "install", FakePipLayer.install)
    context = json.loads(CDK_JSON.read_text())["context"]
    with pytest.raises(Exception, match=r"no CPython 3\.12"):
        build_app(context, str(tmp_path / "refused"))
    app, _ = build_app({**context, "mneme:source_only_assets": "true"}, str(tmp_path / "sources"))
    app.synth()
    code = [p.parent for p in (tmp_path / "sources").glob("asset.*/functions")]
    assert code and (code[0] / "mneme" / "http/routes.py").is_file() and not list(code[0].rglob("*.pyc"))


def test_build_python_is_a_runnable_cpython_312(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a pyenv shim on PATH that fails when run, and a variable naming a missing file, are passed over
    shim = tmp_path / "python3.12"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("MNEME_BUILD_PYTHON", str(tmp_path / "missing"))
    found = layer_bundling.build_python()
    assert found != str(shim) and found != str(tmp_path / "missing")
    assert found is None or layer_bundling.runs_as(found, "3.12")
