"""In-memory exact cosine search over one (tenant, model_id)'s vectors, for `SqliteSearchIndex`.

A contiguous float32 matrix of L2-normalised rows plus parallel metadata arrays (strings are
interned to int32 codes, -1 for None). Replacing or deleting a document marks its row dead and
appends the new row; dead rows are compacted away once they make up a third of the matrix.
A query builds one boolean mask from the filters, scores only the surviving rows (a single
matrix-vector product) and takes the top k with argpartition, so filtering never shrinks the k.

Approximate search for big corpora: once a cache holds `ANN_MIN_ROWS` rows, `build_ann` makes an
8-bit copy of them (faiss-cpu `IndexScalarQuantizer`, see `Ann`), and later rows join it as they are
appended. A query whose mask keeps more than `EXACT_MAX` rows scans it with the mask as faiss's
`IDSelectorBitmap` (the subtree and every other filter apply inside the scan), asks for
`k x ANN_OVERFETCH` candidates and rescores them exactly. A mask keeping at most `EXACT_MAX` rows
(a small subtree, a narrow window) is searched exactly, as before. Compaction renumbers rows, so it
drops the copy (rebuilt next).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mneme.adapters.documents import as_utc
from mneme.search_models import Hit, IndexDocument, SearchFilter

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MARGIN = 1e-5  # float32 rounding slack when cutting candidates before exact rescoring
_CHUNK = 8192  # rows rescored at a time (bounds the float64 temporary)
ANN_MIN_ROWS = 50_000  # an approximate index only for caches this big; smaller ones are scanned exactly
EXACT_MAX = 20_000  # a mask keeping at most this many rows is scanned exactly (~2 ms)
ANN_OVERFETCH = 4  # approximate candidates per wanted hit, rescored exactly


def utc_micros(value: datetime) -> int:
    return (as_utc(value) - EPOCH) // timedelta(microseconds=1)


@dataclass(slots=True)
class Rows:
    """Documents column by column, the shape the cache appends in."""

    doc_ids: list[str]
    kinds: list[str]
    paths: list[list[str]]  # ancestor ids, root first
    occurred_us: list[int]
    tiers: list[str]
    sessions: list[str | None]
    visible_to: list[str | None]
    vectors: NDArray[np.float32]  # L2-normalised, one row per document

    @classmethod
    def of(cls, docs: Sequence[IndexDocument], vectors: NDArray[np.float32]) -> Rows:
        return cls(
            [d.doc_id for d in docs], [d.kind for d in docs], [d.ancestor_ids for d in docs],
            [utc_micros(d.occurred_at) for d in docs], [d.tier for d in docs],
            [d.session_id for d in docs], [d.visible_to for d in docs], vectors,
        )  # fmt: skip


def ann_available() -> bool:
    """faiss-cpu is installed (the `local` extra)."""
    return importlib.util.find_spec("faiss") is not None


def blas_on_calling_thread() -> None:
    """numpy's BLAS on the calling thread alone, for the whole process (OpenBLAS keeps one global
    count). A cache's matrix-vector product gains nothing from a second thread, and OpenBLAS's idle
    threads spin after each call on the core the text search and the other requests need: at 10k
    episodes, hybrid recall p50/p95 12.3/23 -> 8.3/15 ms wall, the process's CPU p95 45 -> 20 ms.
    Needs threadpoolctl (the `local` extra); without it numpy keeps its default."""
    if importlib.util.find_spec("threadpoolctl") is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")


def _faiss() -> Any:
    """faiss, with one OpenMP thread for the calling thread's faiss calls (libgomp keeps the count per
    thread). A query or a write's few rows gain nothing from a second thread, and an OpenMP team spins
    for a while after each call, on the core the rest of the request (and the other requests) need:
    at 100k, hybrid recall p95 84 ms wall against 21 ms with one thread (bench/recall.py)."""
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


class Ann:
    """An 8-bit copy of a cache's rows, scanned whole for candidates (faiss-cpu `IndexScalarQuantizer`,
    inner product): a query reads 384 bytes a row, not the matrix's 1,536, and the caller rescores its
    candidates exactly. A row's code is round(127 x) per component (a unit vector's lie in -1..1), and
    the query is scaled to its own largest component before it is rounded the same way: faiss's
    `QT_8bit_direct_signed` then scans with int8 dot products, twice as fast as its fitted-range 8-bit
    codes, and the candidates still held the exact top 50 of every query below. Codes are kept in
    row order (a label is the row number; dead rows stay, and the mask leaves them out).

    Chosen by measurement over an inverted-file index (IVF-Flat, 64 probed cells), whose candidates
    missed rows of the exact top 10 for paraphrase queries (`bench/quality.py --among`, vector only:
    R@10 0.529 against exact 0.617 at 100k, 0.402 against 0.608 at 1M); the scan's candidates held the
    exact top 50 of every one of those queries, at 100k as fast as the IVF (~3 ms a query), at 1M
    slower (~17 ms against 5-11). It is linear in the rows: beyond a few million it would not do.

    An index read back from a snapshot (`vector_snapshot`) is memory-mapped and read-only (`frozen`,
    rows 0 to F - 1); rows appended after that go to a second, in-memory index with the same
    quantizer (rows F and up), and a search merges the two candidate lists."""

    def __init__(self, index: Any | None, frozen: Any | None = None) -> None:
        self.index = index
        self.frozen = frozen

    @classmethod
    def build(cls, matrix: NDArray[np.float32]) -> Ann:
        """Codes of every row of `matrix`."""
        ann = cls(_empty(_faiss(), matrix.shape[1]))
        for start in range(0, len(matrix), 65536):
            ann.add(matrix[start : start + 65536], start)
        return ann

    def _parts(self) -> list[tuple[Any, int]]:
        """(index, the row number of its first code), in row order."""
        parts = [(self.frozen, 0)] if self.frozen is not None else []
        if self.index is not None:
            parts.append((self.index, self.frozen.ntotal if self.frozen is not None else 0))
        return parts

    @property
    def rows(self) -> int:
        return sum(index.ntotal for index, _ in self._parts())

    def add(self, vectors: NDArray[np.float32], first: int) -> None:
        """Append the codes of rows numbered `first` and up (the next ones: codes stay in row order)."""
        faiss = _faiss()
        if len(vectors) and first != self.rows:
            raise ValueError(f"rows {first}.. appended to an index of {self.rows}")
        if self.index is None:  # restored: the mapped index is read-only; new rows get their own
            assert self.frozen is not None
            self.index = _empty(faiss, self.frozen.d)
        self.index.add(np.clip(np.rint(vectors * 127), -127, 127).astype(np.float32))

    def copy_below(self, rows: int, hold: Callable[[], AbstractContextManager[Any]]) -> Any:
        """One in-memory index of the rows numbered below `rows` (for writing a snapshot of a cache's
        `state` taken at `rows` rows). Writers append to the live index (its buffer may move), so the
        codes are copied 64k rows at a time inside `hold()` (the caller's lock that keeps writers out):
        searches and writes wait for one chunk, not for the whole copy."""
        faiss = _faiss()
        parts = self._parts()
        whole = _empty(faiss, parts[0][0].d)
        width = whole.code_size
        for index, first in parts:
            for start in range(0, max(0, min(index.ntotal, rows - first)), 65536):
                with hold():
                    count = min(65536, rows - first - start, index.ntotal - start)
                    every = faiss.rev_swig_ptr(index.codes.data(), index.ntotal * width)  # valid while held
                    codes = np.array(every[start * width : (start + count) * width]).reshape(count, width)
                whole.add_sa_codes(codes)
        return whole

    def search(self, query: NDArray[np.float32], mask: NDArray[np.bool_], count: int) -> NDArray[np.int64]:
        """Up to `count` rows among those set in `mask`, nearest first by their codes."""
        faiss = _faiss()
        query = np.rint(query * (127 / max(float(np.abs(query).max()), 1e-12))).astype(np.float32)
        found = []
        for index, first in self._parts():
            part = mask[first : first + index.ntotal]
            if not part.any():
                continue
            bits = np.packbits(part, bitorder="little")
            params = faiss.SearchParameters(sel=faiss.IDSelectorBitmap(part.size, faiss.swig_ptr(bits)))
            _, labels = index.search(query.reshape(1, -1), count, params=params)
            found.append(labels[0][labels[0] >= 0] + first)
        return np.concatenate(found) if found else np.empty(0, np.int64)


def _empty(faiss: Any, dim: int) -> Any:
    return faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_INNER_PRODUCT)


class SavedIds:
    """Doc ids by row from a snapshot's NUL-separated block, decoded one at a time (a search needs k of
    them; splitting a million up front cost ~0.1 s CPU at the first query). `tolist` for writes."""

    def __init__(self, block: bytes, count: int) -> None:
        ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 0) if count else np.empty(0, np.int64)
        if ends.size != max(count - 1, 0):
            raise ValueError(f"{ends.size + 1 if count else 0} doc ids for {count} rows")
        self._block, self._count = block, count
        self._starts = np.concatenate([np.zeros(1, np.int64), ends + 1])
        self._ends = np.concatenate([ends, np.array([len(block)], np.int64)])

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, row: int) -> str:
        if not 0 <= row < self._count:
            raise IndexError(row)
        return self._block[int(self._starts[row]) : int(self._ends[row])].decode()

    def tolist(self) -> list[str]:
        return self._block.decode().split("\0") if self._count else []


class VectorCache:
    def __init__(self, generation: int, dim: int | None = None) -> None:
        self.generation = generation  # the index generation this cache reflects
        self.saved_generation: int | None = None  # the generation of its snapshot on disk, if any
        self.dim = dim
        self._n = 0  # rows in use, dead ones included
        self._dead = 0
        self._pos_map: dict[str, int] | None = {}  # doc_id -> live row; None until needed (restored caches)
        self._doc_ids: list[str] | SavedIds = []
        self._codes: dict[str, int] = {}
        self._anc_depths: dict[int, set[int]] = {}  # ancestor code -> columns it was seen in
        self.ann: Ann | None = None
        self._alloc(0, 0)

    def _alloc(self, cap: int, dim: int) -> None:
        self._mat = np.zeros((cap, dim), np.float32)
        self._alive = np.zeros(cap, bool)
        self._occ = np.zeros(cap, np.int64)
        self._kind = np.full(cap, -1, np.int32)
        self._tier = np.full(cap, -1, np.int32)
        self._session = np.full(cap, -1, np.int32)
        self._visible = np.full(cap, -1, np.int32)
        self._anc: list[NDArray[np.int32]] = []  # one column per depth, -1 padded

    def _arrays(self) -> list[np.ndarray]:
        return [self._mat, self._alive, self._occ, self._kind, self._tier, self._session, self._visible]

    def _encode(self, values: Iterable[str | None]) -> list[int]:
        codes = self._codes
        return [-1 if v is None else codes.setdefault(v, len(codes)) for v in values]

    def _reserve(self, extra: int, depth: int) -> None:
        cap = len(self._alive)
        if self._n + extra > cap:
            need = self._n + extra
            new_cap = max(need + need // 8, cap + cap // 2, 64)  # headroom for later upserts
            old, old_anc = self._arrays(), self._anc
            self._alloc(new_cap, self.dim or 0)
            for src, dst in zip(old, self._arrays(), strict=True):
                dst[: self._n] = src[: self._n]
            for col in old_anc:
                self._anc.append(np.full(new_cap, -1, np.int32))
                self._anc[-1][: self._n] = col[: self._n]
        while len(self._anc) < depth:
            self._anc.append(np.full(len(self._alive), -1, np.int32))

    # -- writes -----------------------------------------------------------------------------
    def add(self, rows: Rows) -> None:
        """Append rows (distinct doc_ids); a doc_id already present is replaced."""
        count = len(rows.doc_ids)
        if not count:
            return
        if self.dim is None:
            self.dim = int(rows.vectors.shape[1])
            self._mat = np.zeros((len(self._alive), self.dim), np.float32)
        self.remove(rows.doc_ids)
        self._reserve(count, max(map(len, rows.paths)))
        at = range(self._n, self._n + count)
        new = slice(at.start, at.stop)
        self._mat[new] = rows.vectors
        self._alive[new] = True
        self._occ[new] = rows.occurred_us
        self._kind[new] = self._encode(rows.kinds)
        self._tier[new] = self._encode(rows.tiers)
        self._session[new] = self._encode(rows.sessions)
        self._visible[new] = self._encode(rows.visible_to)
        self._ids().extend(rows.doc_ids)
        self._pos.update(zip(rows.doc_ids, at, strict=True))
        self._write_ancestors(at, rows.paths)
        self._n = at.stop
        if self.ann is not None:
            self.ann.add(rows.vectors, at.start)

    def _write_ancestors(self, rows: Sequence[int], paths: Sequence[Sequence[str]]) -> None:
        at = np.asarray(rows, dtype=np.int64)
        for depth, col in enumerate(self._anc):
            codes = self._encode(path[depth] if depth < len(path) else None for path in paths)
            col[at] = codes
            for code in set(codes) - {-1}:
                self._anc_depths.setdefault(code, set()).add(depth)

    def remove(self, doc_ids: Iterable[str]) -> None:
        for doc_id in doc_ids:
            row = self._pos.pop(doc_id, None)
            if row is not None:
                self._alive[row] = False
                self._dead += 1
        if self._dead > 1024 and self._dead * 3 > self._n:
            self._compact()

    def set_ancestors(self, doc_ids: Iterable[str], ancestor_ids: Sequence[str]) -> None:
        rows = [self._pos[d] for d in doc_ids if d in self._pos]
        self._reserve(0, len(ancestor_ids))
        self._write_ancestors(rows, [ancestor_ids] * len(rows))

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        old, old_anc = self._arrays(), self._anc
        self._alloc(len(keep), self.dim or 0)
        for src, dst in zip(old, self._arrays(), strict=True):
            dst[:] = src[keep]
        self._anc = [col[keep] for col in old_anc]
        ids = self._ids()
        self._doc_ids = [ids[i] for i in keep]
        self._pos_map = {doc_id: i for i, doc_id in enumerate(self._doc_ids)}
        self._n, self._dead = len(keep), 0
        self.ann = None  # row numbers changed: the index is rebuilt by the next `build_ann`

    # -- snapshots (written and read by `vector_snapshot`) ------------------------------------
    def state(self) -> tuple[dict[str, NDArray[Any]], list[str], dict[str, Any]]:
        """The cache as arrays (rows in use, dead ones included), its doc ids and the small rest: a
        consistent copy, to be taken with writers held off and used after they go on. The small arrays
        are copied (writes change `alive` and ancestor columns in place); the matrix is a view of its
        rows in use, which no write changes again (rows are appended; a compaction or a growth makes
        new arrays)."""
        n = self._n
        arrays = {"matrix": self._mat[:n]}
        for name, array in zip(("alive", "occ", "kind", "tier", "session", "visible"), self._arrays()[1:], strict=True):
            arrays[name] = array[:n].copy()
        arrays["anc"] = np.stack([col[:n] for col in self._anc]) if self._anc else np.zeros((0, n), np.int32)
        meta = {
            "generation": self.generation, "dim": self.dim, "n": n, "dead": self._dead,
            "codes": list(self._codes),  # insertion order = code order
            "anc_depths": {str(code): sorted(depths) for code, depths in self._anc_depths.items()},
        }  # fmt: skip
        return arrays, self._ids()[:n], meta

    @classmethod
    def from_state(
        cls, arrays: dict[str, NDArray[Any]], doc_ids: list[str] | SavedIds, meta: dict[str, Any], ann: Ann | None
    ) -> VectorCache:
        """The inverse of `state` (arrays may be copy-on-write memory maps: they are written in place)."""
        cache = cls(int(meta["generation"]), meta["dim"])
        cache._n = int(meta["n"])
        cache._dead = int(meta["dead"])
        cache._mat, cache._alive, cache._occ = arrays["matrix"], arrays["alive"], arrays["occ"]
        cache._kind, cache._tier = arrays["kind"], arrays["tier"]
        cache._session, cache._visible = arrays["session"], arrays["visible"]
        cache._anc = list(arrays["anc"])
        cache._doc_ids = doc_ids
        cache._codes = {value: code for code, value in enumerate(meta["codes"])}
        cache._anc_depths = {int(code): set(depths) for code, depths in meta["anc_depths"].items()}
        cache._pos_map = None  # built by the first write (a search does not need it)
        cache.ann = ann
        cache.saved_generation = cache.generation
        return cache

    def _ids(self) -> list[str]:
        """The doc ids as a list (a restored cache's are decoded here, at its first write)."""
        if isinstance(self._doc_ids, SavedIds):
            self._doc_ids = self._doc_ids.tolist()
        return self._doc_ids

    @property
    def _pos(self) -> dict[str, int]:
        if self._pos_map is None:
            n, ids = self._n, self._ids()
            pos = dict(zip(ids, range(n), strict=True))  # a replaced doc's live row comes later and wins
            for row in np.flatnonzero(~self._alive[:n]).tolist():
                if pos.get(ids[row]) == row:  # deleted, not replaced
                    del pos[ids[row]]
            self._pos_map = pos
        return self._pos_map

    def sample(self, count: int) -> list[tuple[str, NDArray[np.float32]]]:
        """Up to `count` live (doc_id, vector) spread over the rows, the last one included (for
        checking a snapshot against the file)."""
        live = np.flatnonzero(self._alive[: self._n])
        if not live.size:
            return []
        picks = np.unique(np.linspace(0, live.size - 1, min(count, live.size)).astype(np.int64))
        return [(self._doc_ids[row], self._mat[row]) for row in live[picks].tolist()]

    # -- reads ------------------------------------------------------------------------------
    def _mask(self, flt: SearchFilter, allowed: Collection[str] | None = None) -> NDArray[np.bool_] | None:
        n = self._n
        anc = self._codes.get(flt.ancestor_id)
        if anc is None:
            return None
        mask = np.zeros(n, bool)
        for depth in self._anc_depths.get(anc, ()):
            mask |= self._anc[depth][:n] == anc
        mask &= self._alive[:n]

        def among(values: Iterable[str]) -> list[int]:
            return [self._codes[v] for v in values if v in self._codes]

        if flt.kinds is not None:
            mask &= np.isin(self._kind[:n], among(flt.kinds))
        if flt.tiers is not None:
            mask &= np.isin(self._tier[:n], among(flt.tiers))
        if flt.since is not None:
            mask &= self._occ[:n] >= utc_micros(flt.since)
        if flt.until is not None:
            mask &= self._occ[:n] < utc_micros(flt.until)
        if flt.session_id is not None:
            mask &= self._session[:n] == self._codes.get(flt.session_id, -2)
        if not flt.rollups or flt.rollup_tiers is not None:
            kept = among(flt.rollup_tiers) if flt.rollups and flt.rollup_tiers else []
            mask &= (
                (self._kind[:n] != self._codes.get("fact", -2))
                | (self._tier[:n] == self._codes.get("raw", -2))
                | np.isin(self._tier[:n], kept)
            )
        principal = -2 if flt.principal is None else self._codes.get(flt.principal, -2)
        mask &= (self._visible[:n] == -1) | (self._visible[:n] == principal)
        if allowed is not None:
            pos = self._pos
            keep = np.zeros(n, bool)
            keep[[pos[doc_id] for doc_id in allowed if doc_id in pos]] = True
            mask &= keep
        return mask

    @property
    def rows(self) -> int:
        """Rows alive."""
        return self._n - self._dead

    def wants_ann(self) -> bool:
        """Big enough for an approximate index, and without one."""
        return self.ann is None and self.rows >= ANN_MIN_ROWS

    def build_ann(self) -> None:
        """Build the approximate index over every live row; the caller holds off writers and searches."""
        self.ann = Ann.build(self._mat[: self._n])

    def search(
        self,
        flt: SearchFilter,
        query: NDArray[np.float64],
        k: int,
        *,
        exact: bool = False,
        allowed: Collection[str] | None = None,
    ) -> list[Hit]:
        """Top k by cosine among rows passing `flt` (and, given `allowed`, whose doc id is in it); `query` is
        L2-normalised, of length `dim`. Approximate (see the module doc) for a broad mask over a cache with
        an index, unless `exact`."""
        mask = self._mask(flt, allowed) if k > 0 else None
        if mask is None:
            return []
        q32 = query.astype(np.float32)
        ann = None if exact else self.ann
        if ann is not None and int(np.count_nonzero(mask)) > EXACT_MAX:
            rows = ann.search(q32, mask, k * ANN_OVERFETCH)
        else:
            rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        few = rows.size * 4 < self._n  # few survivors: gather them rather than score every row
        scores = self._mat[rows] @ q32 if few else (self._mat[: self._n] @ q32)[rows]
        if rows.size > k:
            top = np.argpartition(-scores, k - 1)[:k]
            rows = rows[scores >= scores[top].min() - _MARGIN]
        # Rescore the candidates in float64 with a row-wise reduction, so identical vectors get
        # identical scores wherever they sit and ties fall to doc_id.
        exact_scores = np.concatenate(
            [
                (self._mat[chunk].astype(np.float64) * query).sum(axis=1)
                for chunk in np.array_split(rows, -(-rows.size // _CHUNK))
            ]
        )
        ranked = sorted(zip(np.clip(exact_scores, -1.0, 1.0).tolist(), rows.tolist(), strict=True), key=self._order)
        return [Hit(doc_id=self._doc_ids[row], score=score) for score, row in ranked[:k]]

    def _order(self, candidate: tuple[float, int]) -> tuple[float, str]:
        return -candidate[0], self._doc_ids[candidate[1]]


class CacheSet:
    """The loaded caches, keyed by (tenant, model_id), kept in step with committed writes.

    Each cache carries the tenant generation it reflects. After a write commits, `committed`
    advances the caches that saw every earlier write; the caller then applies its own write to
    those. A cache that missed a write (another process wrote in between) is left as it is: its
    generation is behind the file's, so the next search catches it up from the change log.
    """

    def __init__(self) -> None:
        self._caches: dict[tuple[str, str], VectorCache] = {}
        self._in_step: set[tuple[str, str]] | None = None  # after `committed`: the caches its write applies to

    def get(self, tenant: str, model_id: str) -> VectorCache | None:
        return self._caches.get((tenant, model_id))

    def put(self, tenant: str, model_id: str, cache: VectorCache) -> None:
        self._caches[(tenant, model_id)] = cache

    def items(self) -> list[tuple[tuple[str, str], VectorCache]]:
        return list(self._caches.items())

    def _of(self, tenant: str) -> list[tuple[str, VectorCache]]:
        return [
            (model_id, cache)
            for (t, model_id), cache in self._caches.items()
            if t == tenant and (self._in_step is None or (t, model_id) in self._in_step)
        ]

    def committed(self, generations: dict[str, int]) -> None:
        self._in_step = set()
        for key, cache in self._caches.items():
            gen = generations.get(key[0])
            if gen is not None and cache.generation == gen - 1:
                cache.generation = gen
                self._in_step.add(key)

    def settled(self) -> None:
        self._in_step = None

    def upserted(
        self, docs: dict[tuple[str, str], IndexDocument], vectors: dict[tuple[str, str], NDArray[np.float32]]
    ) -> None:
        for tenant in {t for t, _ in docs}:
            batch = [d for (t, _), d in docs.items() if t == tenant]
            for model_id, cache in self._of(tenant):
                cache.remove(d.doc_id for d in batch)
                fresh = [d for d in batch if d.model_id == model_id and (tenant, d.doc_id) in vectors]
                if fresh:
                    cache.add(Rows.of(fresh, np.stack([vectors[(tenant, d.doc_id)] for d in fresh])))

    def removed(self, tenant: str, doc_ids: Sequence[str]) -> None:
        for _, cache in self._of(tenant):
            cache.remove(doc_ids)

    def moved(self, tenant: str, doc_ids: Sequence[str], ancestor_ids: Sequence[str]) -> None:
        for _, cache in self._of(tenant):
            cache.set_ancestors(doc_ids, ancestor_ids)

    def drop(self, tenant: str | None = None) -> None:
        for key in [key for key in self._caches if tenant is None or key[0] == tenant]:
            del self._caches[key]
