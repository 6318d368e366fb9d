"""The embedded index's text query: the words and date phrases a query matches (FTS5 syntax, user syntax
never reaching it), the filters as SQL, and the statements the text plan runs (`SqliteSearchIndex.search_text`)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from mneme.adapters.vector_cache import as_utc
from mneme.search_models import SearchFilter
from mneme.text import meaningful_words, words

# Text search. A cut: FTS5 ranks the matches (from rowid :start on) and keeps the best :n; the filters
# run on those n in the same statement, whose last row (doc_id NULL) carries the cut's size and lowest score.
# FTS-first (the fallback when the cut leaves too few): every match, joined and filtered.
# Subtree-first walks a small subtree and probes FTS per doc (~25 us per doc and query word, so
# only for small subtrees). CROSS JOIN fixes the loop order.
CUT = """
WITH cut AS MATERIALIZED (
    SELECT rowid AS id, -rank AS score FROM docs_fts WHERE docs_fts MATCH :q AND rowid >= :start
    ORDER BY rank, rowid LIMIT :n)
SELECT d.doc_id, cut.score, NULL FROM cut CROSS JOIN docs d ON d.id = cut.id
WHERE d.tenant = :tenant AND EXISTS (
    SELECT 1 FROM doc_ancestors a WHERE a.tenant = :tenant AND a.ancestor_id = :anc AND a.doc = d.id) {where}
UNION ALL SELECT NULL, count(*), min(score) FROM cut
"""
WINDOW_START = "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
NEWEST = "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
FTS_FIRST = """
SELECT d.doc_id, -bm25(docs_fts) AS score FROM docs_fts CROSS JOIN docs d ON d.id = docs_fts.rowid
WHERE docs_fts MATCH :q AND d.tenant = :tenant AND EXISTS (
    SELECT 1 FROM doc_ancestors a WHERE a.tenant = :tenant AND a.ancestor_id = :anc AND a.doc = d.id)
"""
SUBTREE_FIRST = """
SELECT d.doc_id, -bm25(docs_fts) AS score FROM doc_ancestors a CROSS JOIN docs d CROSS JOIN docs_fts
WHERE a.tenant = :tenant AND a.ancestor_id = :anc AND d.id = a.doc AND docs_fts.rowid = a.doc
    AND docs_fts MATCH :q AND d.tenant = :tenant
"""

MAX_TERMS = 32
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")  # fmt: skip
MONTH = "|".join(MONTHS)
DAY = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
DATE_PATTERNS = [
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})(?:-(?P<d>\d{1,2}))?\b"),  # 2026-03-04, 2026-03
    re.compile(rf"\b{DAY}\s+(?:of\s+)?(?P<mon>{MONTH})\b(?:,?\s+(?P<y>\d{{4}})\b)?"),  # 4 March 2026
    re.compile(rf"\b(?P<mon>{MONTH})\s+{DAY}\b(?:,?\s+(?P<y>\d{{4}})\b)?"),  # March 4, 2026
    re.compile(rf"\b(?P<mon>{MONTH})\s+(?P<y>\d{{4}})\b"),  # March 2026
    re.compile(rf"\b(?P<mon>{'|'.join(m for m in MONTHS if m != 'may')})\b"),  # March ("may" is a verb)
]


def date_phrases(text: str) -> list[str]:
    """The date-like phrases of a query as FTS5 phrases over `IndexDocument.dates` words."""
    lowered = text.lower()
    taken = [False] * len(lowered)
    phrases: list[str] = []
    for pattern in DATE_PATTERNS:
        for m in pattern.finditer(lowered):
            if any(taken[m.start() : m.end()]):
                continue
            groups = m.groupdict()
            month = int(groups["m"]) if groups.get("m") else MONTHS.index(groups["mon"]) + 1
            day = int(groups["d"]) if groups.get("d") else None
            year = groups.get("y")
            if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
                continue
            taken[m.start() : m.end()] = [True] * (m.end() - m.start())
            name = MONTHS[month - 1]
            # Each date once in each form the dates field spells it, so the day (or the month)
            # outscores a stray number or month name in the text by a clear margin.
            if year and day:
                phrases += [f"{year} {month:02d} {day:02d}", f"{day} {name} {year}", f"{name} {year}"]
            elif year:
                phrases += [f"{name} {year}", f"{year} {month:02d}"]
            elif day:
                phrases.append(f"{day} {name}")
            else:
                phrases.append(name)
    return list(dict.fromkeys(phrases))


def query_terms(text: str) -> list[str]:
    """The query's meaningful words (`mneme.text`: no stopwords; all words if nothing else is left), once each."""
    return list(dict.fromkeys(meaningful_words(text) or words(text)))[:MAX_TERMS]


def fts_query(text: str, terms: Sequence[str] | None = None, joiner: str = " OR ") -> str | None:
    """The query's terms (`query_terms`), each quoted and ORed (or joined by `joiner`) over `text`; its
    date-like phrases ORed over `dates`. User syntax never reaches FTS5."""
    terms = query_terms(text) if terms is None else terms
    if not terms:
        return None
    match = "{text}: (" + joiner.join(f'"{w}"' for w in terms) + ")"
    dates = date_phrases(text)
    if dates:
        match += " OR {dates}: (" + " OR ".join(f'"{p}"' for p in dates) + ")"
    return match


def iso_utc(value: datetime) -> str:
    return as_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def metadata_docs(conn: sqlite3.Connection, flt: SearchFilter) -> set[str] | None:
    """The doc ids a metadata filter lets through (None: no metadata filter); the vector cache masks the rest."""
    allowed: set[str] | None = None
    for terms in flt.metadata_clauses():  # read from doc_meta's (tenant, term) key: only the matching documents
        sql = ("SELECT d.doc_id FROM doc_meta m CROSS JOIN docs d ON d.id = m.doc "
               f"WHERE m.tenant = ? AND m.term IN ({','.join('?' * len(terms))})")  # fmt: skip
        found = {row[0] for row in conn.execute(sql, (flt.tenant, *terms))}
        allowed = found if allowed is None else allowed & found
    return allowed


def filter_sql(flt: SearchFilter, params: dict[str, object]) -> str:
    """The non-subtree filters as AND clauses over `d` (docs), binding into `params`."""
    clauses: list[str] = []
    for column, values in (("kind", flt.kinds), ("tier", flt.tiers)):
        if values is not None:
            names = [f"{column}{i}" for i in range(len(values))]
            params.update(zip(names, sorted(values), strict=True))
            clauses.append(f"d.{column} IN ({', '.join(':' + n for n in names)})" if names else "0")
    if flt.since is not None:
        params["since"] = iso_utc(flt.since)
        clauses.append("d.occurred_at >= :since")
    if flt.until is not None:
        params["until"] = iso_utc(flt.until)
        clauses.append("d.occurred_at < :until")
    if flt.session_id is not None:
        params["session"] = flt.session_id
        clauses.append("d.session_id = :session")
    for i, terms in enumerate(flt.metadata_clauses()):
        names = [f"meta{i}_{j}" for j in range(len(terms))]
        params.update(zip(names, terms, strict=True))
        marks = ", ".join(":" + n for n in names)
        clauses.append(f"d.id IN (SELECT doc FROM doc_meta WHERE tenant = :tenant AND term IN ({marks}))")
    if not flt.rollups:
        clauses.append("NOT (d.kind = 'fact' AND d.tier <> 'raw')")
    params["principal"] = flt.principal
    clauses.append("(d.visible_to IS NULL OR d.visible_to = :principal)")
    return "".join(f" AND {c}" for c in clauses)
