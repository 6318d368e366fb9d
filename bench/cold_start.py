"""Cold start per Lambda function, as the synthesized template defines it: import + first request.

For every function of the template, RUNS fresh Python processes each import the function's module with
exactly its template environment (tokens resolved to the loopback doubles below; nothing else from the
developer's shell but PATH and the AWS endpoint and credential variables), then answer one typical request.
AWS is on loopback (tests/support/loopback_aws.py): moto's server (DynamoDB, Step Functions, Secrets
Manager), osmem-server for OpenSearch and a stdlib Bedrock runtime double. No network.

Prints the median per function (import, first request, total) against the goal (authorizer <= 300 ms,
the others <= 1 s), then, from a bundled cloud assembly (`bash infra/synth.sh` writes infra/cdk.out), the
unzipped size of the code asset and of the layer with its largest parts.

    .venv/bin/python bench/cold_start.py [--runs 5] [--assembly infra/cdk.out]

Caveats: this machine runs CPython 3.11 on x86_64 (Lambda: 3.12 on arm64) and imports from the source
tree, not from the zipped layer; Lambda's own init (runtime start, layer extraction) is not included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from tests.support import loopback_aws  # noqa: E402  (after the path above)
from tests.support.loopback_aws import ACCOUNT, REGION  # noqa: E402

TENANT, PRINCIPAL = "bench", "bench-agent"
GOAL_MS = {"authorizer": 300.0}
DEFAULT_GOAL_MS = 1000.0
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


def first_request(name: str, secret: str) -> dict[str, Any]:
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:bench/prod/POST/v1/retrieve"
    events: dict[str, dict[str, Any]] = {
        "authorizer": {"type": "TOKEN", "authorizationToken": f"Bearer {secret}", "methodArn": arn},
        "retrieve": rest_event("POST", "/v1/retrieve", {"path": "root"}),
        "remember": rest_event("POST", "/v1/remember", {"scope": "root", "content": "Cold start bench episode."}),
        "recall": rest_event("POST", "/v1/recall", {"query": "cold start bench"}),
        "consolidate": rest_event("GET", "/v1/consolidations/run-unknown"),
        "curate": rest_event("GET", "/v1/scopes"),
        "consolidate-schedule": {"source": "mneme.schedule"},
        "consolidate-stages": {"stage": "begin", "tenant": TENANT, "run_id": "run-bench", "scope_id": "unknown"},
        "index-repair": {"source": "mneme.repair"},
    }
    return events.get(name, {"source": "mneme.bench"})


def measure(handler: str, environment: dict[str, str], event: dict[str, Any]) -> dict[str, Any]:
    module, attribute = handler.rsplit(".", 1)
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ} | environment
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "shared"), str(ROOT)])  # the code asset's layout
    done = subprocess.run([sys.executable, "-c", CHILD, module, attribute, json.dumps(event)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
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
    with loopback_aws.loopback_aws(template) as loopback:
        resolved = {name: loopback.environment(spec["environment"]) for name, spec in functions.items()}
        secret = loopback_aws.seed(next(iter(resolved.values())), loopback, TENANT, PRINCIPAL)
        for name, spec in sorted(functions.items()):
            if args.only and name not in args.only:
                continue
            environment = resolved[name]
            runs = [measure(spec["handler"], environment, first_request(name, secret)) for _ in range(args.runs)]
            total = statistics.median(r["import_ms"] + r["first_ms"] for r in runs)
            goal = GOAL_MS.get(name, DEFAULT_GOAL_MS)
            rows.append((name, statistics.median(r["import_ms"] for r in runs),
                         statistics.median(r["first_ms"] for r in runs), total,
                         statistics.median(r["cpu_ms"] for r in runs), goal, runs[-1]["outcome"]))  # fmt: skip
    print(
        f"\ncold start, median of {args.runs} fresh processes (python {sys.version.split()[0]}, {os.cpu_count()} cpus)"
    )
    print(f"load average {os.getloadavg()[0]:.1f}: wall times grow with it; CPU ms (the process's own) less so")
    print(f"{'function':<22} {'import ms':>10} {'1st req ms':>11} {'total ms':>9} {'CPU ms':>7} {'goal':>6}  outcome")
    for name, imported, first, total, cpu, goal, outcome in rows:
        verdict = "ok" if total <= goal else "OVER"
        print(f"{name:<22} {imported:10.0f} {first:11.0f} {total:9.0f} {cpu:7.0f} {goal:6.0f}  {verdict} {outcome}")
    sizes(args.assembly)
    return 0


if __name__ == "__main__":
    sys.exit(main())
