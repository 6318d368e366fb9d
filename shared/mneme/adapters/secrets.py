"""Secrets Manager: the change-feed cursor key in AWS, fetched once per cold start."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from mneme.errors import StoreUnavailable


def fetch_secret(arn: str, *, client: Any = None) -> bytes:
    """The secret's string value; StoreUnavailable when it cannot be read."""
    if client is None:
        import boto3

        client = boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=arn)["SecretString"]
    except (ClientError, BotoCoreError, KeyError) as e:
        raise StoreUnavailable("the change-feed cursor secret cannot be read") from e
    return str(value).encode()
