"""Consolidation in AWS: the Standard state machine of workflow.py and the EventBridge Scheduler schedule.

The state machine logs every event (without execution data: batches carry tenants' memories) to its own
log group and is traced with X-Ray. The schedule invokes the `consolidate-schedule` function (one run per
tenant with dirty scopes) through a role of its own that may invoke only that function.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import Acknowledgment, CfnElement, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.workflow import Workflow


class Consolidation(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        stages: lambda_.IFunction,
        schedule_target: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "Logs", retention=config.log_retention, removal_policy=config.removal)
        workflow = Workflow(
            self,
            stages=stages,
            map_concurrency=config.map_concurrency,
            max_batches_per_scope=config.max_batches_per_scope,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Mneme consolidation: per dirty scope, batch after batch through the stage list",
            state_machine_type=sfn.StateMachineType.STANDARD,
            query_language=sfn.QueryLanguage.JSONATA,
            definition_body=sfn.DefinitionBody.from_chainable(workflow.definition),
            timeout=Duration.hours(6),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        # The schedule's own role: assumable by EventBridge Scheduler for this account only.
        self.schedule_role = iam.Role(
            self,
            "ScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}}
            ),
        )
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description="Mneme: start a consolidation run for every tenant with dirty scopes",
            schedule=scheduler.ScheduleExpression.expression(config.consolidation_schedule),
            target=targets.LambdaInvoke(
                schedule_target,
                input=scheduler.ScheduleTargetInput.from_object({"source": "mneme.schedule"}),
                retry_attempts=0,  # a missed tick is picked up by the next one; a repeated one duplicates runs
                max_event_age=Duration.minutes(5),
                role=self.schedule_role,
            ),
            enabled=config.consolidation_enabled,
        )
        Validations.of(self.schedule_role).acknowledge(_versions_of(schedule_target, "schedule target"))
        Validations.of(self.state_machine).acknowledge(
            _versions_of(stages, "stage function"),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray segment APIs and CloudWatch Logs vended log delivery APIs (CreateLogDelivery, "
                "DescribeResourcePolicies, ...) support no resource-level permissions.",
            ),
        )


def _versions_of(function: lambda_.IFunction, what: str) -> Acknowledgment:
    """CDK's invoke grants also cover `<function arn>:*`: the function's own versions and aliases."""
    stack = Stack.of(function)
    function_id = stack.resolve(stack.get_logical_id(cast(CfnElement, function.node.default_child)))
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
        reason=f"CDK's invoke grant also covers the versions and aliases of the one {what}, and no other function.",
    )
