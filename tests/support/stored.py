"""Records that the product writes and never reads back through a port, read straight from where each store
keeps them: the contradictions consolidation records beside the facts it supersedes."""

from __future__ import annotations

from mneme.adapters.dynamo.codec import tenant_pk, to_model
from mneme.adapters.dynamo.store import DynamoRecordStore
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.ports import RecordStore
from mneme.records import Contradiction


def contradictions(store: RecordStore, tenant: str, scope_id: str) -> list[Contradiction]:
    """The tenant's contradictions recorded in `scope_id`, by id."""
    if isinstance(store, DynamoRecordStore):
        found = [to_model(Contradiction, item) for item in store._query(tenant_pk(tenant, "CONTRA", scope_id))]
    elif isinstance(store, SqliteRecordStore):
        sql = "SELECT doc FROM contradictions WHERE tenant=? AND scope_id=?"
        found = [Contradiction.model_validate_json(doc) for (doc,) in store._rows(sql, tenant, scope_id)]
    else:
        raise TypeError(f"no contradictions known for {type(store).__name__}")
    return sorted(found, key=lambda contradiction: contradiction.contradiction_id)
