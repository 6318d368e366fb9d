"""The embedded store's consolidation records: dirty scopes, checkpoints with leases, facts, runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from mneme.adapters.sqlite import episodes as rows_of
from mneme.adapters.sqlite.base import SqliteBase, utc_text
from mneme.errors import Conflict
from mneme.models import Episode
from mneme.records import Checkpoint, Contradiction, Fact, Run

CONSOLIDATION_SCHEMA = """
CREATE TABLE IF NOT EXISTS dirty (
    tenant TEXT NOT NULL, scope_id TEXT NOT NULL, dirtied_at TEXT NOT NULL, PRIMARY KEY (tenant, scope_id));
CREATE TABLE IF NOT EXISTS checkpoints (
    tenant TEXT NOT NULL, scope_id TEXT NOT NULL, version INTEGER NOT NULL, doc TEXT NOT NULL,
    lease_owner TEXT, lease_until TEXT, PRIMARY KEY (tenant, scope_id));
CREATE TABLE IF NOT EXISTS facts (
    tenant TEXT NOT NULL, fact_id TEXT NOT NULL, scope_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, fact_id));
CREATE INDEX IF NOT EXISTS facts_scope ON facts (tenant, scope_id, fact_id);
CREATE TABLE IF NOT EXISTS contradictions (
    tenant TEXT NOT NULL, id TEXT NOT NULL, scope_id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant, id));
