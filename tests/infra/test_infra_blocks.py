"""Config from CDK context, the function registry and the Docker-free bundlers, without a synth."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from pydantic import ValidationError

from infra.layer_bundling import CopySources, bundling, drop_distributions, runtime_requirements
from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.functions import REPO, SPECS, Functions
from mneme.routes import FUNCTIONS

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


@pytest.mark.parametrize(
    "context",
    [
        {"mneme:stag": "typo"},
        {"mneme:log_retention_days": "10"},
        {"mneme:stage": "Prod_1"},
        {"mneme:removal_policy": "snapshot"},
    ],
)
def test_config_rejects_unknown_keys_and_bad_values(context: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        config_from(context)


def test_every_function_of_the_route_table_has_a_spec_and_a_module() -> None:
    missing = [name for name in FUNCTIONS if name not in SPECS or not (REPO / "functions" / f"{name}.py").is_file()]
    assert missing == [], "add a FunctionSpec (memory, timeout, table access) to infra/mneme_infra/functions.py"


def test_a_function_without_a_spec_fails_the_synth() -> None:
    stack = Stack(App(context={"aws:cdk:bundling-stacks": []}), "S")
    table = dynamodb.Table(stack, "T", partition_key=dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING))
    with pytest.raises(ValueError, match="FunctionSpec"):
        Functions(stack, "F", config=InfraConfig(), table=table, names=["no_such_function"])


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


def test_code_asset_holds_functions_and_the_domain_package_without_caches(tmp_path: Path) -> None:
    sources = {"functions": REPO / "functions", "mneme": REPO / "shared" / "mneme"}
    local = CopySources(sources)
    assert local.try_bundle(str(tmp_path), bundling(local)) is True
    assert (tmp_path / "functions" / "retrieve.py").is_file()
    assert (tmp_path / "mneme" / "routes.py").is_file()
    assert not list(tmp_path.rglob("__pycache__"))
