"""EventBridge Scheduler schedules that invoke a function asynchronously (consolidation, index repair).

Each schedule has its own role, assumable by EventBridge Scheduler for this account only and allowed to
invoke its one function. Scheduler retries a delivery that fails (throttling, an unavailable service) and
sends an event it could not deliver to the failures queue; the function's own asynchronous invoke config
(functions.py) retries a failed invocation and sends the event to the same queue after the last attempt.
Retries are safe: a repeated consolidation tick opens a run whose scopes the first run holds under lease
(the second skips them), and a repeated repair sweep finds nothing left to index.
"""

from __future__ import annotations

from typing import Any, cast

from aws_cdk import Acknowledgment, CfnElement, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DELIVERY_RETRIES = 3


def scheduled_invoke(
    scope: Construct,
    construct_id: str,
    *,
    function: lambda_.IFunction,
    expression: str,
    enabled: bool,
    description: str,
    payload: dict[str, Any],
    failures: sqs.IQueue,
) -> scheduler.Schedule:
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal(
            "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Stack.of(scope).account}}
        ),
    )
    schedule = scheduler.Schedule(
        scope,
        construct_id,
        description=description,
        schedule=scheduler.ScheduleExpression.expression(expression),
        target=targets.LambdaInvoke(
            function,
            input=scheduler.ScheduleTargetInput.from_object(payload),
            retry_attempts=DELIVERY_RETRIES,
            max_event_age=Duration.minutes(5),  # a later tick does the work of one that came too late
            dead_letter_queue=failures,
            role=role,
        ),
        enabled=enabled,
    )
    Validations.of(role).acknowledge(versions_of(function, "schedule target"))
    return schedule


def versions_of(function: lambda_.IFunction, what: str) -> Acknowledgment:
    """CDK's invoke grants also cover `<function arn>:*`: the function's own versions and aliases."""
    stack = Stack.of(function)
    function_id = stack.resolve(stack.get_logical_id(cast(CfnElement, function.node.default_child)))
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
        reason=f"CDK's invoke grant also covers the versions and aliases of the one {what}, and no other function.",
    )
