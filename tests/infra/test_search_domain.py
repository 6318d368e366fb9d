"""`-c mneme:search=domain`: a managed OpenSearch domain of one small node instead of the Serverless collection,
encrypted, HTTPS only, reachable only by the functions that search or index (and the operators), each with
the HTTP methods and index paths it uses; the functions speak to it as `service=es`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk
import pytest

from infra.mneme_infra.search_domain import READ_PATHS, WRITE_PATHS
from infra.mneme_infra.specs import SPECS
from tests.infra.synth import DOMAIN, OPERATOR, Synth, as_list, synthesize
from tests.infra.test_search import INDEX_USERS, role_id

READ = {"es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost"}
WRITE = READ | {"es:ESHttpPut"}


def arn_path(value: Any) -> str:
    """`arn:<partition>:es:<region>:<account>:domain/<path>` as the Fn::Join CDK writes -> `<path>`."""
    parts = value["Fn::Join"][1]
    assert parts[0] == "arn:" and parts[2] == ":es:"
    return str(parts[-1]).removeprefix(":domain/")


def principal(value: Any) -> str:
    return f"<{value['Fn::GetAtt'][0]}>" if isinstance(value, dict) else str(value)


def test_one_small_encrypted_https_only_domain_and_no_collection(domain: Synth) -> None:
    domain.template.resource_count_is("AWS::OpenSearchServerless::Collection", 0)
    domain.template.resource_count_is("AWS::OpenSearchServerless::SecurityPolicy", 0)
    domain.template.resource_count_is("AWS::OpenSearchServerless::AccessPolicy", 0)
    (resource,) = domain.of_type("AWS::OpenSearchService::Domain").values()
    props = resource["Properties"]
    assert props["DomainName"] == "mneme-small"
    assert props["EngineVersion"].startswith("OpenSearch_")
    cluster = props["ClusterConfig"]
    assert (cluster["InstanceCount"], cluster["InstanceType"]) == (1, "t3.small.search")
    assert cluster["DedicatedMasterEnabled"] is False and cluster["ZoneAwarenessEnabled"] is False
    assert props["EBSOptions"] == {"EBSEnabled": True, "VolumeSize": 10, "VolumeType": "gp3"}
    assert props["EncryptionAtRestOptions"] == {"Enabled": True}
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"]["EnforceHTTPS"] is True
    assert props["DomainEndpointOptions"]["TLSSecurityPolicy"] == "Policy-Min-TLS-1-2-2019-07"
    assert "VPCOptions" not in props  # public endpoint, as the collection's; SigV4 + the access policy
    assert props.get("AdvancedSecurityOptions", {}).get("Enabled") in (None, False)
    assert resource["DeletionPolicy"] == "Delete"  # derived data that bills while it exists
    assert "DomainEndpoint" in domain.raw["Outputs"] and "CollectionEndpoint" not in domain.raw["Outputs"]


def test_index_users_reach_the_domain_as_es_and_the_others_not_at_all(domain: Synth) -> None:
    (domain_id,) = domain.of_type("AWS::OpenSearchService::Domain")
    for name in domain.function_ids():
        env = domain.function(name)["Environment"]["Variables"]
        if name in INDEX_USERS:
            assert env["MNEME_INDEX__SERVICE"] == "es", name
            assert env["MNEME_INDEX__ENDPOINT"] == {
                "Fn::Join": ["", ["https://", {"Fn::GetAtt": [domain_id, "DomainEndpoint"]}]]
            }
        searches = [s for s in domain.role_statements(name) if any(a.startswith(("es:", "aoss:")) for a in
                    as_list(s["Action"]))]  # fmt: skip
        if name not in INDEX_USERS:
            assert searches == [], name
            continue
        (statement,) = searches
        writes = "index_write" in SPECS[name].uses
        assert set(as_list(statement["Action"])) == (WRITE if writes else READ), name
        paths = {arn_path(r) for r in as_list(statement["Resource"])}
        assert paths == {f"mneme-small/mneme{p}" for p in (WRITE_PATHS if writes else READ_PATHS)}, name
    recall = {arn_path(r) for s in domain.role_statements("recall") if "Sid" in s and s["Sid"] == "SearchDomainRead"
              for r in s["Resource"]}  # fmt: skip
    assert "mneme-small/mneme/_bulk" not in recall  # a reader cannot write documents


def test_the_access_policy_names_only_the_index_users_and_the_operators(domain: Synth) -> None:
    (resource,) = domain.of_type("AWS::OpenSearchService::Domain").values()
    statements = resource["Properties"]["AccessPolicies"]["Statement"]
    assert all(s["Effect"] == "Allow" for s in statements)
    granted: dict[str, tuple[set[str], set[str]]] = {}
    for s in statements:
        for p in s["Principal"]["AWS"]:
            granted[principal(p)] = (set(s["Action"]), {arn_path(r) for r in s["Resource"]})
    assert set(granted) == {f"<{role_id(domain, name)}>" for name in INDEX_USERS} | {OPERATOR}
    assert "*" not in json.dumps([s["Principal"] for s in statements])
    for name in INDEX_USERS:
        writes = "index_write" in SPECS[name].uses
        actions, paths = granted[f"<{role_id(domain, name)}>"]
        assert actions == (WRITE if writes else READ), name
        assert paths == {f"mneme-small/mneme{p}" for p in (WRITE_PATHS if writes else READ_PATHS)}, name
    assert granted[OPERATOR][0] == WRITE  # `mneme reindex` with the operator's credentials


def test_the_repair_schedule_is_unchanged(domain: Synth, default: Synth) -> None:
    def schedules(synth: Synth) -> list[Any]:
        return sorted(json.dumps(r["Properties"]["ScheduleExpression"]) for r in
                      synth.of_type("AWS::Scheduler::Schedule").values())  # fmt: skip

    assert schedules(domain) == schedules(default)


def test_cdk_nag_passes_and_each_domain_acknowledgment_silences_a_finding(
    domain: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [v["ruleName"] for v in domain.violations if v["severity"] == "error"] == []
    mine = {rule for rule in domain.acknowledgments if rule.startswith("AwsSolutions-OS")}
    assert mine
    monkeypatch.setattr(aws_cdk.Validations, "acknowledge", lambda self, *rules: None)
    unacknowledged = synthesize(tmp_path, DOMAIN)
    assert mine <= {v["ruleName"] for v in unacknowledged.violations}


def test_an_unknown_search_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="search"):
        synthesize(tmp_path, {"mneme:search": "elastic"})
