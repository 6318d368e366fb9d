"""Episodes as a store wrote them before it kept a session index (DynamoDB's GSI4, SQLite's
`episode_sessions`): the same records, without their session entries."""

from __future__ import annotations

from collections.abc import Sequence

from mneme.adapters.dynamo_codec import episode_key
from mneme.adapters.dynamo_store import DynamoRecordStore
from mneme.adapters.sqlite_store import SqliteRecordStore
from mneme.ports import RecordStore


def forget_sessions(store: RecordStore, tenant: str, episode_ids: Sequence[str]) -> None:
    """Remove the episodes' session entries, leaving every other attribute as it was."""
    if isinstance(store, DynamoRecordStore):
        for episode_id in episode_ids:
            store.client.update_item(
                TableName=store.table_name,
                Key=episode_key(tenant, episode_id),
                UpdateExpression="REMOVE GSI4PK, GSI4SK",
            )
    elif isinstance(store, SqliteRecordStore):
        marks = ",".join("?" * len(episode_ids))
        with store._tx() as conn:
            conn.execute(
                f"DELETE FROM episode_sessions WHERE tenant=? AND episode_id IN ({marks})", (tenant, *episode_ids)
            )
    else:
        raise TypeError(f"no session index known for {type(store).__name__}")
