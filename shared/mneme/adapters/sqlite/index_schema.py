"""The embedded search index's tables (see `index` for what each holds), the statement that writes a
document, and the migration of a file from before the `dates` column."""

from __future__ import annotations

import re
import sqlite3

from mneme.search_models import IndexDocument

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, doc_id TEXT NOT NULL, kind TEXT NOT NULL,
    scope_id TEXT NOT NULL, ancestor_ids TEXT NOT NULL, occurred_at TEXT NOT NULL, tier TEXT NOT NULL,
    session_id TEXT, visible_to TEXT, model_id TEXT, vector BLOB, UNIQUE (tenant, doc_id));
CREATE INDEX IF NOT EXISTS docs_scope ON docs (tenant, scope_id);
CREATE INDEX IF NOT EXISTS docs_model ON docs (tenant, model_id);
CREATE TABLE IF NOT EXISTS doc_ancestors (
    tenant TEXT NOT NULL, ancestor_id TEXT NOT NULL, doc INTEGER NOT NULL,
    PRIMARY KEY (tenant, ancestor_id, doc)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_ancestors_doc ON doc_ancestors (doc);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(text, dates, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS generations (tenant TEXT PRIMARY KEY, gen INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS doc_meta (
    tenant TEXT NOT NULL, term TEXT NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (tenant, term, doc)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_meta_doc ON doc_meta (doc);
"""

# Created on open next to SCHEMA (a file from before gets them then): the file's epoch (a random id,
# so a vector snapshot of another file is never taken for this one's) and the change log: one row
# per document a write touched, under the tenant generation it produced ('' marks the generation,
# '*' means every document), kept for the last _LOG_KEEP generations. A vector cache (another
# process's, or a snapshot) that is a few generations behind catches up by re-reading those rows.
META_SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS doc_changes (
    tenant TEXT NOT NULL, gen INTEGER NOT NULL, doc_id TEXT NOT NULL, PRIMARY KEY (tenant, gen, doc_id)) WITHOUT ROWID;
"""

# A document written again keeps its row id (the text plan reads ids as the order of first writes).
PUT = """
INSERT OR REPLACE INTO docs (id, tenant, doc_id, kind, scope_id, ancestor_ids, occurred_at, tier, session_id,
                             visible_to, model_id, vector)
VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
"""
DATE_LINE = re.compile(r"\n\n(\d{4}-\d{2}-\d{2} \w+ \d{1,2} \w+ \d{4})\s*$")


def split_dates(doc: IndexDocument) -> tuple[str, str]:
    """(text, dates): the document's date words moved out of its text into their own field."""
    if doc.dates and doc.text.endswith(doc.dates):
        return doc.text[: -len(doc.dates)].rstrip(), doc.dates
    return doc.text, doc.dates or ""


def migrate(conn: sqlite3.Connection) -> None:
    """A file from before the `dates` column: rebuild docs_fts from its own text, moving each
    episode's trailing date line into `dates`."""
    columns = [c[0] for c in conn.execute("SELECT * FROM docs_fts LIMIT 0").description]
    if "dates" in columns:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE VIRTUAL TABLE docs_fts_new USING fts5(text, dates, tokenize='porter unicode61')")
        rows = conn.execute("SELECT rowid, text FROM docs_fts").fetchall()
        split = []
        for rowid, text in rows:
            m = DATE_LINE.search(text)
            split.append((rowid, text[: m.start()], m.group(1)) if m else (rowid, text, ""))
        conn.executemany("INSERT INTO docs_fts_new (rowid, text, dates) VALUES (?, ?, ?)", split)
        conn.execute("DROP TABLE docs_fts")
        conn.execute("ALTER TABLE docs_fts_new RENAME TO docs_fts")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
