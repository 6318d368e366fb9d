"""The embedded store's agent-written records: listing episodes, forgetting an episode or a fact, correcting a fact."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from mneme.adapters.sqlite import episodes as rows_of
from mneme.adapters.sqlite.base import SqliteBase, utc_text
from mneme.errors import Conflict, NotFound
from mneme.models import Episode, Forgotten
from mneme.records import Fact

# Who forgot a record, when and why; erased with its scope (`SqlitePortabilityStore.erase_scopes`).
RECORDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS forgotten (
    tenant TEXT NOT NULL, id TEXT NOT NULL, scope_id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant, id));
CREATE INDEX IF NOT EXISTS forgotten_scope ON forgotten (tenant, scope_id);
"""


class SqliteRecordsStore(SqliteBase):
    def list_episodes(
        self, tenant: str, scope_ids: Sequence[str], before: tuple[datetime, str] | None, limit: int
    ) -> list[Episode]:
        """Newest remembered first, through `episodes_scope` (tenant, scope_id, created_at, episode_id)."""
        at, last = (utc_text(before[0]), before[1]) if before else ("~", "")  # "~" sorts after any time text
        rows = self._rows(
            f"SELECT {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND scope_id IN (SELECT value FROM json_each(?)) "
            "AND (created_at<? OR (created_at=? AND episode_id<?)) ORDER BY created_at DESC, episode_id DESC LIMIT ?",
            tenant, json.dumps(list(scope_ids)), at, at, last, limit,
        )  # fmt: skip
        return [rows_of.from_row(row, vector=False) for row in rows]

    def forget_episode(self, tenant: str, episode_id: str, record: Forgotten) -> Episode | None:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND episode_id=?", (tenant, episode_id)
            ).fetchall()
            if not rows:
                return None
            episode = rows_of.from_row(rows[0], vector=False)
            conn.execute("DELETE FROM episodes WHERE tenant=? AND episode_id=?", (tenant, episode_id))
            conn.execute("DELETE FROM session_turns WHERE tenant=? AND episode_id=?", (tenant, episode_id))
            self._forgotten(conn, record, "episode")
            return episode

    def forget_fact(self, tenant: str, fact_id: str, record: Forgotten) -> Fact | None:
        with self._tx() as conn:
            rows = conn.execute("SELECT doc FROM facts WHERE tenant=? AND fact_id=?", (tenant, fact_id)).fetchall()
            if not rows:
                return None
            conn.execute("DELETE FROM facts WHERE tenant=? AND fact_id=?", (tenant, fact_id))
            conn.execute("DELETE FROM history WHERE tenant=? AND memory_id=?", (tenant, fact_id))
            self._forgotten(conn, record, "fact")
            return Fact.model_validate_json(rows[0][0])

    def _forgotten(self, conn: sqlite3.Connection, record: Forgotten, kind: str) -> None:
        conn.execute("DELETE FROM delivered WHERE tenant=? AND id=?", (record.tenant, record.record_id))
        conn.execute(
            "INSERT INTO forgotten VALUES (?,?,?,?) ON CONFLICT DO UPDATE SET doc=excluded.doc, "
            "scope_id=excluded.scope_id",
            (record.tenant, record.record_id, record.scope_id, record.model_dump_json()),
        )
        self._feed(conn, record.tenant, f"deleted:{kind}", [record.record_id])  # a tombstone: the id, nothing else

    def list_forgotten_since(self, tenant: str, since: datetime) -> set[str]:
        rows = self._rows("SELECT id, doc FROM forgotten WHERE tenant=?", tenant)
        return {str(i) for i, doc in rows if Forgotten.model_validate_json(doc).forgotten_at >= since}

    def get_forgotten(self, tenant: str, record_id: str) -> Forgotten | None:
        rows = self._rows("SELECT doc FROM forgotten WHERE tenant=? AND id=?", tenant, record_id)
        return Forgotten.model_validate_json(rows[0][0]) if rows else None

    def update_fact(self, fact: Fact, expected_version: int) -> None:
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT doc FROM facts WHERE tenant=? AND fact_id=?", (fact.tenant, fact.fact_id)
            ).fetchall()
            if not rows:
                raise NotFound(f"fact {fact.fact_id} does not exist", code="fact_not_found")
            stored = Fact.model_validate_json(rows[0][0])
            if stored.version != expected_version:
                raise Conflict(
                    f"fact {fact.fact_id} is at version {stored.version}, not {expected_version}",
                    code="stale_version",
                    details={"version": stored.version},
                )
            doc = fact.model_dump_json()
            conn.execute("UPDATE facts SET doc=? WHERE tenant=? AND fact_id=?", (doc, fact.tenant, fact.fact_id))
            self._feed(conn, fact.tenant, "fact", [fact.fact_id])
