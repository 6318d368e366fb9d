"""The embedded store's aliases listing/import and the right-to-erasure delete."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mneme.adapters.sqlite.base import SqliteBase

ERASABLE = ("memories", "episodes", "facts", "contradictions", "checkpoints", "dirty", "forgotten")


class SqlitePortabilityStore(SqliteBase):
    def list_aliases(self, tenant: str, parent_id: str) -> list[tuple[str, str]]:
        """(old segment, scope_id) aliases left under a parent, by segment."""
        rows = self._rows(
            "SELECT segment, scope_id FROM slots WHERE tenant=? AND parent_id=? AND is_alias=1 ORDER BY segment",
            tenant,
            parent_id,
        )
        return [(row[0], row[1]) for row in rows]

    def put_alias(self, tenant: str, parent_id: str, segment: str, scope_id: str) -> bool:
        """Add an alias unless the slot is taken; True when written."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO slots VALUES (?,?,?,?,1) ON CONFLICT DO NOTHING", (tenant, parent_id, segment, scope_id)
            )
            return cursor.rowcount == 1

    def erase_scopes(self, tenant: str, scope_ids: Sequence[str], *, dry_run: bool) -> tuple[dict[str, int], list[str]]:
        """Count (dry run) or delete for good everything attached to these scopes, and the scopes.
        Returns the counts and the ids of every erased record (for the index)."""
        marks = ",".join("?" * len(scope_ids))
        with self._tx() as conn:
            memory_ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT memory_id FROM memories WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids)
                )
            ]
            episode_ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT episode_id FROM episodes WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids)
                )
            ]
            fact_ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT fact_id FROM facts WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids)
                )
            ]
            counts = {"scopes": len(scope_ids), "memories": len(memory_ids), "episodes": len(episode_ids),
                      "facts": len(fact_ids)}  # fmt: skip
            gone = [*scope_ids, *memory_ids, *episode_ids, *fact_ids]
            if dry_run:
                return counts, []
            conn.execute(
                "DELETE FROM session_turns WHERE tenant=? AND episode_id IN (SELECT value FROM json_each(?))",
                (tenant, json.dumps(episode_ids)),
            )
            for table in ERASABLE:
                conn.execute(f"DELETE FROM {table} WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids))
            for table in ("revisions", "history"):
                conn.executemany(
                    f"DELETE FROM {table} WHERE tenant=? AND memory_id=?", [(tenant, m) for m in memory_ids]
                )
            conn.executemany("DELETE FROM history WHERE tenant=? AND memory_id=?", [(tenant, f) for f in fact_ids])
            for kind, erased in (("scope", scope_ids), ("memory", memory_ids), ("episode", episode_ids),
                                 ("fact", fact_ids)):  # fmt: skip
                self._feed(conn, tenant, f"deleted:{kind}", erased)  # a tombstone: the id, nothing else
            conn.executemany("DELETE FROM delivered WHERE tenant=? AND id=?", [(tenant, i) for i in gone])
            conn.execute(f"DELETE FROM slots WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids))
            conn.execute(f"DELETE FROM slots WHERE tenant=? AND parent_id IN ({marks})", (tenant, *scope_ids))
            conn.execute(f"DELETE FROM scopes WHERE tenant=? AND scope_id IN ({marks})", (tenant, *scope_ids))
        return counts, gone
