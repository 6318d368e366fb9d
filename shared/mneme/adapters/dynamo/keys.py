"""The API-key lookup on its own, for the authorizer: one consistent GetItem on the record store's table.

The authorizer runs on every uncached request, so its cold start matters: this module needs boto3 and the
codec, not the record store (whose module imports every model, consolidation's included). The item is the
one `DynamoRecordStore` writes (`apikey_key`), read the same way.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from mneme.adapters.dynamo.codec import apikey_key, to_model
from mneme.errors import StoreUnavailable
from mneme.identity import ApiKey


class DynamoApiKeys:
    def __init__(self, table_name: str, *, client: Any = None, region_name: str | None = None) -> None:
        self.table_name = table_name
        self._client = client
        self._region_name = region_name

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("dynamodb", region_name=self._region_name)
        return self._client

    def get_api_key(self, key_hash: str) -> ApiKey | None:
        try:
            response = self.client.get_item(TableName=self.table_name, Key=apikey_key(key_hash), ConsistentRead=True)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "unknown error")
            raise StoreUnavailable(f"DynamoDB request failed ({code}); retry later") from e
        except BotoCoreError as e:
            raise StoreUnavailable(f"DynamoDB could not be reached ({type(e).__name__}); retry later") from e
        item = response.get("Item")
        return to_model(ApiKey, item) if item else None
