"""The tier's IAM report: every authorisation request seen per function, and the permissions none used."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tests.cloud.calls import Seen
from tests.cloud.iam import _like
from tests.cloud.template import Template, as_list

# Permissions the Lambda service and the X-Ray daemon use on the function's behalf: no code path calls them.
RUNTIME_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments")


def unused_permissions(template: Template, seen: Sequence[Seen]) -> dict[str, list[str]]:
    """function -> the role's actions that no allowed request of that function used (runtime ones left out)."""
    out: dict[str, list[str]] = {}
    for function in template.functions().values():
        used = {s.request.action.lower() for s in seen if s.function == function.name and s.decision.allowed}
        granted = {
            action
            for statement in template.role_statements(function.role_id)
            if statement["Effect"] == "Allow"
            for action in as_list(statement["Action"])
        }
        out[function.name] = sorted(
            a for a in granted if a not in RUNTIME_ACTIONS and not any(_like(a.lower(), u) for u in used)
        )
    return out


def render(template: Template, seen: Sequence[Seen]) -> str:
    lines = ["| function | call | IAM request | verdict | times |", "|---|---|---|---|---|"]
    counts = Counter((s.function, s.service, s.operation.split(" ")[0] if s.service == "aoss" else s.operation,
                      s.request.action, _resource(s.request.resource), s.decision.allowed) for s in seen)  # fmt: skip
    for (function, service, operation, action, resource, allowed), n in sorted(counts.items()):
        verdict = "allowed" if allowed else "**DENIED**"
        lines.append(f"| {function} | {service}.{operation} | {action} on {resource} | {verdict} | {n} |")
    lines += ["", "Permissions no call used (besides the runtime's logs/X-Ray):", ""]
    for function, actions in unused_permissions(template, seen).items():
        lines.append(f"- {function}: {', '.join(actions) if actions else 'none'}")
    return "\n".join(lines)


def _resource(resource: str) -> str:
    """Shorten ARNs to their resource part for the table."""
    return resource.split(":", 5)[-1] if resource.startswith("arn:") else resource


def write_report(template: Template, seen: Sequence[Seen], path: Path) -> str:
    text = render(template, seen)
    path.write_text(text + "\n")
    return text
