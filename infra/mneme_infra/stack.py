"""The Mneme stack (storage, functions, api) and the app that holds it, checked by cdk-nag on synth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, CfnOutput, Stack, Tags, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.mneme_infra.api import Api
from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.functions import Functions
from infra.mneme_infra.storage import TABLE_SCHEMA, Storage
from mneme.routes import FUNCTIONS


class MnemeStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        table_schema: Mapping[str, Any] = TABLE_SCHEMA,
    ) -> None:
        super().__init__(scope, construct_id, description=f"Mneme long-term memory for AI agents ({config.stage})")
        storage = Storage(self, "Storage", config=config, schema=table_schema)
        functions = Functions(self, "Functions", config=config, table=storage.table, names=FUNCTIONS)
        api = Api(self, "Api", config=config, handlers=functions.by_name, authorizer=functions.authorizer)
        CfnOutput(self, "ApiUrl", value=api.rest_api.url)
        CfnOutput(self, "TableName", value=storage.table.table_name)


def build_app(
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    table_schema: Mapping[str, Any] = TABLE_SCHEMA,
) -> tuple[App, MnemeStack]:
    """The app as the CDK CLI runs it (context from cdk.json and `-c`); tests pass the context themselves."""
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    config = InfraConfig.from_context(app.node)
    stack = MnemeStack(app, f"Mneme-{config.stage}", config=config, table_schema=table_schema)
    Tags.of(app).add("project", "mneme")
    Tags.of(app).add("stage", config.stage)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
