"""The search collection: VECTORSEARCH, encrypted, reachable, and readable/writable only by the functions
that search or index; no CloudFormation index (the application creates it with its own mapping)."""

from __future__ import annotations

import json
from typing import Any

from infra.mneme_infra.specs import REPAIR, SPECS, STAGES
from tests.infra.synth import Synth, as_list

INDEX_USERS = {"remember", "recall", "curate", "records", STAGES, REPAIR}


def policy(synth: Synth, kind: str) -> Any:
    (found,) = [
        r["Properties"]
        for r in synth.of_type("AWS::OpenSearchServerless::SecurityPolicy").values()
        if r["Properties"]["Type"] == kind
    ]
    return found


def data_access(synth: Synth) -> list[dict[str, Any]]:
    (access,) = synth.of_type("AWS::OpenSearchServerless::AccessPolicy").values()
    assert access["Properties"]["Type"] == "data"
    return json.loads(resolve_join(access["Properties"]["Policy"]))


def resolve_join(value: Any) -> str:
    """A Fn::Join of strings and role ARNs, the ARNs written as `<logical id>`."""
    if isinstance(value, str):
        return value
    return "".join(p if isinstance(p, str) else f"<{p['Fn::GetAtt'][0]}>" for p in value["Fn::Join"][1])


def role_id(synth: Synth, function: str) -> str:
    return synth.function(function)["Role"]["Fn::GetAtt"][0]


def test_one_vectorsearch_collection_created_after_its_policies_and_deleted_with_the_stack(default: Synth) -> None:
    default.template.resource_count_is("AWS::OpenSearchServerless::Collection", 1)
    default.template.resource_count_is("AWS::OpenSearchServerless::Index", 0)  # ensure_index creates it
    (collection,) = default.of_type("AWS::OpenSearchServerless::Collection").values()
    props = collection["Properties"]
    assert (props["Name"], props["Type"], props["StandbyReplicas"]) == ("mneme-dev-sa", "VECTORSEARCH", "ENABLED")
    assert collection["DeletionPolicy"] == "Delete"  # derived data that bills while it exists
    assert len(collection["DependsOn"]) == 2


def test_create_only_settings_name_the_collection_and_app_tags_stay_off_it(default: Synth, variant: Synth) -> None:
    """Name, Tags, StandbyReplicas and the key are create-only: CloudFormation can replace a collection only
    under a new name, and tags it cannot update would roll the stack back. So the name carries standby
    (s/n) and key (a: AWS-owned, k: customer-managed), the policies follow it, and no tag is set."""
    for synth, name in ((default, "mneme-dev-sa"), (variant, "mneme-test-nk")):
        (collection,) = synth.of_type("AWS::OpenSearchServerless::Collection").values()
        assert collection["Properties"]["Name"] == name
        assert "Tags" not in collection["Properties"]
        policies = [*synth.of_type("AWS::OpenSearchServerless::SecurityPolicy").values(),
                    *synth.of_type("AWS::OpenSearchServerless::AccessPolicy").values()]  # fmt: skip
        assert sorted(p["Properties"]["Name"] for p in policies) == [f"{name}-data", f"{name}-enc", f"{name}-net"]
    (table,) = default.of_type("AWS::DynamoDB::Table").values()
    assert {"Key": "project", "Value": "mneme"} in table["Properties"]["Tags"]  # the app's tags elsewhere


def test_encryption_uses_an_aws_owned_key_or_the_configured_customer_key(default: Synth, variant: Synth) -> None:
    assert json.loads(resolve_join(policy(default, "encryption")["Policy"])) == {
        "Rules": [{"ResourceType": "collection", "Resource": ["collection/mneme-dev-sa"]}],
        "AWSOwnedKey": True,
    }
    search_key = [lid for lid in variant.of_type("AWS::KMS::Key") if lid.startswith("SearchKey")]
    assert json.loads(resolve_join(policy(variant, "encryption")["Policy"])) == {
        "Rules": [{"ResourceType": "collection", "Resource": ["collection/mneme-test-nk"]}],
        "AWSOwnedKey": False,
        "KmsARN": f"<{search_key[0]}>",
    }
    (collection,) = variant.of_type("AWS::OpenSearchServerless::Collection").values()
    assert collection["Properties"]["StandbyReplicas"] == "DISABLED"


def test_network_policy_opens_the_collection_endpoint_only(default: Synth) -> None:
    assert json.loads(policy(default, "network")["Policy"]) == [
        {"Rules": [{"ResourceType": "collection", "Resource": ["collection/mneme-dev-sa"]}], "AllowFromPublic": True}
    ]


def test_data_access_names_exactly_the_index_users_with_read_or_write_permissions(default: Synth) -> None:
    statements = data_access(default)
    principals = {p for s in statements for p in s["Principal"]}
    assert principals == {f"<{role_id(default, name)}>" for name in INDEX_USERS}
    by_principal = {p: s["Rules"] for s in statements for p in s["Principal"]}
    for name in INDEX_USERS:
        (rule,) = by_principal[f"<{role_id(default, name)}>"]
        assert rule["ResourceType"] == "index" and rule["Resource"] == ["index/mneme-dev-sa/mneme"]
        writes = "index_write" in SPECS[name].uses
        expected = {"aoss:DescribeIndex", "aoss:ReadDocument"} | (
            {"aoss:CreateIndex", "aoss:WriteDocument"} if writes else set()
        )
        assert set(rule["Permission"]) == expected, name
    assert "aoss:WriteDocument" not in by_principal[f"<{role_id(default, 'recall')}>"][0]["Permission"]


def test_only_index_users_may_call_the_collection_api_and_only_on_this_collection(default: Synth) -> None:
    (collection_id,) = default.of_type("AWS::OpenSearchServerless::Collection")
    for name in default.function_ids():
        statements = [
            s for s in default.role_statements(name) if any(a.startswith("aoss:") for a in as_list(s["Action"]))
        ]
        if name in INDEX_USERS:
            (statement,) = statements
            assert statement["Action"] == "aoss:APIAccessAll"
            assert statement["Resource"] == {"Fn::GetAtt": [collection_id, "Arn"]}
        else:
            assert statements == [], name


def test_operators_named_in_the_config_may_rebuild_the_index(default: Synth, variant: Synth) -> None:
    operator = "arn:aws:iam::123456789012:role/mneme-operator"
    assert operator not in json.dumps(data_access(default))
    (statement,) = [s for s in data_access(variant) if operator in s["Principal"]]
    assert statement["Principal"] == [operator]
    (rule,) = statement["Rules"]
    assert rule["Resource"] == ["index/mneme-test-nk/mneme"]
    assert set(rule["Permission"]) == {"aoss:DescribeIndex", "aoss:ReadDocument", "aoss:CreateIndex",
                                       "aoss:WriteDocument"}  # fmt: skip
