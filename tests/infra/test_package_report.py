"""infra/package_report.py on a small hand-made cloud assembly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.package_report import largest_parts, main, report


def assembly(tmp_path: Path, *, layer_package: str = "numpy", code_bytes: int = 1000) -> Path:
    (tmp_path / "asset.code" / "functions").mkdir(parents=True)
    (tmp_path / "asset.code" / "functions" / "recall.py").write_bytes(b"x" * code_bytes)
    (tmp_path / "asset.layer" / "python" / layer_package).mkdir(parents=True)
    (tmp_path / "asset.layer" / "python" / layer_package / "__init__.py").write_bytes(b"y" * 500)
    template = {
        "Resources": {
            "Layer": {"Type": "AWS::Lambda::LayerVersion", "Metadata": {"aws:asset:path": "asset.layer"}},
            "Recall": {
                "Type": "AWS::Lambda::Function",
                "Metadata": {"aws:asset:path": "asset.code"},
                "Properties": {"Layers": [{"Ref": "Layer"}]},
            },
            "Table": {"Type": "AWS::DynamoDB::Table"},
        }
    }
    (tmp_path / "Mneme-dev.template.json").write_text(json.dumps(template))
    return tmp_path


def test_sizes_each_asset_and_each_function_with_its_layers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    found = report(assembly(tmp_path))
    assert found.assets == {"asset.code": 1000, "asset.layer": 500}
    assert found.functions == {"Recall": 1500}
    assert found.problems == []
    assert main([str(tmp_path)]) == 0
    assert "Recall" in capsys.readouterr().out


def test_lists_a_layers_largest_packages_first(tmp_path: Path) -> None:
    layer = assembly(tmp_path) / "asset.layer"
    (layer / "python" / "big").mkdir()
    (layer / "python" / "big" / "core.so").write_bytes(b"z" * 2000)
    assert largest_parts(layer) == [("big", 2000), ("numpy", 500)]


def test_fails_over_the_size_limit(tmp_path: Path) -> None:
    (problem,) = report(assembly(tmp_path), limit_bytes=1200).problems
    assert "Recall" in problem and "limit 250 MB" in problem


@pytest.mark.parametrize("package", ["torch", "onnxruntime", "aws_cdk", "aws_cdk_lib-2.275.0.dist-info", "jsii"])
def test_fails_when_an_asset_ships_a_forbidden_package(tmp_path: Path, package: str) -> None:
    (problem,) = report(assembly(tmp_path, layer_package=package)).problems
    assert problem.startswith("asset.layer: ships")
    assert main([str(tmp_path)]) == 1


def test_fails_without_assets(tmp_path: Path) -> None:
    assert report(tmp_path).problems
