"""Consolidation in AWS: the Standard state machine of workflow.py and the EventBridge Scheduler schedule.

The state machine logs every event (without execution data: batches carry tenants' memories) to its own
log group and is traced with X-Ray. An execution that ends where no catcher sees it (the execution
timeout, an abort, `States.DataLimitExceeded`) still concludes its run: an EventBridge rule sends its
status change to the stage function (`ConsolidationService.ended`), retried, then to the failures queue.
The schedule invokes the `consolidate-schedule` function (one run per
tenant with dirty scopes) through a role of its own that may invoke only that function (schedules.py:
retried deliveries, failures to the queue).
"""

from __future__ import annotations

import json
from typing import cast

from aws_cdk import Acknowledgment, Aws, CfnElement, Duration, Fn, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.schedules import DELIVERY_RETRIES, scheduled_invoke, versions_of
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
        failures: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        # "/aws/vendedlogs/": Step Functions otherwise adds the group to the account's CloudWatch Logs resource
        # policy, which is limited to 5,120 characters (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html).
        # The stack id's UUID: a retained group of a deleted stack does not block deploying the stage again.
        stack_uuid = Fn.select(2, Fn.split("/", Aws.STACK_ID))
        self.log_group = logs.LogGroup(
            self, "Logs", log_group_name=f"/aws/vendedlogs/states/mneme-{config.stage}-consolidation-{stack_uuid}",
            retention=config.log_retention, removal_policy=config.removal,
        )  # fmt: skip
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
        self.run_ended = events.Rule(
            self,
            "RunEnded",
            description="Mneme: conclude a consolidation run whose execution failed, timed out or was aborted",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": ["FAILED", "TIMED_OUT", "ABORTED"],
                    "stateMachineArn": [self.state_machine.state_machine_arn],
                },
            ),
            targets=[
                events_targets.LambdaFunction(
                    stages, retry_attempts=DELIVERY_RETRIES, max_event_age=Duration.hours(1), dead_letter_queue=failures
                )
            ],
        )
        self.schedule = scheduled_invoke(
            self,
            "Schedule",
            function=schedule_target,
            expression=config.consolidation_schedule,
            enabled=config.consolidation_enabled,
            description="Mneme: start a consolidation run for every tenant with dirty scopes",
            payload={"source": "mneme.schedule"},
            failures=failures,
        )
        Validations.of(self.state_machine).acknowledge(
            *_child_executions(self.state_machine),
            versions_of(stages, "stage function"),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray segment APIs and CloudWatch Logs vended log delivery APIs (CreateLogDelivery, "
                "DescribeResourcePolicies, ...) support no resource-level permissions.",
            ),
        )


def _child_executions(state_machine: sfn.StateMachine) -> list[Acknowledgment]:
    """The Distributed Map's policy (CDK's): describe, stop and redrive the machine's own executions."""
    stack = Stack.of(state_machine)
    machine_id = stack.resolve(stack.get_logical_id(cast(CfnElement, state_machine.node.default_child)))
    name = json.dumps({"Fn::Select": [6, {"Fn::Split": [":", {"Ref": machine_id}]}]}, separators=(",", ":"))
    arn = f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{name}"
    return [
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{arn}{suffix}]",
            reason="The Distributed Map starts one child execution per scope; the state machine may describe, "
            "stop and redrive executions of itself only (names are run ids, unknown at deploy time).",
        )
        for suffix in (":*", "/Targets:*")
    ]
