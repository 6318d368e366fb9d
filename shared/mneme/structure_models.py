"""Structure drafts: operations, the plan they compile to, and the draft record."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

PathStr = Annotated[str, Field(min_length=4, max_length=600)]


class Move(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["move"]
    path: PathStr
    new_parent: PathStr


class Rename(BaseModel):
    """Rename a scope's last segment (the old path stays as an alias): as a draft when it changes which
    value-targeted guidance applies, since a tag follows the segment, not the scope."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["rename"]
    path: PathStr
    new_path: PathStr


class Merge(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["merge"]
    path: PathStr
    into: PathStr


class Delete(BaseModel):
    """Delete a subtree: its memories are archived; its episodes and facts are archived explicitly
    (`records: "archive"`) or moved into another scope (`records: "move"`, `into`)."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["delete"]
    path: PathStr
    records: Literal["archive", "move"]
    into: PathStr | None = None


class Layers(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["layers"]
    layers: dict[int, Annotated[str, Field(min_length=1, max_length=63)]] = Field(max_length=8)


Operation = Annotated[Move | Rename | Merge | Delete | Layers, Field(discriminator="op")]


class ScopeChange(BaseModel):
    scope_id: str
    parent_id: str | None
    segment: str
    depth: int


class Plan(BaseModel):
    """Every record change a draft makes, computed from the current state (what publish applies)."""

    scope_updates: list[ScopeChange] = []
    scope_removals: list[str] = []  # scopes that disappear (merged away or deleted)
    slot_removals: list[tuple[str, str]] = []  # (parent_id, segment)
    aliases: list[tuple[str, str, str]] = []  # (parent_id, segment, scope_id): old paths keep resolving
    memory_moves: dict[str, str] = {}  # memory_id -> scope_id
    memory_archives: list[str] = []
    record_moves: dict[str, str] = {}  # scope_id -> scope_id, for episodes and facts
    record_archives: list[str] = []  # scope ids whose episodes and facts are archived
    layers: dict[int, str] | None = None
    layer_renames: dict[str, str] = {}
    reindex_scopes: list[str] = []  # scopes whose documents need new ancestors
    ancestors: dict[str, list[str]] = {}  # their ancestor ids after the publish, root first


class Preview(BaseModel):
    path_changes: list[tuple[str, str | None]]  # (old path, new path or None when removed)
    aliases: list[tuple[str, str]]  # (old path, resolves to)
    memories: list[dict[str, str]]  # {memory_id, key, from, to | "archived"}
    records: list[dict[str, object]]  # episodes/facts moved or archived, counts by scope
    conflicts: list[str]
    fingerprint: str
    tagged: list[dict[str, str]] = []  # {memory_id, key, tag, scope, applies: starts | stops}


class Draft(BaseModel):
    tenant: str
    draft_id: str
    author: str
    operations: list[Operation]
    status: Literal["open", "published", "discarded"] = "open"
    created_at: datetime
    published_at: datetime | None = None
    published_by: str | None = None
