"""The embedded store's review records: open revisions and every memory's history."""

from __future__ import annotations

from mneme.adapters.sqlite.base import SqliteBase
from mneme.models import HistoryEntry, Revision

REVIEW_SCHEMA = """
CREATE TABLE IF NOT EXISTS revisions (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, author TEXT NOT NULL, status TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id, author));
CREATE INDEX IF NOT EXISTS revisions_open ON revisions (tenant, status, author);
CREATE TABLE IF NOT EXISTS history (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS history_memory ON history (tenant, memory_id, seq);
"""


class SqliteReviewStore(SqliteBase):
    def put_revision(self, revision: Revision) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO revisions VALUES (?,?,?,?,?) ON CONFLICT DO UPDATE SET status=excluded.status, "
                "doc=excluded.doc",
                (revision.tenant, revision.memory_id, revision.author, revision.status, revision.model_dump_json()),
            )

    def get_revision(self, tenant: str, memory_id: str, author: str) -> Revision | None:
        rows = self._rows(
            "SELECT doc FROM revisions WHERE tenant=? AND memory_id=? AND author=?", tenant, memory_id, author
        )
        return Revision.model_validate_json(rows[0][0]) if rows else None

    def list_revisions(
        self, tenant: str, *, memory_id: str | None = None, author: str | None = None, status: str | None = "open"
    ) -> list[Revision]:
        """Revisions of a tenant, optionally of one memory / author / status, ordered by memory then author."""
        clauses, args = ["tenant=?"], [tenant]
        for column, value in (("memory_id", memory_id), ("author", author), ("status", status)):
            if value is not None:
                clauses.append(f"{column}=?")
                args.append(value)
        rows = self._rows(f"SELECT doc FROM revisions WHERE {' AND '.join(clauses)} ORDER BY memory_id, author", *args)
        return [Revision.model_validate_json(row[0]) for row in rows]

    def add_history(self, entry: HistoryEntry) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO history (tenant, memory_id, doc) VALUES (?,?,?)",
                (entry.tenant, entry.memory_id, entry.model_dump_json()),
            )

    def list_history(self, tenant: str, memory_id: str) -> list[HistoryEntry]:
        rows = self._rows("SELECT doc FROM history WHERE tenant=? AND memory_id=? ORDER BY seq", tenant, memory_id)
        return [HistoryEntry.model_validate_json(row[0]) for row in rows]
