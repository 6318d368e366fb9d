import boto3
import pytest
from botocore.stub import Stubber

from mneme.adapters.secrets import fetch_secret
from mneme.bootstrap import cursor_secret
from mneme.errors import StoreUnavailable
from mneme.settings import DynamoStore, Settings

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:mneme-cursor-AbCdEf"


def client() -> object:
    return boto3.client("secretsmanager", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_the_cursor_secret_is_read_from_secrets_manager() -> None:
    sm = client()
    with Stubber(sm) as stub:
        stub.add_response("get_secret_value", {"SecretString": "s3cret"}, {"SecretId": ARN})
        assert fetch_secret(ARN, client=sm) == b"s3cret"


def test_an_unreadable_secret_is_store_unavailable() -> None:
    sm = client()
    with Stubber(sm) as stub:
        stub.add_client_error("get_secret_value", "AccessDeniedException", http_status_code=400)
        with pytest.raises(StoreUnavailable):
            fetch_secret(ARN, client=sm)


def test_dynamodb_without_a_configured_secret_refuses_to_sign_but_only_when_asked() -> None:
    source = cursor_secret(Settings(store=DynamoStore(kind="dynamodb", table_name="t")))  # building is fine
    with pytest.raises(StoreUnavailable, match="MNEME_CURSOR_SECRET_ARN"):
        source()
