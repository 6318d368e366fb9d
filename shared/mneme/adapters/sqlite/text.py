"""The embedded index's text query: the words and date phrases a query matches (FTS5 syntax, user syntax
never reaching it), the filters as SQL, and the statements the text plan runs (`SqliteSearchIndex.search_text`)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from mneme.adapters.documents import as_utc
from mneme.language.text import MONTH, MONTHS, search_words
from mneme.search_models import Hit, SearchFilter

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

BIG_TEXT = 50_000  # documents (the highest id) from which a query of several words ANDs them first
WINDOW = 30_000  # a pass of `TextPlan._and_first` ranks the newest this many matches of its query (bm25 for each)
_DF_CACHE = 4096  # words whose document frequency a process remembers (for dropping the commonest first)
_DF_SAMPLE = 512  # a word's documents are counted up to this, and estimated past it
_RANKED_FIRST_FACTOR = 4  # the first cut: k x this
_RANKED_FIRST_MAX = 20_000  # past this cut, the full join

MAX_TERMS = 32
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
    """The query's words to search by (`mneme.language.text.search_words`: no stopwords, no light verb before "to";
    all words if nothing else is left), once each."""
    return search_words(text)[:MAX_TERMS]


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
    elif flt.rollup_tiers is not None:
        names = [f"rollup_tier{i}" for i in range(len(flt.rollup_tiers))]
        params.update(zip(names, sorted(flt.rollup_tiers), strict=True))
        kept = f" AND d.tier NOT IN ({', '.join(':' + n for n in names)})" if names else ""
        clauses.append(f"NOT (d.kind = 'fact' AND d.tier <> 'raw'{kept})")
    params["principal"] = flt.principal
    clauses.append("(d.visible_to IS NULL OR d.visible_to = :principal)")
    return "".join(f" AND {c}" for c in clauses)


class TextPlan:
    """How a text query runs against the file: a small subtree walks its own documents
    (`subtree_first_max`: subtree size x query words); a big corpus (`approximate_text_from` documents,
    the highest id) ANDs the words first (`_and_first`); otherwise FTS5 ranks and cuts first and the
    filters apply to the cut, widened until the top k is the true filtered top k."""

    def __init__(self, subtree_first_max: int, approximate_text_from: int) -> None:
        self.subtree_first_max = subtree_first_max
        self.approximate_text_from = approximate_text_from
        self._df: dict[str, int] = {}  # word -> documents holding it (`_frequency`)

    def search(self, conn: sqlite3.Connection, flt: SearchFilter, query: str, k: int) -> list[Hit]:
        match = fts_query(query)
        if k <= 0 or match is None:
            return []
        params: dict[str, object] = {"q": match, "tenant": flt.tenant, "anc": flt.ancestor_id, "k": k}
        where = filter_sql(flt, params)
        order = "ORDER BY score DESC, d.doc_id"
        limit = self.subtree_first_max // (match.count(" OR ") + 1)
        small = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM doc_ancestors WHERE tenant = ? AND ancestor_id = ? LIMIT ?)",
            (flt.tenant, flt.ancestor_id, limit + 1),
        ).fetchone()[0]
        if small <= limit:
            rows = conn.execute(f"{SUBTREE_FIRST} {where} {order} LIMIT :k", params).fetchall()
            return [Hit(doc_id=doc_id, score=score) for doc_id, score in rows]
        terms = query_terms(query)
        top = conn.execute("SELECT max(id) FROM docs").fetchone()[0] or 0
        if terms and top >= self.approximate_text_from:
            found = self._and_first(conn, query, terms, k, where, params, top)
            if found is not None:
                return found
        n = k * _RANKED_FIRST_FACTOR
        while n <= _RANKED_FIRST_MAX:
            kept, size, last = self._cut(conn, match, 0, n, where, params)
            if not size:
                return []
            hits = sorted(kept, key=lambda hit: (-hit[1], hit[0]))[:k]
            # exact when the cut kept every match, or k survived scoring above the cut's last
            # score (a tie at the cut could hide a lower doc_id beyond it)
            if size < n or (len(hits) == k and hits[-1][1] > last):
                return [Hit(doc_id=doc_id, score=score) for doc_id, score in hits]
            n *= 8
        rows = conn.execute(f"{FTS_FIRST} {where} {order} LIMIT :k", params).fetchall()
        return [Hit(doc_id=doc_id, score=score) for doc_id, score in rows]

    def _and_first(
        self,
        conn: sqlite3.Connection,
        query: str,
        terms: list[str],
        k: int,
        where: str,
        params: dict[str, object],
        top: int,
    ) -> list[Hit] | None:
        """A big corpus: documents holding every word first, then (while fewer than k pass the
        filters) every word but the commonest, and so on down to the rarest word alone; then any
        of the rarest words, one more at a time; None when that still leaves fewer than k (the caller
        then scores every match of any word). Each pass ranks the newest `WINDOW` matches of its
        query (`_ranked`).

        Why: FTS5 computes bm25 for every row a query matches before its ORDER BY rank LIMIT (~1 us a
        row: ~0.3 s for a common word of a 1M corpus); an AND query matches only the rows holding all
        its words. The phrases are the same, so a document holding every word gets its exact OR score;
        a document found by a relaxed query gets the part of its score from the words it was found
        by, a lower bound. Approximate: a document missing a word could outscore one holding them
        all and be missed when k are found before it, and a query matching more than `WINDOW`
        documents ranks only the newest of them (`bench/recall.py` measures the overlap with exact)."""
        best: dict[str, float] = {}

        def found(words: list[str], joiner: str = " AND ", count: int | None = None) -> list[Hit] | None:
            match = fts_query(query, words, joiner) or ""
            for doc_id, score in self._ranked(conn, match, k, where, params, count):
                best[doc_id] = max(score, best.get(doc_id, score))
            if len(best) < k:
                return None
            ranked = sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:k]
            return [Hit(doc_id=doc_id, score=score) for doc_id, score in ranked]

        # counted first: a pass matching at most WINDOW documents needs no window (`_ranked`)
        matched = self._count(conn, fts_query(query, terms, " AND ") or "")
        hits = found(terms, count=matched)
        if hits is not None:
            return hits
        # relaxing: words no document holds go at once, then the commonest first
        df = {w: self._frequency(conn, w, top) for w in terms}
        present = sorted((w for w in terms if df[w]), key=lambda w: df[w])
        # a level matching as many documents as the one before matches the same ones (it holds them all),
        # which scored there at least as high: it is not ranked (FTS5's bm25 reads every document of each
        # word to weigh it, ~0.3 us a document per pass); counting is ~10 times cheaper
        for m in range(len(present), 0, -1):
            if hits is not None:
                return hits
            if m < len(terms):
                count = self._count(conn, fts_query(query, present[:m], " AND ") or "")
                if count != matched:
                    hits = found(present[:m], count=count)
                matched = count
        for m in range(2, len(present) + 1):  # any of the m rarest words (each pass ranks at most WINDOW)
            if hits is not None:
                break
            hits = found(present[:m], " OR ")
        return hits

    def _ranked(
        self,
        conn: sqlite3.Connection,
        match: str,
        k: int,
        where: str,
        params: dict[str, object],
        count: int | None = None,
    ) -> list[tuple[str, float]]:
        """The best-ranked matches of `match` that pass the filters, at least k of them when there are:
        of its newest `WINDOW` matches (all of them when there are fewer: `count`, the matches, when
        known, spares looking for the window's start); when the filters leave fewer than k of a full
        window, of every match (up to cuts of `_RANKED_FIRST_MAX`). FTS5 ranks the window (a rowid
        range) and cuts it to the best n (of documents tied at the cut, the older: the lower rowid)."""
        start = 0
        if count is None or count > WINDOW:
            row = conn.execute(WINDOW_START, (match, WINDOW - 1)).fetchone()
            start = row[0] if row else 0
        found = self._best(conn, match, start, k, where, params)
        if len(found) < k and start:  # the filters are narrow: every match, ranked
            found = self._best(conn, match, 0, k, where, params, _RANKED_FIRST_MAX)
        return found

    def _best(
        self,
        conn: sqlite3.Connection,
        match: str,
        start: int,
        k: int,
        where: str,
        params: dict[str, object],
        most: int | None = None,
    ) -> list[tuple[str, float]]:
        """(doc_id, score) of the best-ranked matches from rowid `start` on that pass the filters: cuts
        of k x `_RANKED_FIRST_FACTOR`, x 8 while fewer than k pass and more match (and the next cut is
        at most `most`)."""
        n = k * _RANKED_FIRST_FACTOR
        while True:
            found, size, _ = self._cut(conn, match, start, n, where, params)
            if len(found) >= k or size < n or (most is not None and n * 8 > most):
                return found
            n *= 8

    @staticmethod
    def _cut(
        conn: sqlite3.Connection, match: str, start: int, n: int, where: str, params: dict[str, object]
    ) -> tuple[list[tuple[str, float]], int, float]:
        """One cut (`CUT`): the (doc_id, score) of its n best matches from rowid `start` on that pass
        the filters, how many it ranked (n, or fewer when fewer match) and its lowest score (-inf: none)."""
        rows = conn.execute(CUT.format(where=where), {**params, "q": match, "start": start, "n": n}).fetchall()
        size, last = 0, float("-inf")
        kept = []
        for doc_id, score, lowest in rows:
            if doc_id is None:
                size, last = int(score), float("-inf") if lowest is None else lowest
            else:
                kept.append((doc_id, score))
        return kept, size, last

    @staticmethod
    def _count(conn: sqlite3.Connection, match: str) -> int:
        return int(conn.execute("SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?", (match,)).fetchone()[0])

    def _frequency(self, conn: sqlite3.Connection, word: str, top: int) -> int:
        """Documents whose text holds `word`, estimated (remembered: it only orders the words to drop):
        counted up to _DF_SAMPLE; past that, the density of its newest _DF_SAMPLE matches over the
        rowids up to `top` (the highest)."""
        found = self._df.get(word)
        if found is None:
            if len(self._df) >= _DF_CACHE:
                self._df.clear()
            match = '{text}: "' + word + '"'
            rows = conn.execute(NEWEST, (match, _DF_SAMPLE)).fetchall()
            found = len(rows)
            if found == _DF_SAMPLE:
                found = max(found, round(_DF_SAMPLE * top / max(top - rows[-1][0] + 1, 1)))
            self._df[word] = found
        return found
