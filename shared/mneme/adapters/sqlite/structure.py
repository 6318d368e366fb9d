"""The embedded store's structure drafts, and a plan applied in one transaction (never half-applied)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from mneme.adapters.sqlite.base import SqliteBase, utc_text
from mneme.errors import Conflict
from mneme.models import Scope
from mneme.structure_models import Draft, Plan

STRUCTURE_SCHEMA = """
CREATE TABLE IF NOT EXISTS drafts (tenant TEXT NOT NULL, draft_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, draft_id));
"""
UNIQ = (
    "CASE WHEN status='archived' THEN NULL WHEN scope_id IS NOT NULL THEN 'scoped#'||scope_id||'#'||key "
    "ELSE 'tagged#'||layer||'#'||COALESCE(value,'*')||'#'||key END"
    " || CASE WHEN status='pending' THEN '#PENDING#'||json_extract(doc, '$.author') ELSE '' END"
)  # `Memory.uniqueness_key`


class SqliteStructureStore(SqliteBase):
    fail_after_step: int | None = None  # tests: raise mid-apply to prove the transaction rolls back

    def put_draft(self, draft: Draft) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO drafts VALUES (?,?,?) ON CONFLICT DO UPDATE SET doc=excluded.doc",
                (draft.tenant, draft.draft_id, draft.model_dump_json()),
            )

    def close_draft(self, draft: Draft) -> None:
        with self._tx() as conn:
            closed = conn.execute(
                "UPDATE drafts SET doc=? WHERE tenant=? AND draft_id=? AND json_extract(doc, '$.status')='open'",
                (draft.model_dump_json(), draft.tenant, draft.draft_id),
            )
            if closed.rowcount == 0:
                raise Conflict(f"draft {draft.draft_id} is no longer open", code="draft_closed")

    def get_draft(self, tenant: str, draft_id: str) -> Draft | None:
        rows = self._rows("SELECT doc FROM drafts WHERE tenant=? AND draft_id=?", tenant, draft_id)
        return Draft.model_validate_json(rows[0][0]) if rows else None

    def apply_structure(self, tenant: str, plan: Plan, draft: Draft, now: datetime) -> None:
        stamp = utc_text(now)
        steps = (self._scopes, self._removals, self._memories, self._records, self._layers)
        with self._tx() as conn:
            for number, step in enumerate(steps, start=1):
                try:
                    step(conn, tenant, plan, stamp)
                except sqlite3.IntegrityError as e:
                    raise Conflict("the tree changed under the draft: preview again", code="stale_preview") from e
                if self.fail_after_step == number:
                    raise RuntimeError(f"injected failure after step {number}")
            conn.execute(
                "UPDATE drafts SET doc=? WHERE tenant=? AND draft_id=?",
                (draft.model_dump_json(), tenant, draft.draft_id),
            )

    def _scopes(self, conn: sqlite3.Connection, tenant: str, plan: Plan, stamp: str) -> None:
        for change in plan.scope_updates:
            doc = conn.execute(
                "SELECT doc FROM scopes WHERE tenant=? AND scope_id=?", (tenant, change.scope_id)
            ).fetchone()
            scope = Scope.model_validate_json(doc[0]).model_copy(
                update={
                    "parent_id": change.parent_id,
                    "segment": change.segment,
                    "depth": change.depth,
                    "updated_at": datetime.fromisoformat(stamp.replace("Z", "+00:00")),
                }
            )
            conn.execute(
                "UPDATE scopes SET parent_id=?, segment=?, doc=? WHERE tenant=? AND scope_id=?",
                (change.parent_id, change.segment, scope.model_dump_json(), tenant, change.scope_id),
            )
            conn.execute("DELETE FROM slots WHERE tenant=? AND scope_id=? AND is_alias=0", (tenant, change.scope_id))
        for change in plan.scope_updates:
            parent = change.parent_id or ""
            conn.execute(
                "DELETE FROM slots WHERE tenant=? AND parent_id=? AND segment=? AND is_alias=1 AND scope_id=?",
                (tenant, parent, change.segment, change.scope_id),
            )
            try:
                conn.execute("INSERT INTO slots VALUES (?,?,?,?,0)", (tenant, parent, change.segment, change.scope_id))
            except sqlite3.IntegrityError as e:
                raise Conflict(f"the slot {change.segment!r} is taken", code="stale_preview") from e
        self._feed(conn, tenant, "scope", [c.scope_id for c in plan.scope_updates])

    def _removals(self, conn: sqlite3.Connection, tenant: str, plan: Plan, stamp: str) -> None:
        for source, target in plan.record_moves.items():
            if source in plan.scope_removals:
                conn.execute(
                    "UPDATE slots SET scope_id=? WHERE tenant=? AND scope_id=? AND is_alias=1", (target, tenant, source)
                )
        for scope_id in plan.scope_removals:
            conn.execute("DELETE FROM slots WHERE tenant=? AND scope_id=?", (tenant, scope_id))
            conn.execute("DELETE FROM scopes WHERE tenant=? AND scope_id=?", (tenant, scope_id))
            for table in ("checkpoints", "dirty"):
                conn.execute(f"DELETE FROM {table} WHERE tenant=? AND scope_id=?", (tenant, scope_id))
        conn.executemany(
            "INSERT INTO slots VALUES (?,?,?,?,1) ON CONFLICT DO NOTHING",
            [(tenant, parent, segment, target) for parent, segment, target in plan.aliases],
        )
        self._feed(conn, tenant, "deleted:scope", plan.scope_removals)  # a tombstone: the id, nothing else

    def _memories(self, conn: sqlite3.Connection, tenant: str, plan: Plan, stamp: str) -> None:
        for memory_id, scope_id in plan.memory_moves.items():
            conn.execute(
                "UPDATE memories SET scope_id=?, version=version+1, doc=json_set(doc, '$.scope_id', ?, "
                "'$.version', json_extract(doc, '$.version')+1, '$.updated_at', ?) WHERE tenant=? AND memory_id=?",
                (scope_id, scope_id, stamp, tenant, memory_id),
            )
        for memory_id in plan.memory_archives:
            conn.execute(
                "UPDATE memories SET status='archived', version=version+1, doc=json_set(doc, '$.status', 'archived', "
                "'$.version', json_extract(doc, '$.version')+1, '$.updated_at', ?) WHERE tenant=? AND memory_id=?",
                (stamp, tenant, memory_id),
            )
        changed = [*plan.memory_moves, *plan.memory_archives]
        conn.executemany(
            f"UPDATE memories SET uniq={UNIQ} WHERE tenant=? AND memory_id=?", [(tenant, m) for m in changed]
        )
        self._feed(conn, tenant, "memory", changed)

    def _records(self, conn: sqlite3.Connection, tenant: str, plan: Plan, stamp: str) -> None:
        for source, target in plan.record_moves.items():
            ids, facts = _scope_records(conn, tenant, source)
            conn.execute(
                "UPDATE episodes SET scope_id=?, doc=json_set(doc, '$.scope_id', ?) WHERE tenant=? AND scope_id=?",
                (target, target, tenant, source),
            )
            conn.execute(
                "UPDATE facts SET scope_id=?, doc=json_set(doc, '$.scope_id', ?) WHERE tenant=? AND scope_id=?",
                (target, target, tenant, source),
            )
            conn.execute("INSERT INTO dirty VALUES (?,?,?) ON CONFLICT DO NOTHING", (tenant, target, stamp))
            self._feed(conn, tenant, "episode", ids)
            self._feed(conn, tenant, "fact", facts)
        for scope_id in plan.record_archives:
            ids, facts = _scope_records(conn, tenant, scope_id)
            conn.execute(
                "UPDATE episodes SET doc=json_set(doc, '$.archived', json('true')) WHERE tenant=? AND scope_id=?",
                (tenant, scope_id),
            )
            conn.execute(
                "UPDATE facts SET doc=json_set(doc, '$.status', 'archived') WHERE tenant=? AND scope_id=?",
                (tenant, scope_id),
            )
            self._feed(conn, tenant, "episode", ids)
            self._feed(conn, tenant, "fact", facts)

    def _layers(self, conn: sqlite3.Connection, tenant: str, plan: Plan, stamp: str) -> None:
        if plan.layers is None:
            return
        conn.execute("INSERT OR REPLACE INTO layers VALUES (?,?)", (tenant, json.dumps(plan.layers)))
        for old, new in plan.layer_renames.items():
            ids = [
                r[0] for r in conn.execute("SELECT memory_id FROM memories WHERE tenant=? AND layer=?", (tenant, old))
            ]
            conn.execute(
                "UPDATE memories SET layer=?, doc=json_set(doc, '$.layer', ?) WHERE tenant=? AND layer=?",
                (new, new, tenant, old),
            )
            conn.executemany(
                f"UPDATE memories SET uniq={UNIQ} WHERE tenant=? AND memory_id=?", [(tenant, m) for m in ids]
            )
            self._feed(conn, tenant, "memory", ids)


def _scope_records(conn: sqlite3.Connection, tenant: str, scope_id: str) -> tuple[list[str], list[str]]:
    """The ids of the episodes and of the facts filed in one scope."""
    where = (tenant, scope_id)
    episodes = [r[0] for r in conn.execute("SELECT episode_id FROM episodes WHERE tenant=? AND scope_id=?", where)]
    facts = [r[0] for r in conn.execute("SELECT fact_id FROM facts WHERE tenant=? AND scope_id=?", where)]
    return episodes, facts
