"""The cloud-shaped tier: the synthesized app, run as deployed, on loopback doubles.

Session: one synth of the default stage (in-process, no bundling: tests/infra/synth.py), the local
embedding model (the Bedrock double's embeddings), one osmem-server. Per test: moto (`mock_aws`, with
Step Functions executing the template's definition), a fresh osmem clone, the stack's resources created
from the template (`Deployment`), and the API (`Gateway`). At the end of the session the table of every
AWS call each function made, with the verdict of its role, and the permissions no call used, is printed
and written to `cloud-iam-report.md` in pytest's base temporary directory (path printed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mneme.bootstrap import SystemClock
from mneme.models import Role
from tests.cloud import calls
from tests.cloud.bedrock import BedrockDouble
from tests.cloud.deployment import Deployment, Invocation, aws_client
from tests.cloud.gateway import Gateway, Response
from tests.cloud.report import write_report
from tests.cloud.template import Template
from tests.support.osmem import started_osmem

pytest.importorskip("aws_cdk")
moto = pytest.importorskip("moto")
jsonata = pytest.importorskip("jsonata")

_TEMPLATES: list[Template] = []


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    from tests.infra.synth import synthesize

    synth = synthesize(tmp_path_factory.mktemp("cloud-synth"))
    _TEMPLATES.append(Template(synth.raw))
    return _TEMPLATES[0]


@pytest.fixture(scope="session")
def local_model() -> Any:
    from mneme.adapters.models.embedders import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture(scope="session")
def osmem() -> Iterator[Any]:
    yield from started_osmem()


@dataclass
class Cloud:
    """The deployed stack: call the API, fire the schedule, act as the operator."""

    deployment: Deployment
    gateway: Gateway
    bedrock: BedrockDouble
    clock_offset: timedelta = timedelta(0)

    def api(self, method: str, path: str, body: Any = None, *, key: str | None = None, **kwargs: Any) -> Response:
        return self.gateway.request(method, path, json_body=body, key=key, **kwargs)

    def operator_key(self, tenant: str, principal: str, *roles: str) -> str:
        """docs/deploy.md 'The first API key': the CLI's embedded mode on the deployed table."""
        from mneme.adapters.dynamo.store import DynamoRecordStore
        from mneme.bootstrap import SystemClock
        from mneme.services.keys import KeyService

        store = DynamoRecordStore(self.deployment.table_name, client=aws_client("dynamodb"))
        secret, _ = KeyService(store, SystemClock()).create(tenant, principal, [Role(r) for r in roles or ("admin",)])
        return secret

    def fire_schedule(self, function: str = "consolidate-schedule") -> Invocation:
        return self.deployment.fire_schedule(function)

    def redeploy(self, template: Template, osmem_url: str) -> None:
        """`cdk destroy`, then `cdk deploy` of `template` in the same account: what the first stack retained is
        still there for it (docs/deploy.md 'Bring a stage back'); the new collection is `osmem_url`'s."""
        self.deployment.destroy()
        self.deployment = Deployment.create(template, osmem_url)
        self.gateway = Gateway(self.deployment)

    def later(self, **delta: float) -> None:
        """Move every function's clock forward (e.g. past consolidation's settle time, or to the next tick)."""
        self.clock_offset += timedelta(**delta)


@pytest.fixture
def cloud(template: Template, osmem: Any, local_model: Any) -> Iterator[Cloud]:
    with deployed(template, osmem, local_model) as cloud:
        yield cloud


@contextmanager
def deployed(template: Template, osmem: Any, local_model: Any) -> Iterator[Cloud]:
    """The stack deployed on fresh doubles for one test (or one bench run: bench/cost.py)."""
    from moto import mock_aws
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata

    calls.install()
    with pytest.MonkeyPatch.context() as monkeypatch:
        # Step Functions' retry intervals (seconds to minutes) are not slept: the retries themselves still run
        monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=lambda seconds: None))
        bedrock = BedrockDouble(local_model)
        monkeypatch.setattr(calls.WATCH, "bedrock", bedrock)
        monkeypatch.setattr(
            moto_jsonata, "_eval_jsonata", lambda expression: jsonata.Jsonata(expression).evaluate(None)
        )
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        clone = osmem.clone()
        config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        with mock_aws(config=config):  # type: ignore[arg-type]
            deployment = Deployment.create(template, clone.url)
            cloud = Cloud(deployment, Gateway(deployment), bedrock)

            def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
                return cloud.deployment.invoke_from_state_machine(parameters)  # the current one (`redeploy`)

            monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)
            monkeypatch.setattr(SystemClock, "now", lambda self: datetime.now(UTC) + cloud.clock_offset)
            # the table adapter's own clock (change-feed positions and settle horizon) moves with it
            from mneme.adapters.dynamo.table import DynamoTable

            table_defaults = dict(DynamoTable.__init__.__kwdefaults__ or {})
            monkeypatch.setattr(
                DynamoTable.__init__,
                "__kwdefaults__",
                {**table_defaults, "now": lambda: datetime.now(UTC) + cloud.clock_offset},
            )
            yield cloud
            for execution in cloud.deployment.executions():  # let runs a test started finish inside the mock
                if execution["status"] == "RUNNING":
                    cloud.deployment.wait_for_execution(execution["executionArn"])
        clone.close()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not calls.WATCH.seen or not _TEMPLATES:
        return
    base = Path(str(config._tmp_path_factory.getbasetemp()))  # type: ignore[attr-defined]
    text = write_report(_TEMPLATES[0], calls.WATCH.seen, base / "cloud-iam-report.md")
    terminalreporter.write_sep("-", "cloud tier: AWS calls per function, judged by its role")
    if config.option.capture == "no":  # -s: the whole table; otherwise the permissions nothing used
        terminalreporter.write_line(text)
    else:
        terminalreporter.write_line(text.split("\n\n", 1)[1])
    terminalreporter.write_line(f"(the table of every call: {base / 'cloud-iam-report.md'}; -s prints it)")


@pytest.fixture
def admin(cloud: Cloud) -> str:
    return cloud.operator_key("acme", "alice", "admin")
