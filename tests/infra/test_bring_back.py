"""Destroy and bring back (docs/deploy.md 'Teardown', 'Bring a stage back'): what `cdk destroy` keeps is only
what a redeploy can take back (the table and the cursor secret, imported by name, not created), and what
nothing reuses (layer versions, the alarm topic's key) goes with the stack. Also the model ids Bedrock takes:
application and system inference profile ARNs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from infra.mneme_infra.config import InfraConfig
from infra.mneme_infra.specs import STAGES
from tests.infra.synth import APPLICATION_PROFILE, RETAINED_SECRET, RETAINED_TABLE, Synth, as_list


def table_arn(name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":dynamodb:", {"Ref": "AWS::Region"}, ":",
                              {"Ref": "AWS::AccountId"}, f":table/{name}"]]}  # fmt: skip


def test_a_stage_brought_back_uses_the_retained_table_and_secret_and_creates_neither(brought_back: Synth) -> None:
    assert not brought_back.of_type("AWS::DynamoDB::Table")
    assert not brought_back.of_type("AWS::SecretsManager::Secret")
    for name in brought_back.function_ids():
        assert brought_back.function(name)["Environment"]["Variables"]["MNEME_STORE__TABLE_NAME"] == RETAINED_TABLE
    assert brought_back.function("recall")["Environment"]["Variables"]["MNEME_CURSOR_SECRET_ARN"] == RETAINED_SECRET
    # the grants name the retained table and its indexes, and the secret, by their names
    recall = brought_back.role_statements("recall")
    reads = [s for s in recall if "dynamodb:Query" in as_list(s["Action"])]
    assert {json.dumps(r) for s in reads for r in as_list(s["Resource"])} == {
        json.dumps(table_arn(RETAINED_TABLE)),
        json.dumps({"Fn::Join": ["", [*table_arn(RETAINED_TABLE)["Fn::Join"][1][:-1],
                                      f":table/{RETAINED_TABLE}/index/*"]]}),
    }  # fmt: skip
    (secret,) = [s for s in recall if "secretsmanager:GetSecretValue" in as_list(s["Action"])]
    assert secret["Resource"] == RETAINED_SECRET
    outputs = brought_back.raw["Outputs"]
    assert (outputs["TableName"]["Value"], outputs["CursorSecretArn"]["Value"]) == (RETAINED_TABLE, RETAINED_SECRET)
    assert brought_back.violations == []


def test_destroy_keeps_the_data_and_deletes_what_nothing_reuses(default: Synth, variant: Synth) -> None:
    for synth, kept in ((default, "Retain"), (variant, "Delete")):
        ((_, table),) = synth.of_type("AWS::DynamoDB::Table").items()
        ((_, secret),) = synth.of_type("AWS::SecretsManager::Secret").items()
        assert table["DeletionPolicy"] == secret["DeletionPolicy"] == kept
        # every deploy that changes the layer publishes a version: the replaced one goes (a rollback still has it)
        ((_, layer),) = synth.of_type("AWS::Lambda::LayerVersion").items()
        assert layer["DeletionPolicy"] == layer["UpdateReplacePolicy"] == "Delete"
        # the alarm topic's key encrypts notifications in transit only: nothing to keep
        keys = synth.of_type("AWS::KMS::Key")
        (topic_key,) = [k for k in keys.values() if k["Properties"]["Description"] == "Mneme alarm topic"]
        assert topic_key["DeletionPolicy"] == "Delete"


def test_an_imported_table_names_its_key_when_it_has_a_customer_managed_one() -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    config = InfraConfig(table_name=RETAINED_TABLE, table_encryption="customer_managed", table_key_arn=key)
    assert config.table_key_arn == key
    for wrong in ({"table_key_arn": key}, {"table_name": RETAINED_TABLE, "table_encryption": "customer_managed"},
                  {"table_name": RETAINED_TABLE, "table_key_arn": key}):  # fmt: skip
        with pytest.raises(ValidationError):
            InfraConfig.model_validate(wrong)
    with pytest.raises(ValidationError):  # a secret's complete ARN ends with its six random characters
        InfraConfig(cursor_secret_arn="arn:aws:secretsmanager:eu-west-1:123456789012:secret:cursor")


@pytest.mark.parametrize(
    "model_id",
    [
        "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3d4e5f6",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0",
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",
        "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    ],
)
def test_inference_profile_and_model_arns_are_accepted_where_model_ids_are(model_id: str) -> None:
    config = InfraConfig(reasoner_model_id=model_id, embedding_model_id=model_id)
    assert config.reasoner_model_id == config.embedding_model_id == model_id


def test_other_arns_are_refused_as_model_ids() -> None:
    for bad in ("arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc", "arn:aws:s3:::bucket/key",
                "Anthropic Claude"):  # fmt: skip
        with pytest.raises(ValidationError):
            InfraConfig(reasoner_model_id=bad)


def test_an_application_profile_reasoner_may_reach_models_only_through_that_profile(brought_back: Synth) -> None:
    statements = [s for s in brought_back.role_statements(STAGES) if "bedrock:InvokeModel" in as_list(s["Action"])]
    unconditioned = {json.dumps(r) for s in statements if "Condition" not in s for r in as_list(s["Resource"])}
    assert json.dumps(APPLICATION_PROFILE) in unconditioned
    assert not any("foundation-model/*" in r for r in unconditioned)  # no model directly
    (through,) = [s for s in statements if "Condition" in s]
    assert through["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": [APPLICATION_PROFILE]}}
    assert "foundation-model/*" in json.dumps(through["Resource"])
    assert brought_back.function(STAGES)["Environment"]["Variables"]["MNEME_REASONER__MODEL_ID"] == APPLICATION_PROFILE
    # the functions that only embed never get the reasoner's profile
    assert APPLICATION_PROFILE not in json.dumps(brought_back.role_statements("recall"))
