"""Records as older versions of a store wrote them: episodes before it kept a session index (DynamoDB's
GSI4, SQLite's `session_turns`), runs before DynamoDB listed them by start time (GSI2)."""

from __future__ import annotations

from collections.abc import Sequence

from mneme.adapters.dynamo.codec import episode_key, run_key
from mneme.adapters.dynamo.store import DynamoRecordStore
from mneme.adapters.sqlite.store import SqliteRecordStore
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
                f"DELETE FROM session_turns WHERE tenant=? AND episode_id IN ({marks})", (tenant, *episode_ids)
            )
    else:
        raise TypeError(f"no session index known for {type(store).__name__}")


def forget_run_listing(store: RecordStore, tenant: str, run_ids: Sequence[str]) -> bool:
    """Remove the runs' GSI2 keys (DynamoDB); False for a store that lists runs from their own records."""
    if not isinstance(store, DynamoRecordStore):
        return False
    for run_id in run_ids:
        store.client.update_item(
            TableName=store.table_name, Key=run_key(tenant, run_id), UpdateExpression="REMOVE GSI2PK, GSI2SK"
        )
    return True
