"""Alarms (the Locus operations chapter's starting thresholds) to an encrypted SNS topic, and one dashboard.

Alarms: recall p95 latency breached for 15 minutes; validation failure ratio (API 4xx / requests) above
2 % for 15 minutes; server error ratio (API 5xx) above 1 %; consolidation failure ratio (failed, timed out
or aborted executions / started) above 1 % over an hour; stage error ratio (errors of the stage function /
invocations) above 1 % over an hour; any error of the authorizer and the scheduled functions (consolidation
schedule, index repair) in 5 minutes; any message in the failures queue (an undelivered schedule or a
scheduled invocation that failed its retries). Thresholds come from InfraConfig.

Application metrics are the EMF metrics Powertools writes (namespace `Mneme`, dimension service=mneme):
`RecallPath_<retrieval_path>`, `RecallFallback`, and `IndexRepairBacklog`, which the index repair
function emits after each sweep (functions/repair.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.mneme_infra.config import InfraConfig
from mneme.observability import NAMESPACE, SERVICE
from mneme.services.recall import RecallResponse

RETRIEVAL_PATHS: tuple[str, ...] = get_args(RecallResponse.model_fields["retrieval_path"].annotation)
INDEX_REPAIR_BACKLOG = "IndexRepairBacklog"  # unindexed episodes left after a repair sweep (Indexer.sweep)
FIVE_MINUTES, HOUR = Duration.minutes(5), Duration.hours(1)


def app_metric(name: str, statistic: str = "Sum") -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map={"service": SERVICE}, statistic=statistic,
        period=FIVE_MINUTES,
    )  # fmt: skip


def ratio(expression: str, period: Duration, label: str, **metrics: cw.IMetric) -> cw.MathExpression:
    """A percentage that is 0, not missing, when nothing happened (the denominator is `total`)."""
    return cw.MathExpression(
        expression=f"IF(total > 0, 100 * ({expression}) / total, 0)", using_metrics=metrics, period=period,
        label=label,
    )  # fmt: skip


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        functions: Mapping[str, lambda_.IFunction],
        rest_api: apigw.RestApi,
        state_machine: sfn.IStateMachine,
        stage_function: str,
        alarmed_functions: tuple[str, ...] = (),
        failures: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Deleted with the stack whatever `removal_policy` says: it encrypts alarm notifications in transit
        # only, nothing a redeploy could reuse, and a retained key bills $1 a month for nothing.
        key = kms.Key(self, "TopicKey", description="Mneme alarm topic", enable_key_rotation=True,
                      removal_policy=RemovalPolicy.DESTROY, pending_window=Duration.days(7))  # fmt: skip
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        self.topic = sns.Topic(self, "Alarms", display_name=f"Mneme {config.stage} alarms", master_key=key,
                               enforce_ssl=True)  # fmt: skip
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))

        api = {
            "total": rest_api.metric_count(statistic="Sum", period=FIVE_MINUTES),
            "errors4xx": rest_api.metric_client_error(statistic="Sum", period=FIVE_MINUTES),
            "errors5xx": rest_api.metric_server_error(statistic="Sum", period=FIVE_MINUTES),
        }
        validation = ratio("errors4xx", FIVE_MINUTES, "4xx %", total=api["total"], errors4xx=api["errors4xx"])
        server = ratio("errors5xx", FIVE_MINUTES, "5xx %", total=api["total"], errors5xx=api["errors5xx"])
        executions = {
            "total": state_machine.metric_started(statistic="Sum", period=HOUR),
            "failed": state_machine.metric_failed(statistic="Sum", period=HOUR),
            "timedout": state_machine.metric_timed_out(statistic="Sum", period=HOUR),
            "aborted": state_machine.metric_aborted(statistic="Sum", period=HOUR),
        }
        run_failures = ratio("FILL(failed, 0) + FILL(timedout, 0) + FILL(aborted, 0)", HOUR, "failed runs %",
                             **executions)  # fmt: skip
        stages = functions[stage_function]
        stage_failures = ratio(
            "FILL(errors, 0)", HOUR, "stage errors %",
            total=stages.metric_invocations(statistic="Sum", period=HOUR),
            errors=stages.metric_errors(statistic="Sum", period=HOUR),
        )  # fmt: skip
        recall_p95 = functions["recall"].metric_duration(statistic="p95", period=FIVE_MINUTES)

        def alarm(name: str, metric: cw.IMetric, threshold: float, periods: int, what: str) -> cw.Alarm:
            created = cw.Alarm(
                self, name, metric=metric, alarm_name=f"mneme-{config.stage}-{name}", alarm_description=what,
                threshold=threshold, evaluation_periods=periods, datapoints_to_alarm=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )  # fmt: skip
            created.add_alarm_action(cw_actions.SnsAction(self.topic))
            created.add_ok_action(cw_actions.SnsAction(self.topic))
            return created

        pct = config.consolidation_failure_percent
        self.alarms = {
            "recall-p95": alarm("recall-p95", recall_p95, config.recall_p95_ms, 3,
                                f"recall p95 above {config.recall_p95_ms} ms for 15 minutes"),
            "validation-failures": alarm("validation-failures", validation, config.validation_failure_percent, 3,
                                         f"API 4xx above {config.validation_failure_percent} % of requests for 15 min"),
            "server-errors": alarm("server-errors", server, 1, 3, "API 5xx above 1 % of requests for 15 minutes"),
            "consolidation-failures": alarm("consolidation-failures", run_failures, pct, 1,
                                            f"failed consolidation runs above {pct} % of started, over an hour"),
            "stage-errors": alarm("stage-errors", stage_failures, pct, 1,
                                  f"consolidation stage errors above {pct} % of invocations, over an hour"),
        }  # fmt: skip
        for name in alarmed_functions:
            errors = functions[name].metric_errors(statistic="Sum", period=FIVE_MINUTES)
            self.alarms[f"{name}-errors"] = alarm(f"{name}-errors", errors, 0, 1, f"{name} function errors")
        if failures is not None:
            waiting = failures.metric_approximate_number_of_messages_visible(statistic="Maximum", period=FIVE_MINUTES)
            self.alarms["scheduled-failures"] = alarm(
                "scheduled-failures", waiting, 0, 1, "undelivered schedules or scheduled invocations that failed"
            )

        def per_function(statistic: str, metric: str = "Duration") -> list[cw.IMetric]:
            return [fn.metric(metric, statistic=statistic, period=FIVE_MINUTES, label=name)
                    for name, fn in functions.items()]  # fmt: skip

        graph = cw.GraphWidget
        # "All dashboards in your account are global, not region-specific" (CloudFormation reference,
        # AWS::CloudWatch::Dashboard): the region in the name lets one stage deploy in two regions.
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"mneme-{config.stage}-{Aws.REGION}")
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24, height=3),
        )
        self.dashboard.add_widgets(
            graph(title="API requests", left=[api["total"]], right=[validation, server], width=12),
            graph(title="API latency (ms)", width=12, left=[
                rest_api.metric_latency(statistic=s, period=FIVE_MINUTES, label=f"latency {s}") for s in ("p50", "p95")
            ]),
        )  # fmt: skip
        self.dashboard.add_widgets(
            graph(title="Duration p50 per function (ms)", left=per_function("p50"), width=12),
            graph(title="Duration p95 per function (ms)", left=per_function("p95"), width=12),
        )
        self.dashboard.add_widgets(
            graph(title="Errors per function", left=per_function("Sum", "Errors"), width=12),
            graph(title="Throttles per function", left=per_function("Sum", "Throttles"), width=12),
        )
        self.dashboard.add_widgets(
            graph(title="Recall retrieval_path", stacked=True, width=12,
                  left=[app_metric(f"RecallPath_{path}").with_(label=path) for path in RETRIEVAL_PATHS]),
            graph(title="Recall fallback rate (share of recalls whose fallback added results)", width=12,
                  left=[app_metric("RecallFallback", "Average").with_(label="fallback rate")]),
        )  # fmt: skip
        self.dashboard.add_widgets(
            graph(title="Consolidation runs by status", width=8, left=[
                state_machine.metric_started(statistic="Sum", period=FIVE_MINUTES, label="started"),
                state_machine.metric_succeeded(statistic="Sum", period=FIVE_MINUTES, label="succeeded"),
                state_machine.metric_failed(statistic="Sum", period=FIVE_MINUTES, label="failed"),
                state_machine.metric_timed_out(statistic="Sum", period=FIVE_MINUTES, label="timed out"),
                state_machine.metric_aborted(statistic="Sum", period=FIVE_MINUTES, label="aborted"),
            ]),
            graph(title="Consolidation stage errors", width=8,
                  left=[stages.metric_errors(statistic="Sum", period=FIVE_MINUTES, label="stage errors")],
                  right=[stage_failures]),
            graph(title="Index repair backlog (app metric IndexRepairBacklog)", width=8,
                  left=[app_metric(INDEX_REPAIR_BACKLOG, "Maximum").with_(label="unindexed records")]),
        )  # fmt: skip
        self.dashboard.add_widgets(
            graph(title="Consolidation reasoner: calls and tokens (app metrics)", width=12,
                  left=[app_metric("ConsolidationReasonerCalls").with_(label="calls")],
                  right=[app_metric("ConsolidationReasonerTokens").with_(label="tokens")]),
            graph(title="Consolidation windows set aside and offered again (app metrics)", width=12,
                  left=[app_metric("ConsolidationClustersSetAside").with_(label="set aside"),
                        app_metric("ConsolidationClustersReturned").with_(label="offered again")]),
        )  # fmt: skip