CREATE TABLE IF NOT EXISTS runs (tenant TEXT NOT NULL, run_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, run_id));
"""


class SqliteConsolidationStore(SqliteBase):
    def mark_dirty(self, tenant: str, scope_ids: Sequence[str], now: datetime) -> None:
        """Not synced by itself: a remember marks, then writes its episodes durably (which syncs the
        mark with them); a mark lost to a power cut without them only leaves a scope unconsolidated."""
        with self._tx(durable=False) as conn:
            conn.executemany(
                "INSERT INTO dirty VALUES (?,?,?) ON CONFLICT DO UPDATE SET dirtied_at=excluded.dirtied_at",
                [(tenant, scope_id, utc_text(now)) for scope_id in scope_ids],
            )

    def list_dirty(self, tenant: str | None, limit: int) -> list[tuple[str, str]]:
        if tenant is None:
            rows = self._rows("SELECT tenant, scope_id FROM dirty ORDER BY dirtied_at LIMIT ?", limit)
        else:
            rows = self._rows(
                "SELECT tenant, scope_id FROM dirty WHERE tenant=? ORDER BY dirtied_at LIMIT ?", tenant, limit
            )
        return [(row[0], row[1]) for row in rows]

    def clear_dirty(self, tenant: str, scope_id: str, dirtied_before: datetime) -> None:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM dirty WHERE tenant=? AND scope_id=? AND dirtied_at<=?",
                (tenant, scope_id, utc_text(dirtied_before)),
            )

    def list_episodes_after(
        self, tenant: str, scope_id: str, after: tuple[datetime | None, str], before: datetime, limit: int
    ) -> list[Episode]:
        created, episode_id = after
        start = utc_text(created) if created else ""
        rows = self._rows(
            f"SELECT {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND scope_id=? AND created_at<? "
            "AND (created_at>? OR (created_at=? AND episode_id>?)) ORDER BY created_at, episode_id LIMIT ?",
            tenant, scope_id, utc_text(before), start, start, episode_id, limit,
        )  # fmt: skip
        return [rows_of.from_row(row) for row in rows]

    def get_checkpoint(self, tenant: str, scope_id: str) -> Checkpoint:
        rows = self._rows("SELECT doc FROM checkpoints WHERE tenant=? AND scope_id=?", tenant, scope_id)
        return Checkpoint.model_validate_json(rows[0][0]) if rows else Checkpoint(tenant=tenant, scope_id=scope_id)

    def save_checkpoint(self, checkpoint: Checkpoint, expected_version: int) -> None:
        """Conflict unless the stored version is `expected_version` (0: none stored yet)."""
        with self._tx() as conn:
            row = conn.execute(
                "SELECT version FROM checkpoints WHERE tenant=? AND scope_id=?",
                (checkpoint.tenant, checkpoint.scope_id),
            ).fetchone()
            if (row[0] if row else 0) != expected_version:
                raise Conflict("the checkpoint moved: another run advanced this scope", code="checkpoint_moved")
            conn.execute(
                "INSERT INTO checkpoints (tenant, scope_id, version, doc) VALUES (?,?,?,?) "
                "ON CONFLICT DO UPDATE SET version=excluded.version, doc=excluded.doc",
                (checkpoint.tenant, checkpoint.scope_id, checkpoint.version, checkpoint.model_dump_json()),
            )

    def acquire_lease(self, tenant: str, scope_id: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        """Take or renew the scope's lease; False while another owner holds an unexpired one."""
        with self._tx() as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_until FROM checkpoints WHERE tenant=? AND scope_id=?",
                (tenant, scope_id),
            ).fetchone()
            if row and row[0] and row[0] != owner and row[1] > utc_text(now):
                return False
            if row is None:
                blank = Checkpoint(tenant=tenant, scope_id=scope_id)
                conn.execute(
                    "INSERT INTO checkpoints (tenant, scope_id, version, doc) VALUES (?,?,0,?)",
                    (tenant, scope_id, blank.model_dump_json()),
                )
            conn.execute(
                "UPDATE checkpoints SET lease_owner=?, lease_until=? WHERE tenant=? AND scope_id=?",
                (owner, utc_text(now + ttl), tenant, scope_id),
            )
        return True

    def release_lease(self, tenant: str, scope_id: str, owner: str) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE checkpoints SET lease_owner=NULL, lease_until=NULL "
                "WHERE tenant=? AND scope_id=? AND lease_owner=?",
                (tenant, scope_id, owner),
            )

    def put_facts(self, facts: Sequence[Fact], contradictions: Sequence[Contradiction] = ()) -> None:
        """Upsert facts (by derived id) and contradictions in one transaction."""
        with self._tx() as conn:
            conn.executemany(
                "INSERT INTO facts VALUES (?,?,?,?) ON CONFLICT DO UPDATE SET doc=excluded.doc",
                [(f.tenant, f.fact_id, f.scope_id, f.model_dump_json()) for f in facts],
            )
            conn.executemany(
                "INSERT INTO contradictions VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
                [(c.tenant, c.contradiction_id, c.scope_id, c.model_dump_json()) for c in contradictions],
            )
            for tenant in sorted({f.tenant for f in facts}):
                self._feed(conn, tenant, "fact", [f.fact_id for f in facts if f.tenant == tenant])

    def get_facts(self, tenant: str, fact_ids: Sequence[str]) -> dict[str, Fact]:
        facts = [Fact.model_validate_json(doc) for doc in self._docs("facts", "fact_id", tenant, fact_ids)]
        return {fact.fact_id: fact for fact in facts}

    def list_facts(self, tenant: str, scope_id: str | None = None) -> list[Fact]:
        """Every fact of a scope (or of the tenant), any status, ordered by id."""
        if scope_id is None:
            rows = self._rows("SELECT doc FROM facts WHERE tenant=? ORDER BY fact_id", tenant)
        else:
            rows = self._rows("SELECT doc FROM facts WHERE tenant=? AND scope_id=? ORDER BY fact_id", tenant, scope_id)
        return [Fact.model_validate_json(row[0]) for row in rows]

    def put_run(self, run: Run) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO runs VALUES (?,?,?) ON CONFLICT DO UPDATE SET doc=excluded.doc",
                (run.tenant, run.run_id, run.model_dump_json()),
            )

    def get_run(self, tenant: str, run_id: str) -> Run | None:
        rows = self._rows("SELECT doc FROM runs WHERE tenant=? AND run_id=?", tenant, run_id)
        return Run.model_validate_json(rows[0][0]) if rows else None

    def list_runs(self, tenant: str, limit: int) -> list[Run]:
        runs = [Run.model_validate_json(row[0]) for row in self._rows("SELECT doc FROM runs WHERE tenant=?", tenant)]
        return sorted(runs, key=lambda run: (run.started_at, run.run_id), reverse=True)[:limit]

    def backfill_runs(self, tenant: str) -> int:
        """Runs are listed from their own table: nothing to add."""
        return 0
