"""Cold start per Lambda function, as the synthesized template defines it: import + first request, in CPU time.

For every function of the template, RUNS fresh Python processes each import the function's module with
exactly its template environment (tokens resolved to the loopback doubles below; nothing else from the
developer's shell but PATH and the AWS endpoint and credential variables), then answer one typical request.
AWS is on loopback (tests/support/loopback_aws.py): moto's server (DynamoDB, Step Functions, Secrets
Manager), osmem-server for OpenSearch and a stdlib Bedrock runtime double. No network.

Bytecode as Lambda sees it. Each child runs Lambda's Python (CPython 3.12, found like the bundler does:
infra/layer_bundling.build_python) with PYTHONDONTWRITEBYTECODE (Lambda's disk is read-only) over:
- the code asset: the bundled one from `--assembly` when it holds one (`bash infra/synth.sh`), else the
  working tree bundled the same way (layer_bundling.CopySources, which compiles it);
- the layer's packages at the locked versions (infra/layer-requirements.txt) but installed for this host
  (x86_64, not the layer's arm64 wheels, which do not import here), plus boto3 and its dependencies at the
  dev environment's versions standing in for the runtime's; installed once into a temp dir by pip (PyPI)
  and compiled like the layer.
Two columns: "no pyc" (copies without __pycache__: what every cold start paid while the assets shipped
sources only) and "pyc" (unchecked-hash cpython-312 pycs, what the assets ship now). The goal (authorizer
<= 250 ms, the other HTTP functions <= 700 ms of CPU) is judged on the pyc column. Without a CPython 3.12
the children run this interpreter over the dev venv's site-packages (their pycs are always there; only the
code asset's differ between the columns). Each child gets Lambda's own variables too (LAMBDA_TASK_ROOT,
_X_AMZN_TRACE_ID...): the X-Ray SDK and Powertools behave differently without them.

Then, from the cloud assembly, the unzipped size of the code asset and of the layer with its largest parts.

    .venv/bin/python bench/cold_start.py [--runs 5] [--assembly infra/cdk.out] [--only retrieve recall]

Caveats: x86_64, not Graviton; CPU time of the process from its first import (the interpreter's own start
and Lambda's init, runtime start and layer extraction, are not included); wall times grow with the load.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from tests.support import loopback_aws  # noqa: E402  (after the path above)
from tests.support.loopback_aws import ACCOUNT, REGION  # noqa: E402

TENANT, PRINCIPAL = "bench", "bench-agent"
# CPU ms of import + first request, for the functions behind API Gateway (issue 30): the authorizer runs
# before every uncached request, the others answer them. The scheduled and workflow functions have none.
AUTHORIZER_GOAL_MS, HTTP_GOAL_MS = 250.0, 700.0
PASSED_THROUGH = ("PATH", "LANG", "HOME")

CHILD = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import importlib
module = importlib.import_module(sys.argv[1])
handler = getattr(module, sys.argv[2])
t1, c1 = time.perf_counter(), time.process_time()


class Context:
    function_name, memory_limit_in_mb, aws_request_id = sys.argv[1], 1024, "bench-request"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:bench"

    def get_remaining_time_in_millis(self):
        return 60_000


try:
    result = handler(json.loads(sys.argv[3]), Context())
    outcome = str(result.get("statusCode") or result.get("policyDocument", {}).get("Statement", [{}])[0].get("Effect")
                  or "ok") if isinstance(result, dict) else "ok"
except Exception as e:
    outcome = (type(e).__name__ + ": " + " / ".join(str(e).splitlines()[:3]))[:160]
t2, c2 = time.perf_counter(), time.process_time()
print("\\nCOLD_START " + json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000,
                                     "cpu_ms": (c2 - c0) * 1000, "outcome": outcome}))
"""


# -- the template ------------------------------------------------------------------------------------
def synthesize() -> dict[str, Any]:
    """The default stage's template, synthesized in-process without bundling (no asset is built)."""
    from infra.mneme_infra.stack import build_app

    context = json.loads((ROOT / "infra" / "cdk.json").read_text())["context"]
    app, stack = build_app({**context, "aws:cdk:bundling-stacks": []})
    template: dict[str, Any] = app.synth().get_stack_by_name(stack.stack_name).template
    return template


