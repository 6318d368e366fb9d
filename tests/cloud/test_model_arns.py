"""An application inference profile as the reasoner (docs/deploy.md 'Model ids and inference profiles'): the
deployed consolidation calls Converse with the profile's ARN, and the stage function's role allows the
profile and the model behind it, that model only through the profile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.conftest import Cloud, deployed
from tests.cloud.iam import PROFILE_MODEL, Request, evaluate
from tests.cloud.template import ACCOUNT, REGION, Template
from tests.cloud.test_consolidation import execution_arn, remember

PROFILE = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:application-inference-profile/team-finance-7f3a"


@pytest.fixture(scope="module")
def profile_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    from tests.infra.synth import synthesize

    return Template(synthesize(Path(tmp_path_factory.mktemp("profile")), {"mneme:reasoner_model_id": PROFILE}).raw)


@pytest.fixture
def profiled(profile_template: Template, osmem: Any, local_model: Any) -> Iterator[Cloud]:
    with deployed(profile_template, osmem, local_model) as cloud:
        yield cloud


def test_consolidation_reasons_through_an_application_inference_profile(profiled: Cloud) -> None:
    admin = profiled.operator_key("acme", "alice", "admin")
    remember(profiled, admin)
    profiled.later(minutes=15)
    (run,) = profiled.fire_schedule().payload["runs"]
    execution = profiled.deployment.wait_for_execution(execution_arn(profiled, run["run_id"]))
    assert execution["status"] == "SUCCEEDED", execution
    # every Converse named the profile, and the role allowed it (a denied call fails the invocation)
    converse = [params for operation, params in profiled.bedrock.requests if operation == "Converse"]
    assert converse and {p["modelId"] for p in converse} == {PROFILE}
    assert profiled.api("GET", f"/v1/consolidations/{run['run_id']}", key=admin).json()["status"] == "succeeded"
    # the model behind the profile is allowed only through it: called directly, IAM denies it
    role = profiled.deployment.functions["consolidate-stages"].role_id
    statements = profiled.deployment.template.role_statements(role)
    model = f"arn:aws:bedrock:{REGION}::foundation-model/{PROFILE_MODEL}"
    assert not evaluate(statements, Request("bedrock:InvokeModel", model)).allowed
    through = Request("bedrock:InvokeModel", model, {"bedrock:InferenceProfileArn": (PROFILE,)})
    assert evaluate(statements, through).allowed
