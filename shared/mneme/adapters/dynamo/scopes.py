"""`DynamoRecordStore`'s scopes, name slots, aliases and layers (keys and access patterns are in the
module docstring of `mneme.adapters.dynamo.store`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mneme.adapters.dynamo.codec import (
    ALIAS,
    LIVE,
    Item,
    alias_item,
    alias_ref_item,
    alias_ref_key,
    attr,
    delete,
    from_item,
    layers_key,
    put,
    scope_key,
    slot_key,
    slots_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.table import DynamoTable, position_of, unmoved
from mneme.errors import Conflict
from mneme.models import Scope


class DynamoScopes(DynamoTable):
    """Scopes, their name slots and aliases, and the tenant's layer names."""

    def get_scope(self, tenant: str, scope_id: str) -> Scope | None:
        item = self._get(scope_key(tenant, scope_id))
        return to_model(Scope, item) if item else None

    def get_scopes(self, tenant: str, scope_ids: Sequence[str]) -> dict[str, Scope]:
        """BatchGetItem, a hundred keys a request, unprocessed keys retried (`_batch_get`)."""
        items = self._items([scope_key(tenant, scope_id) for scope_id in dict.fromkeys(scope_ids)])
        return {scope.scope_id: scope for scope in (to_model(Scope, item) for item in items.values())}

    def _slot(self, tenant: str, parent_id: str | None, segment: str, item_type: str) -> Item | None:
        item = self._get(slot_key(tenant, parent_id, segment))
        return item if item is not None and item.get("item_type") == {"S": item_type} else None

    def find_child(self, tenant: str, parent_id: str | None, segment: str) -> Scope | None:
        item = self._slot(tenant, parent_id, segment, LIVE)
        return to_model(Scope, item) if item else None

    def find_alias(self, tenant: str, parent_id: str, segment: str) -> str | None:
        item = self._slot(tenant, parent_id, segment, ALIAS)
        return str(from_item(item)["scope_id"]) if item else None

    def list_children(self, tenant: str, parent_id: str) -> list[Scope]:
        items = self._query(slots_pk(tenant, parent_id), "#item_type = :live", live=LIVE)
        return sorted((to_model(Scope, item) for item in items), key=lambda scope: scope.segment)

    def create_scope(self, scope: Scope) -> None:
        tenant, parent, position = scope.tenant, scope.parent_id, self._position()
        record = to_item(scope, scope_key(tenant, scope.scope_id), item_type="scope", feed_position=position)
        slot = to_item(scope, slot_key(tenant, parent, scope.segment), item_type=LIVE)
        free = "attribute_not_exists(PK)"
        self._transact(
            [
                put(record, free, "scope_exists", f"scope {scope.scope_id} already exists"),
                put(slot, free, "scope_exists", f"{scope.segment!r} is already taken under this parent"),
                *self._feed_move(tenant, "scope", scope.scope_id, None, position),
            ]
        )

    def rename_scope(self, tenant: str, scope_id: str, new_segment: str, now: datetime) -> Scope:
        stored = self._get(scope_key(tenant, scope_id))
        if stored is None:
            raise Conflict(f"scope {scope_id} no longer exists", code="scope_gone")
        scope = to_model(Scope, stored)
        if new_segment == scope.segment:
            return scope
        renamed = scope.model_copy(update={"segment": new_segment, "updated_at": now})
        previous = position_of(stored)
        position = self._position(previous)
        record = to_item(renamed, scope_key(tenant, scope_id), item_type="scope", feed_position=position)
        same, feed_values = unmoved(previous)
        alias = alias_item(tenant, scope.parent_id, scope.segment, scope_id)
        alias_ref = alias_ref_item(tenant, scope.parent_id, scope.segment, scope_id)
        slot = to_item(renamed, slot_key(tenant, scope.parent_id, new_segment), item_type=LIVE)
        changed = f"scope {scope_id} changed while being renamed; retry"
        taken = f"cannot rename onto {new_segment!r}: the name is taken"
        own_slot = "#item_type = :live AND #scope_id = :id"
        free_or_own_alias = "attribute_not_exists(PK) OR (#item_type = :alias AND #scope_id = :id)"
        self._transact(
            [
                put(record, f"#segment = :old AND {same}", "conflict", changed, old=scope.segment, **feed_values),
                put(alias, own_slot, "conflict", changed, live=LIVE, id=scope_id),
                put(alias_ref, None, "conflict", ""),
                put(slot, free_or_own_alias, "scope_exists", taken, alias=ALIAS, id=scope_id),
                delete(alias_ref_key(tenant, scope_id, scope.parent_id, new_segment), None, "conflict", ""),
                *self._feed_move(tenant, "scope", scope_id, previous, position),
            ]
        )
        return renamed

    def get_layers(self, tenant: str) -> dict[int, str]:
        item = self._get(layers_key(tenant))
        layers = from_item(item)["layers"] if item else {}
        return {int(depth): str(name) for depth, name in layers.items()}

    def put_layers(self, tenant: str, layers: dict[int, str]) -> None:
        item = {**layers_key(tenant), "item_type": attr("layers"), "layers": attr(layers)}
        self._call("put_item", TableName=self.table_name, Item=item)

    # -- aliases ------------------------------------------------------------------------------
    def list_aliases(self, tenant: str, parent_id: str) -> list[tuple[str, str]]:
        items = self._query(slots_pk(tenant, parent_id), "#item_type = :alias", alias=ALIAS)
        return sorted((str(i["segment"]["S"]), str(i["scope_id"]["S"])) for i in items)

    def put_alias(self, tenant: str, parent_id: str, segment: str, scope_id: str) -> bool:
        """Transact: Put the alias if its slot is free, and its back-reference."""
        alias = alias_item(tenant, parent_id, segment, scope_id)
        taken = f"{segment!r} is already taken under this parent"
        try:
            self._transact(
                [
                    put(alias, "attribute_not_exists(PK)", "scope_exists", taken),
                    put(alias_ref_item(tenant, parent_id, segment, scope_id), None, "conflict", ""),
                ]
            )
        except Conflict as e:
            if e.code != "scope_exists":
                raise
            return False
        return True