# -- the requests ------------------------------------------------------------------------------------
def rest_event(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    authorizer = {"tenant": TENANT, "principal": PRINCIPAL, "roles": "admin", "principalId": f"{TENANT}/{PRINCIPAL}"}
    return loopback_aws.rest_event(method, path, body, authorizer)


def goal_ms(name: str) -> float | None:
    from mneme.http.routes import FUNCTIONS

    return AUTHORIZER_GOAL_MS if name == "authorizer" else HTTP_GOAL_MS if name in FUNCTIONS else None


def first_request(name: str, secret: str) -> dict[str, Any]:
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:bench/prod/POST/v1/retrieve"
    events: dict[str, dict[str, Any]] = {
        "authorizer": {"type": "TOKEN", "authorizationToken": f"Bearer {secret}", "methodArn": arn},
        "retrieve": rest_event("POST", "/v1/retrieve", {"path": "root"}),
        "remember": rest_event("POST", "/v1/remember", {"scope": "root", "content": "Cold start bench episode."}),
        "recall": rest_event("POST", "/v1/recall", {"query": "cold start bench"}),
        "consolidate": rest_event("GET", "/v1/consolidations/run-unknown"),
        "curate": rest_event("GET", "/v1/scopes"),
        "records": rest_event("GET", "/v1/episodes"),
        "consolidate-schedule": {"source": "mneme.schedule"},
        "consolidate-stages": {"stage": "begin", "tenant": TENANT, "run_id": "run-bench", "scope_id": "unknown"},
        "index-repair": {"source": "mneme.repair"},
    }
    return events.get(name, {"source": "mneme.bench"})


# -- what the children import ------------------------------------------------------------------------
class Trees:
    """Lambda's Python and its import path (code asset first, then the layer's packages, then the runtime's
    boto3), once with cpython-312 pycs and once without any."""

    def __init__(self, assembly: Path, work: Path) -> None:
        from infra.layer_bundling import build_python

        self.python = build_python()
        code = bundled_code(assembly) or bundle_code(work / "code")
        packages = host_packages(self.python) if self.python else []
        self.compiled = [code, *packages]
        self.sources = [strip_bytecode(tree, work / "sources" / str(i)) for i, tree in enumerate(self.compiled)]
        self.label = f"python {self.python_version()}, code asset {code}"

    def python_version(self) -> str:
        if self.python is None:
            return f"{sys.version.split()[0]} (no CPython 3.12 found: the dev venv's packages)"
        return "3.12 (" + self.python + "), the layer's locked packages for this host"

    def child(self, compiled: bool) -> tuple[str, dict[str, str]]:
        """(interpreter, environment) for one column; without 3.12, this venv's interpreter with its packages."""
        paths = self.compiled if compiled else self.sources
        pythonpath = os.pathsep.join(str(path) for path in paths)
        return self.python or sys.executable, {"PYTHONPATH": pythonpath, "LAMBDA_TASK_ROOT": str(paths[0])}


def lambda_variables(name: str, spec: dict[str, Any]) -> dict[str, str]:
    """What Lambda's runtime sets besides the template's variables; the X-Ray SDK and Powertools read them
    (in Lambda the recorder samples locally: outside it creates X-Ray clients at import, ~0.3 s)."""
    variables = {
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12", "AWS_LAMBDA_FUNCTION_NAME": f"mneme-{name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec["memory"]), "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "_HANDLER": spec["handler"], "TZ": ":UTC", "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",  # UDP: segments are sent to nothing
    }  # fmt: skip
    if spec["traced"]:
        variables["_X_AMZN_TRACE_ID"] = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    return variables


def bundled_code(assembly: Path) -> Path | None:
    """The code asset of a bundled cloud assembly (the folder holding functions/ and mneme/)."""
    found = sorted(p.parent for p in assembly.glob("asset.*/functions") if (p.parent / "mneme").is_dir())
    return found[0] if found else None


def bundle_code(output: Path) -> Path:
    from infra.layer_bundling import CopySources, bundling

    local = CopySources({"functions": ROOT / "functions", "mneme": ROOT / "shared" / "mneme"}, source_only=True)
    local.try_bundle(str(output), bundling(local))
    return output


def host_packages(python: str) -> list[Path]:
    """[layer packages, runtime packages] for this host, installed once per lock into the temp dir."""
    from infra.layer_bundling import LAYER_ROOT, compile_bytecode
    from infra.layer_lock import LOCK_FILE, PROVIDED_BY_RUNTIME

    locked = [line.split()[0] for line in LOCK_FILE.read_text().splitlines() if "==" in line]
    runtime = [f"{name}=={importlib.metadata.version(name)}" for name in PROVIDED_BY_RUNTIME]
    digest = hashlib.sha256("\n".join([python, *locked, *runtime]).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"mneme-cold-start-{digest}"
    trees = [cache / "layer", cache / "runtime"]
    if not (cache / "done").exists():
        shutil.rmtree(cache, ignore_errors=True)
        for tree, requirements in zip(trees, (locked, runtime), strict=True):
            pip = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:"]
            subprocess.run([*pip, "--disable-pip-version-check", "--target", str(tree), *requirements], check=True)
            compile_bytecode(tree, LAYER_ROOT, source_only=True)  # a bench without a 3.12 runs this Python
        (cache / "done").touch()
    return trees


def strip_bytecode(tree: Path, output: Path) -> Path:
    shutil.copytree(tree, output, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=True)
    return output


def measure(python: str, environment: dict[str, str], handler: str, event: dict[str, Any]) -> dict[str, Any]:
    module, attribute = handler.rsplit(".", 1)
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ} | environment
    env |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
    done = subprocess.run(
        [python, "-c", CHILD, module, attribute, json.dumps(event)],
        env=env,
        capture_output=True,
        cwd=tempfile.gettempdir(),
        text=True,
        timeout=120,
    )  # cwd: not the source tree, which `-c` would put on sys.path
    lines = [line for line in done.stdout.splitlines() if line.startswith("COLD_START ")]
    if not lines:
        nan = float("nan")
        return {"import_ms": nan, "first_ms": nan, "cpu_ms": nan, "outcome": f"crashed: {done.stderr[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("COLD_START "))
    return result


def sizes(assembly: Path) -> None:
    from infra.package_report import largest_parts, report

    if not list(assembly.glob("*.template.json")):
        print(f"\nno cloud assembly in {assembly}: run `bash infra/synth.sh` for the package sizes")
        return
    found = report(assembly)
    print("\nunzipped assets (from", assembly, ")")
    for asset, size in found.assets.items():
        kind = "layer" if (assembly / asset / "python").is_dir() else "code"
        parts = ", ".join(f"{name} {part / 2**20:.1f}" for name, part in largest_parts(assembly / asset))
        print(f"  {kind:<5} {size / 2**20:6.1f} MB   largest (MB): {parts}")
    for function, size in sorted(found.functions.items()):
        print(f"  function {function:<44} {size / 2**20:6.1f} MB with its layer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--assembly", type=Path, default=ROOT / "infra" / "cdk.out")
    parser.add_argument("--only", nargs="*", help="function names (default: every function)")
    args = parser.parse_args()
    template = synthesize()
    functions = loopback_aws.functions_of(template)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mneme-cold-start-") as work, loopback_aws.loopback_aws(template) as aws:
        trees = Trees(args.assembly, Path(work))
        resolved = {name: aws.environment(spec["environment"]) for name, spec in functions.items()}
        secret = loopback_aws.seed(next(iter(resolved.values())), aws, TENANT, PRINCIPAL)
        for name, spec in sorted(functions.items()):
            if args.only and name not in args.only:
                continue
            environment = resolved[name] | lambda_variables(name, spec)
            event = first_request(name, secret)
            columns = {}
            for compiled in (False, True):
                python, paths = trees.child(compiled)
                runs = [measure(python, environment | paths, spec["handler"], event) for _ in range(args.runs)]
                columns[compiled] = runs
            pyc = columns[True]
            rows.append((name, statistics.median(r["cpu_ms"] for r in columns[False]),
                         statistics.median(r["cpu_ms"] for r in pyc), statistics.median(r["import_ms"] for r in pyc),
                         statistics.median(r["first_ms"] for r in pyc), goal_ms(name),
                         pyc[-1]["outcome"]))  # fmt: skip
    print(
        f"\ncold start, CPU ms of import + first request, median of {args.runs} fresh processes ({os.cpu_count()} cpus)"
    )
    print(f"{trees.label}; load average {os.getloadavg()[0]:.1f} (wall ms grow with it, CPU ms less)")
    print(f"{'function':<22} {'no pyc':>7} {'pyc':>6} {'goal':>5}  {'wall import':>11} {'wall 1st':>8}  outcome")
    for name, bare, cpu, imported, first, goal, outcome in rows:
        verdict = "-" if goal is None else "ok" if cpu <= goal else "OVER"
        shown = "-" if goal is None else f"{goal:.0f}"
        print(f"{name:<22} {bare:7.0f} {cpu:6.0f} {shown:>5}  {imported:11.0f} {first:8.0f}  {verdict} {outcome}")
    sizes(args.assembly)
    return 0


if __name__ == "__main__":
    sys.exit(main())
