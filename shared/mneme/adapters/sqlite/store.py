"""The embedded record store: one SQLite file in WAL mode.

Records are stored as JSON documents next to the columns their access patterns need; every
primary key starts with the tenant. Multi-record changes run in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import suppress
from datetime import datetime
from typing import Any

from mneme.adapters.sqlite import episodes as rows_of
from mneme.adapters.sqlite.base import FEED_SCHEMA, STORE_VERSION, utc_text
from mneme.adapters.sqlite.consolidation import CONSOLIDATION_SCHEMA, SqliteConsolidationStore
from mneme.adapters.sqlite.portability import SqlitePortabilityStore
from mneme.adapters.sqlite.records import RECORDS_SCHEMA, SqliteRecordsStore
from mneme.adapters.sqlite.review import REVIEW_SCHEMA, SqliteReviewStore
from mneme.adapters.sqlite.structure import STRUCTURE_SCHEMA, UNIQ, SqliteStructureStore
from mneme.errors import Conflict
from mneme.models import ApiKey, Episode, Memory, Scope, SessionPosition, context_session, session_position

SCHEMA = """
CREATE TABLE IF NOT EXISTS scopes (
    tenant TEXT NOT NULL, scope_id TEXT NOT NULL, parent_id TEXT, segment TEXT NOT NULL,
    doc TEXT NOT NULL, PRIMARY KEY (tenant, scope_id));
CREATE TABLE IF NOT EXISTS slots (
    tenant TEXT NOT NULL, parent_id TEXT NOT NULL, segment TEXT NOT NULL,
    scope_id TEXT NOT NULL, is_alias INTEGER NOT NULL, PRIMARY KEY (tenant, parent_id, segment));
CREATE TABLE IF NOT EXISTS layers (tenant TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, scope_id TEXT, layer TEXT, value TEXT,
    key TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL, uniq TEXT,
    doc TEXT NOT NULL, PRIMARY KEY (tenant, memory_id));
CREATE UNIQUE INDEX IF NOT EXISTS memories_uniq ON memories (tenant, uniq) WHERE uniq IS NOT NULL;
CREATE INDEX IF NOT EXISTS memories_scope ON memories (tenant, scope_id, key);
CREATE INDEX IF NOT EXISTS memories_layer ON memories (tenant, layer, value, key);
CREATE TABLE IF NOT EXISTS episodes (
    tenant TEXT NOT NULL, episode_id TEXT NOT NULL, seq INTEGER NOT NULL, indexed INTEGER NOT NULL,
    created_at TEXT NOT NULL, scope_id TEXT NOT NULL, doc TEXT NOT NULL, vector BLOB, PRIMARY KEY (tenant, episode_id));
CREATE INDEX IF NOT EXISTS episodes_scope ON episodes (tenant, scope_id, created_at, episode_id);
CREATE INDEX IF NOT EXISTS episodes_created ON episodes (tenant, created_at);
CREATE INDEX IF NOT EXISTS episodes_seq ON episodes (tenant, seq);
CREATE INDEX IF NOT EXISTS episodes_seq_all ON episodes (seq);
CREATE INDEX IF NOT EXISTS episodes_unindexed ON episodes (seq) WHERE indexed = 0;
CREATE TABLE IF NOT EXISTS delivered (
    tenant TEXT NOT NULL, principal TEXT NOT NULL, session_id TEXT NOT NULL, id TEXT NOT NULL,
    PRIMARY KEY (tenant, principal, session_id, id));
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_id TEXT NOT NULL, doc TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant, key_id);
"""

# A session's episodes in session order (`session_episodes`; `position` is `position_text`); a file from before
# it is filled on open (`_upgrade`), and the table it replaces (`episode_sessions`, by time alone) dropped.
SESSION_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_turns (
    tenant TEXT NOT NULL, session_id TEXT NOT NULL, position TEXT NOT NULL, episode_id TEXT NOT NULL,
    PRIMARY KEY (tenant, session_id, position, episode_id)) WITHOUT ROWID;
"""


