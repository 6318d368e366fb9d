"""The Mneme stack, composed of one construct per capability, and the app that holds it, checked by cdk-nag."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, CfnOutput, Stack, Tags, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.mneme_infra.api import Api
from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.consolidation import Consolidation
from infra.mneme_infra.functions import Functions
from infra.mneme_infra.monitoring import Monitoring
from infra.mneme_infra.schedules import scheduled_invoke
from infra.mneme_infra.search import COLLECTION_TYPE, Search
from infra.mneme_infra.search_domain import SearchDomain
from infra.mneme_infra.specs import AUTHORIZER, REPAIR, SCHEDULE, STAGES
from infra.mneme_infra.storage import Storage
from mneme.adapters.dynamo.store import TABLE_SCHEMA
from mneme.http.routes import FUNCTIONS


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
        search = (
            SearchDomain(self, "Search", config=config)
            if config.search == "domain"
            else Search(self, "Search", config=config)
        )
        functions = Functions(self, "Functions", config=config, table=storage.table, search=search, names=FUNCTIONS)
        consolidation = Consolidation(
            self,
            "Consolidation",
            config=config,
            stages=functions.by_name[STAGES],
            schedule_target=functions.by_name[SCHEDULE],
            failures=functions.failures,
        )
        scheduled_invoke(
            self,
            "IndexRepairSchedule",
            function=functions.by_name[REPAIR],
            expression=config.index_repair_schedule,
            enabled=config.index_repair_enabled,
            description="Mneme: index unindexed episodes, compact duplicate search documents",
            payload={
                "source": "mneme.repair",
                "compact_every_minutes": config.index_compact_every_minutes,
                # EventBridge Scheduler substitutes the tick's time for this context attribute
                # (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html)
                "scheduled_time": "<aws.scheduler.scheduled-time>",
            },
            failures=functions.failures,
        )
        functions.allow_start_runs(consolidation.state_machine)
        api = Api(self, "Api", config=config, handlers=functions.by_name, authorizer=functions.authorizer)
        Monitoring(
            self,
            "Monitoring",
            config=config,
            functions=functions.by_name,
            rest_api=api.rest_api,
            state_machine=consolidation.state_machine,
            stage_function=STAGES,
            alarmed_functions=(AUTHORIZER, SCHEDULE, REPAIR),
            failures=functions.failures,
        )
        CfnOutput(self, "ApiUrl", value=api.rest_api.url, description="MNEME_URL for the CLI and the MCP server")
        CfnOutput(self, "TableName", value=storage.table.table_name, description="MNEME_STORE__TABLE_NAME")
        endpoint_output = "DomainEndpoint" if config.search == "domain" else "CollectionEndpoint"
        CfnOutput(self, endpoint_output, value=search.endpoint, description="MNEME_INDEX__ENDPOINT")
        CfnOutput(self, "StateMachineArn", value=consolidation.state_machine.state_machine_arn)
        CfnOutput(
            self,
            "CursorSecretArn",
            value=functions.cursor_secret.secret_arn,
            description="MNEME_CURSOR_SECRET_ARN: the change-feed cursor key (operators: the CLI needs its value)",
        )


def build_app(
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    table_schema: Mapping[str, Any] = TABLE_SCHEMA,
) -> tuple[App, MnemeStack]:
    """The app as the CDK CLI runs it (context from cdk.json and `-c`); tests pass the context themselves."""
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    config = InfraConfig.from_context(app.node)
    stack = MnemeStack(app, f"Mneme-{config.stage}", config=config, table_schema=table_schema)
    for key, value in (("project", "mneme"), ("stage", config.stage)):
        # Not on the collection: its Tags are create-only (tagUpdatable false in its CloudFormation schema),
        # so adding or changing an app tag would end a deployed stage's update in UPDATE_ROLLBACK.
        Tags.of(app).add(key, value, exclude_resource_types=[COLLECTION_TYPE])
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
