"""Alarms with the operations chapter's thresholds, to an encrypted SSL-only topic; the dashboard's metrics."""

from __future__ import annotations

import json
from typing import Any

from infra.mneme_infra.monitoring import INDEX_REPAIR_BACKLOG, RETRIEVAL_PATHS
from tests.infra.synth import Synth


def alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    found = synth.of_type("AWS::CloudWatch::Alarm").values()
    return {a["Properties"]["AlarmName"].split("-", 2)[2]: a["Properties"] for a in found}


def test_alarms_with_the_configured_thresholds_all_to_the_topic(default: Synth) -> None:
    found = alarms(default)
    assert set(found) == {"recall-p95", "validation-failures", "server-errors", "consolidation-failures",
                          "stage-errors", "authorizer-errors", "consolidate-schedule-errors", "index-repair-errors",
                          "scheduled-failures"}  # fmt: skip
    (topic_id,) = default.of_type("AWS::SNS::Topic")
    for name, alarm in found.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["OKActions"] == [{"Ref": topic_id}], name
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["TreatMissingData"] == "notBreaching"
    recall = found["recall-p95"]
    assert (recall["MetricName"], recall["ExtendedStatistic"], recall["Threshold"]) == ("Duration", "p95", 2000)
    assert recall["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": default.function_ids()["recall"]}}]
    assert (recall["Period"], recall["EvaluationPeriods"], recall["DatapointsToAlarm"]) == (300, 3, 3)  # 15 min
    validation = found["validation-failures"]
    assert validation["Threshold"] == 2 and validation["EvaluationPeriods"] == 3
    expressions = {m["Id"]: m for m in validation["Metrics"]}
    assert "100 * (errors4xx) / total" in json.dumps(expressions)
    assert {expressions[i]["MetricStat"]["Metric"]["MetricName"] for i in ("total", "errors4xx")} == {
        "Count", "4XXError"}  # fmt: skip
    failures = found["consolidation-failures"]
    assert failures["Threshold"] == 1
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in failures["Metrics"] if "MetricStat" in m}
    assert names == {"ExecutionsStarted", "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}
    assert {m["MetricStat"]["Period"] for m in failures["Metrics"] if "MetricStat" in m} == {3600}


def test_topic_is_encrypted_with_a_key_cloudwatch_may_use_and_refuses_plain_http(default: Synth) -> None:
    (topic,) = default.of_type("AWS::SNS::Topic").values()
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key_policy = json.dumps(default.resources[key_id]["Properties"]["KeyPolicy"])
    assert "cloudwatch.amazonaws.com" in key_policy
    (topic_policy,) = default.of_type("AWS::SNS::TopicPolicy").values()
    (deny,) = topic_policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    default.template.resource_count_is("AWS::SNS::Subscription", 0)


def test_alarm_email_subscribes_to_the_topic(variant: Synth) -> None:
    variant.template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email",
                                                                         "Endpoint": "ops@example.com"})  # fmt: skip


def test_dashboard_charts_latency_errors_paths_fallback_runs_stage_errors_and_repair_backlog(default: Synth) -> None:
    (dashboard,) = default.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert set(RETRIEVAL_PATHS) == {"hybrid", "vector", "lexical", "lexical_fallback"}
    for metric in [*(f"RecallPath_{p}" for p in RETRIEVAL_PATHS), "RecallFallback", INDEX_REPAIR_BACKLOG]:
        assert f'\\"Mneme\\",\\"{metric}\\",\\"service\\",\\"mneme\\"' in body, metric
    for metric in ("Duration", "Errors", "Throttles", "4XXError", "5XXError", "Latency", "ExecutionsFailed",
                   "ExecutionsSucceeded", "ExecutionsTimedOut", "ExecutionsAborted"):  # fmt: skip
        assert f'\\"{metric}\\"' in body, metric
    assert '\\"stat\\":\\"p95\\"' in body and '\\"stat\\":\\"p50\\"' in body


def test_dashboard_charts_the_reasoners_calls_and_tokens_and_windows_set_aside_and_returned(default: Synth) -> None:
    (dashboard,) = default.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("ConsolidationReasonerCalls", "ConsolidationReasonerTokens", "ConsolidationClustersSetAside",
                   "ConsolidationClustersReturned"):  # fmt: skip
        assert f'\\"Mneme\\",\\"{metric}\\",\\"service\\",\\"mneme\\"' in body, metric


def test_dashboard_name_carries_the_region_since_dashboards_are_global_to_the_account(default: Synth) -> None:
    """The same stage deployed in a second region must not collide with the first one's dashboard."""
    (dashboard,) = default.of_type("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == {"Fn::Join": ["", ["mneme-dev-", {"Ref": "AWS::Region"}]]}