def position_text(position: SessionPosition) -> str:
    """Fixed-width text that sorts as the session's order."""
    return f"{utc_text(position.occurred_at)}#{utc_text(position.created_at)}#{position.sequence:06d}"


def session_row(episode: Episode) -> tuple[str, str | None, str, str]:
    return episode.tenant, context_session(episode), position_text(session_position(episode)), episode.episode_id


ROOT_PARENT = ""  # the slot table's parent for a tenant's root scope


class SqliteRecordStore(
    SqliteStructureStore, SqlitePortabilityStore, SqliteRecordsStore, SqliteReviewStore, SqliteConsolidationStore
):
    schema = SCHEMA + SESSION_SCHEMA + CONSOLIDATION_SCHEMA + REVIEW_SCHEMA + FEED_SCHEMA + STRUCTURE_SCHEMA
    version = STORE_VERSION
    schema += RECORDS_SCHEMA

    def _upgrade(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        """A file from before the episodes' vector column gets it (`episodes`: its rows stay as they
        are); one from before `session_turns` has its episodes' sessions listed once, on this open. A
        pending draft written before drafts held their key per author gets its author's key."""
        if "memories" in tables:
            conn.execute(f"UPDATE memories SET uniq={UNIQ} WHERE status='pending' AND uniq NOT LIKE '%#PENDING#%'")
        if "episodes" not in tables:
            return
        if "vector" not in {row[1] for row in conn.execute("PRAGMA table_info(episodes)")}:
            with suppress(sqlite3.OperationalError):  # "duplicate column": another process added it first
                conn.execute("ALTER TABLE episodes ADD COLUMN vector BLOB")
        if "session_turns" in tables:
            return
        conn.execute("DROP TABLE IF EXISTS episode_sessions")
        self._list_sessions(conn, "")

    def _list_sessions(self, conn: sqlite3.Connection, tenant: str) -> int:
        """List in `session_turns` the episodes with a session that it lacks (`tenant` "": every tenant's).
        Two scans and a set difference: `session_turns` has no index by episode, so a lookup per episode
        (a NOT EXISTS) scanned the whole table for each one (hours at 100,000 episodes)."""
        where = "WHERE (?1 = '' OR tenant = ?1)"
        listed = set(conn.execute(f"SELECT tenant, episode_id FROM session_turns {where}", (tenant,)))
        with_session = conn.execute(
            f"SELECT tenant, episode_id FROM episodes {where} AND (json_extract(doc, '$.session_id') IS NOT NULL "
            "OR json_extract(doc, '$.metadata.speaker') IS NOT NULL)",
            (tenant,),
        )
        missing = [key for key in with_session if key not in listed]
        turns = []
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            marks = " OR ".join(["(tenant = ? AND episode_id = ?)"] * len(chunk))
            rows = conn.execute(f"SELECT {rows_of.COLUMNS} FROM episodes WHERE {marks}", [v for k in chunk for v in k])
            episodes = [rows_of.from_row(row, vector=False) for row in rows]
            turns += [session_row(e) for e in episodes if context_session(e) is not None]
        conn.executemany("INSERT OR IGNORE INTO session_turns VALUES (?,?,?,?)", turns)
        return len(turns)

    # -- scopes ---------------------------------------------------------------------------
    def get_scope(self, tenant: str, scope_id: str) -> Scope | None:
        rows = self._rows("SELECT doc FROM scopes WHERE tenant=? AND scope_id=?", tenant, scope_id)
        return Scope.model_validate_json(rows[0][0]) if rows else None

    def get_scopes(self, tenant: str, scope_ids: Sequence[str]) -> dict[str, Scope]:
        """One query per 500 ids."""
        ids = list(dict.fromkeys(scope_ids))
        found: dict[str, Scope] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._rows(f"SELECT doc FROM scopes WHERE tenant=? AND scope_id IN ({marks})", tenant, *chunk)
            found.update((scope.scope_id, scope) for scope in (Scope.model_validate_json(row[0]) for row in rows))
        return found

    def _slot(self, conn: sqlite3.Connection, tenant: str, parent: str, segment: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(
            "SELECT scope_id, is_alias FROM slots WHERE tenant=? AND parent_id=? AND segment=?",
            (tenant, parent, segment),
        ).fetchone()
        return row

    def find_child(self, tenant: str, parent_id: str | None, segment: str) -> Scope | None:
        with self._connection() as conn:
            slot = self._slot(conn, tenant, parent_id or ROOT_PARENT, segment)
        if slot is None or slot[1]:
            return None
        return self.get_scope(tenant, slot[0])

    def find_alias(self, tenant: str, parent_id: str, segment: str) -> str | None:
        with self._connection() as conn:
            slot = self._slot(conn, tenant, parent_id, segment)
        return slot[0] if slot is not None and slot[1] else None

    def list_children(self, tenant: str, parent_id: str) -> list[Scope]:
        rows = self._rows("SELECT doc FROM scopes WHERE tenant=? AND parent_id=? ORDER BY segment", tenant, parent_id)
        return [Scope.model_validate_json(row[0]) for row in rows]

    def create_scope(self, scope: Scope) -> None:
        parent = scope.parent_id or ROOT_PARENT
        with self._tx() as conn:
            taken = self._slot(conn, scope.tenant, parent, scope.segment)
            if taken is not None:
                what = "an alias of another scope" if taken[1] else "a scope"
                raise Conflict(f"{scope.segment!r} is already {what} under this parent", code="scope_exists")
            conn.execute("INSERT INTO slots VALUES (?,?,?,?,0)", (scope.tenant, parent, scope.segment, scope.scope_id))
            conn.execute(
                "INSERT INTO scopes VALUES (?,?,?,?,?)",
                (scope.tenant, scope.scope_id, scope.parent_id, scope.segment, scope.model_dump_json()),
            )
            self._feed(conn, scope.tenant, "scope", [scope.scope_id])

    def rename_scope(self, tenant: str, scope_id: str, new_segment: str, now: datetime) -> Scope:
        with self._tx() as conn:
            row = conn.execute("SELECT doc FROM scopes WHERE tenant=? AND scope_id=?", (tenant, scope_id)).fetchone()
            if row is None:
                raise Conflict("the scope no longer exists", code="scope_gone")
            scope = Scope.model_validate_json(row[0])
            parent = scope.parent_id or ROOT_PARENT
            taken = self._slot(conn, tenant, parent, new_segment)
            if taken is not None and not (taken[1] and taken[0] == scope_id):
                what = "an alias of another scope" if taken[1] else "an existing scope"
                raise Conflict(f"cannot rename onto {new_segment!r}: it is {what}", code="scope_exists")
            conn.execute(
                "DELETE FROM slots WHERE tenant=? AND parent_id=? AND segment=?",
                (tenant, parent, new_segment),
            )
            conn.execute(
                "UPDATE slots SET is_alias=1 WHERE tenant=? AND parent_id=? AND segment=?",
                (tenant, parent, scope.segment),
            )
            conn.execute("INSERT INTO slots VALUES (?,?,?,?,0)", (tenant, parent, new_segment, scope_id))
            renamed = scope.model_copy(update={"segment": new_segment, "updated_at": now})
            conn.execute(
                "UPDATE scopes SET segment=?, doc=? WHERE tenant=? AND scope_id=?",
                (new_segment, renamed.model_dump_json(), tenant, scope_id),
            )
            self._feed(conn, tenant, "scope", [scope_id])
        return renamed

    def get_layers(self, tenant: str) -> dict[int, str]:
        rows = self._rows("SELECT doc FROM layers WHERE tenant=?", tenant)
        return {int(depth): name for depth, name in json.loads(rows[0][0]).items()} if rows else {}

    def put_layers(self, tenant: str, layers: dict[int, str]) -> None:
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO layers VALUES (?,?)", (tenant, json.dumps(layers)))

    # -- memories -------------------------------------------------------------------------
    @staticmethod
    def _memory_row(memory: Memory) -> tuple[Any, ...]:
        uniq = None if memory.status == "archived" else memory.uniqueness_key()
        return (
            memory.scope_id,
            memory.layer,
            memory.value,
            memory.key,
            memory.status,
            memory.version,
            uniq,
            memory.model_dump_json(),
        )

    def create_memory(self, memory: Memory) -> None:
        try:
            with self._tx() as conn:
                if memory.status == "pending" and self._key_published(conn, memory):
                    raise sqlite3.IntegrityError("the key is published")
                conn.execute(
                    "INSERT INTO memories (tenant, memory_id, scope_id, layer, value, key, status, version, "
                    "uniq, doc) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (memory.tenant, memory.memory_id, *self._memory_row(memory)),
                )
                self._feed(conn, memory.tenant, "memory", [memory.memory_id])
        except sqlite3.IntegrityError as e:
            raise Conflict(f"a memory with key {memory.key!r} already exists there", code="memory_exists") from e

    def update_memory(self, memory: Memory, expected_version: int) -> None:
        try:
            with self._tx() as conn:
                cursor = conn.execute(
                    "UPDATE memories SET scope_id=?, layer=?, value=?, key=?, status=?, version=?, uniq=?, "
                    "doc=? "
                    "WHERE tenant=? AND memory_id=? AND version=?",
                    (*self._memory_row(memory), memory.tenant, memory.memory_id, expected_version),
                )
                if cursor.rowcount != 1:
                    raise Conflict(
                        f"memory {memory.memory_id} changed since version {expected_version}",
                        code="version_conflict",
                    )
                self._feed(conn, memory.tenant, "memory", [memory.memory_id])
        except sqlite3.IntegrityError as e:
            raise Conflict(f"a memory with key {memory.key!r} already exists there", code="memory_exists") from e

    @staticmethod
    def _key_published(conn: sqlite3.Connection, memory: Memory) -> bool:
        sql = "SELECT 1 FROM memories WHERE tenant=? AND uniq=?"
        return conn.execute(sql, (memory.tenant, memory.published_key())).fetchone() is not None

    def get_memory(self, tenant: str, memory_id: str) -> Memory | None:
        rows = self._rows("SELECT doc FROM memories WHERE tenant=? AND memory_id=?", tenant, memory_id)
        return Memory.model_validate_json(rows[0][0]) if rows else None

    def get_memories(self, tenant: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        memories = [Memory.model_validate_json(doc) for doc in self._docs("memories", "memory_id", tenant, memory_ids)]
        return {memory.memory_id: memory for memory in memories}

    def list_scoped_memories(self, tenant: str, scope_id: str) -> list[Memory]:
        rows = self._rows(
            "SELECT doc FROM memories WHERE tenant=? AND scope_id=? AND status!='archived' ORDER BY key, memory_id",
            tenant,
            scope_id,
        )
        return [Memory.model_validate_json(row[0]) for row in rows]

    def find_scoped_memories(self, tenant: str, scope_id: str, key: str, author: str) -> list[Memory]:
        """One indexed read (`memories_scope`): the key's published memory and `author`'s draft."""
        rows = self._rows(
            "SELECT doc FROM memories WHERE tenant=? AND scope_id=? AND key=? AND status!='archived' "
            "AND (status='published' OR json_extract(doc, '$.author')=?) ORDER BY status='published'",
            tenant,
            scope_id,
            key,
            author,
        )
        return [Memory.model_validate_json(row[0]) for row in rows]

    def list_tagged_memories(self, tenant: str, layer: str, value: str | None) -> list[Memory]:
        rows = self._rows(
            "SELECT doc FROM memories WHERE tenant=? AND layer=? AND value IS ? AND status!='archived' "
            "ORDER BY key, memory_id",
            tenant,
            layer,
            value,
        )
        return [Memory.model_validate_json(row[0]) for row in rows]

    # -- episodes -------------------------------------------------------------------------
    def put_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        """One read of the ids already stored, then the new rows, their sessions and their feed entries in
        batches, all in one transaction."""
        stored: list[Episode] = []
        rows: dict[tuple[str, str], Episode] = {}  # this call's, by (tenant, id): an id given twice is written once
        with self._tx() as conn:
            existing = self._stored(conn, episodes)
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM episodes").fetchone()[0]
            for episode in episodes:
                key = (episode.tenant, episode.episode_id)
                earlier = rows.get(key) or existing.get(key)
                if earlier is not None:
                    if earlier.content_hash != episode.content_hash:
                        raise Conflict(
                            "this idempotency key was already used for a different item (its content, scope or fields)",
                            code="idempotency_key_reused",
                            details={"episode_id": episode.episode_id},
                        )
                    stored.append(earlier)
                    continue
                rows[key] = episode
                stored.append(episode)
            conn.executemany(
                rows_of.INSERT,
                [rows_of.to_row(e, seq + n, utc_text(e.created_at)) for n, e in enumerate(rows.values(), start=1)],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO session_turns VALUES (?,?,?,?)",
                [session_row(e) for e in rows.values() if context_session(e) is not None],
            )
            for tenant in dict.fromkeys(t for t, _ in rows):
                self._feed(conn, tenant, "episode", [i for t, i in rows if t == tenant])
        return stored, {episode_id for _, episode_id in rows}

    @staticmethod
    def _stored(conn: sqlite3.Connection, episodes: Sequence[Episode]) -> dict[tuple[str, str], Episode]:
        """Those of `episodes` already stored, by (tenant, id): one read per tenant and 500 ids."""
        by_tenant: dict[str, list[str]] = {}
        for e in episodes:
            by_tenant.setdefault(e.tenant, []).append(e.episode_id)
        found: dict[tuple[str, str], Episode] = {}
        for tenant, ids in by_tenant.items():
            ids = list(dict.fromkeys(ids))
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND episode_id IN ({marks})"
                rows = conn.execute(sql, (tenant, *chunk))
                found.update(((tenant, e.episode_id), e) for e in map(rows_of.from_row, rows))
        return found

    def get_episodes(
        self, tenant: str, episode_ids: Sequence[str], *, vectors: bool = True, consistent: bool = True
    ) -> dict[str, Episode]:
        found: dict[str, Episode] = {}
        ids = list(dict.fromkeys(episode_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._rows(
                f"SELECT {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND episode_id IN ({marks})", tenant, *chunk
            ):
                episode = rows_of.from_row(row, vector=vectors)
                found[episode.episode_id] = episode
        return found

    def mark_indexed(self, tenant: str, episode_ids: Sequence[str]) -> None:
        """Not synced by itself (synced with the next durable write): a mark lost to a power cut
        only has the sweep index those episodes again (an upsert, idempotent). The flag is the row's
        `indexed` column alone (`episodes`): the document and the vector are not rewritten."""
        with self._tx(durable=False) as conn:
            conn.executemany(
                "UPDATE episodes SET indexed=1 WHERE tenant=? AND episode_id=? AND indexed=0",
                [(tenant, episode_id) for episode_id in dict.fromkeys(episode_ids)],
            )

    def list_recent_episodes(
        self, tenant: str, since: datetime, limit: int, scope_ids: Sequence[str] | None = None
    ) -> list[Episode]:
        newest = f"SELECT {rows_of.COLUMNS}, created_at, seq FROM episodes WHERE tenant=? AND created_at>=?"
        order = "ORDER BY created_at DESC, seq DESC LIMIT ?"
        if scope_ids is None:
            rows = self._rows(f"{newest} {order}", tenant, utc_text(since), limit)
        else:
            rows = []
            for scope_id in dict.fromkeys(scope_ids):
                rows += self._rows(f"{newest} AND scope_id=? {order}", tenant, utc_text(since), scope_id, limit)
            rows.sort(key=lambda row: (row[-2], row[-1]), reverse=True)
        return [rows_of.from_row(row[:-2]) for row in rows]

    def session_episodes(
        self, tenant: str, scope_id: str, session_id: str, before: SessionPosition, limit: int
    ) -> list[Episode]:
        rows = self._rows(
            "SELECT e.doc, e.indexed, e.vector FROM session_turns s CROSS JOIN episodes e "
            "ON e.tenant = s.tenant AND e.episode_id = s.episode_id "
            "WHERE s.tenant=? AND s.session_id=? AND s.position<? AND e.scope_id=? "
            "ORDER BY s.position DESC, s.episode_id DESC LIMIT ?",
            tenant,
            session_id,
            position_text(before),
            scope_id,
            limit,
        )
        return [rows_of.from_row(row) for row in rows]

    def backfill_sessions(self, tenant: str) -> int:
        """A file's sessions are listed when it is opened (`_upgrade`), so this finds none missing unless a
        row was lost; it lists those (the same rows `put_episodes` writes)."""
        with self._tx() as conn:
            return self._list_sessions(conn, tenant)

    def list_unindexed(self, limit: int) -> list[Episode]:
        rows = self._rows(f"SELECT {rows_of.COLUMNS} FROM episodes WHERE indexed=0 ORDER BY seq LIMIT ?", limit)
        return [rows_of.from_row(row) for row in rows]

    def iter_episodes(self, tenant: str, batch: int = 500) -> Iterator[list[Episode]]:
        after = 0
        while True:
            rows = self._rows(
                f"SELECT seq, {rows_of.COLUMNS} FROM episodes WHERE tenant=? AND seq>? ORDER BY seq LIMIT ?",
                tenant,
                after,
                batch,
            )
            if not rows:
                return
            after = rows[-1][0]
            yield [rows_of.from_row(row[1:]) for row in rows]

    def list_memories(self, tenant: str, *, archived: bool = False) -> list[Memory]:
        live = "" if archived else " AND status!='archived'"
        rows = self._rows(f"SELECT doc FROM memories WHERE tenant=?{live} ORDER BY memory_id", tenant)
        return [Memory.model_validate_json(row[0]) for row in rows]

    def get_delivered(self, tenant: str, principal: str, session_id: str) -> set[str]:
        rows = self._rows(
            "SELECT id FROM delivered WHERE tenant=? AND principal=? AND session_id=?",
            tenant,
            principal,
            session_id,
        )
        return {row[0] for row in rows}

    def add_delivered(self, tenant: str, principal: str, session_id: str, ids: Sequence[str]) -> None:
        with self._tx() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO delivered VALUES (?,?,?,?)",
                [(tenant, principal, session_id, i) for i in ids],
            )

    # -- API keys -------------------------------------------------------------------------
    def put_api_key(self, key: ApiKey) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO api_keys VALUES (?,?,?,?)",
                (key.key_hash, key.tenant, key.key_id, key.model_dump_json()),
            )

    def get_api_key(self, key_hash: str) -> ApiKey | None:
        rows = self._rows("SELECT doc FROM api_keys WHERE key_hash=?", key_hash)
        return ApiKey.model_validate_json(rows[0][0]) if rows else None

    def list_api_keys(self, tenant: str) -> list[ApiKey]:
        rows = self._rows("SELECT doc FROM api_keys WHERE tenant=? ORDER BY key_id", tenant)
        return [ApiKey.model_validate_json(row[0]) for row in rows]

    def revoke_api_key(self, tenant: str, key_id: str, now: datetime) -> bool:
        with self._tx() as conn:
            row = conn.execute(
                "SELECT key_hash, doc FROM api_keys WHERE tenant=? AND key_id=?", (tenant, key_id)
            ).fetchone()
            if row is None:
                return False
            key = ApiKey.model_validate_json(row[1]).model_copy(update={"revoked_at": now})
            conn.execute("UPDATE api_keys SET doc=? WHERE key_hash=?", (key.model_dump_json(), row[0]))
        return True

    # -- counts ---------------------------------------------------------------------------
    def row_counts(self) -> dict[str, dict[str, int]]:
        """`mneme.ports.RowCounts`: rows per tenant of every table with a tenant column."""
        with self._connection() as conn:
            return row_counts(conn)


def row_counts(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    """{tenant: {table: rows}} of every table with a tenant column, on an open connection to a store file
    (also a backup's copy, read-only)."""
    counts: dict[str, dict[str, int]] = {}
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
        if "tenant" not in columns:
            continue
        for tenant, n in conn.execute(f'SELECT tenant, count(*) FROM "{table}" GROUP BY tenant'):
            counts.setdefault(tenant, {})[table] = n
    return counts
