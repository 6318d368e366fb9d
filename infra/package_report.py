"""Packaging check on a synthesized cloud assembly (infra/synth.sh runs it on infra/cdk.out).

Prints the unzipped size of every Lambda asset (function code and layers) and, per function, of its code
plus its layers, which is what Lambda's 250 MB unzipped limit applies to. Fails (exit 1) when a function
exceeds the limit or an asset ships a package that must never reach Lambda: torch, onnxruntime (the local
embedding model's runtime) or the CDK itself (aws_cdk, jsii).

    .venv/bin/python infra/package_report.py [infra/cdk.out]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

LIMIT_BYTES = 250 * 1024 * 1024
FORBIDDEN = ("torch", "onnxruntime", "aws_cdk", "jsii")
LAMBDA_TYPES = ("AWS::Lambda::Function", "AWS::Lambda::LayerVersion")


@dataclass
class Report:
    assets: dict[str, int] = field(default_factory=dict)  # asset folder -> bytes
    functions: dict[str, int] = field(default_factory=dict)  # function logical id -> code + layers bytes
    problems: list[str] = field(default_factory=list)


def tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def largest_parts(root: Path, count: int = 8) -> list[tuple[str, int]]:
    """The biggest top-level entries of an asset (a layer's `python/` is looked into), largest first."""
    base = root / "python" if (root / "python").is_dir() else root
    sizes = [(p.name, tree_size(p) if p.is_dir() else p.stat().st_size) for p in base.iterdir()]
    return sorted(sizes, key=lambda item: -item[1])[:count]


def forbidden_in(root: Path) -> list[str]:
    """Forbidden packages anywhere in the asset, as import packages or installed distributions."""
    found = []
    for path in root.rglob("*"):
        name = path.name.lower()
        stem = name.removesuffix(".dist-info").rsplit("-", 1)[0] if name.endswith(".dist-info") else name
        top = stem.replace("-", "_").split(".")[0]  # aws_cdk.asset_awscli_v1, aws_cdk_lib, onnxruntime_gpu
        if path.is_dir() and any(top == f or top.startswith(f + "_") for f in FORBIDDEN):
            found.append(str(path.relative_to(root)))
    return found


def report(assembly: Path, limit_bytes: int = LIMIT_BYTES) -> Report:
    result = Report()
    for template_path in sorted(assembly.glob("*.template.json")):
        resources = json.loads(template_path.read_text())["Resources"]
        lambda_resources = {lid: r for lid, r in resources.items() if r["Type"] in LAMBDA_TYPES}
        asset_of = {lid: r.get("Metadata", {}).get("aws:asset:path") for lid, r in lambda_resources.items()}
        for asset in sorted({a for a in asset_of.values() if a}):
            result.assets[asset] = tree_size(assembly / asset)
            result.problems += [f"{asset}: ships {p}" for p in forbidden_in(assembly / asset)]
        for lid, r in lambda_resources.items():
            if r["Type"] != "AWS::Lambda::Function" or not asset_of[lid]:
                continue
            layers = [layer["Ref"] for layer in r["Properties"].get("Layers", []) if "Ref" in layer]
            total = result.assets[asset_of[lid]] + sum(result.assets.get(asset_of.get(x) or "", 0) for x in layers)
            result.functions[lid] = total
            if total > limit_bytes:
                result.problems.append(f"{lid}: {total / 2**20:.1f} MB unzipped with its layers (limit 250 MB)")
    if not result.assets:
        result.problems.append(f"no Lambda assets in {assembly}: run infra/synth.sh first (bundling enabled)")
    return result


def main(argv: list[str]) -> int:
    assembly = Path(argv[0]) if argv else Path(__file__).resolve().parent / "cdk.out"
    found = report(assembly)
    for asset, size in found.assets.items():
        print(f"asset {asset[:18]}…  {size / 2**20:8.1f} MB unzipped")
        parts = largest_parts(assembly / asset)
        print("    largest: " + ", ".join(f"{name} {part / 2**20:.1f} MB" for name, part in parts))
    for function, size in sorted(found.functions.items()):
        print(f"function {function:<48} {size / 2**20:8.1f} MB with layers")
    for problem in found.problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if found.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
