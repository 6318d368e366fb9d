"""cfn-lint on the synthesized templates, in-process (infra/synth.sh runs the same check on `cdk synth`)."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import lint

from tests.infra.synth import Synth

# W3005 ("dependency already enforced by a GetAtt"): CDK makes each Lambda function DependsOn its role
# policy as well as its role; the role half is redundant with the Role GetAtt. Nothing else is ignored.
IGNORED = {"W3005"}


@pytest.mark.parametrize("config", ["default", "variant", "domain"])
def test_cfn_lint_finds_nothing_but_w3005(config: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(config)
    findings = [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in lint(json.dumps(synth.raw))]
    assert [f for f in findings if f.split(" ", 1)[0] not in IGNORED] == []
