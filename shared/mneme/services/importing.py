"""Import an export (`mneme-export/1` JSON lines) into a tenant: all or nothing, or record by record.

All or nothing (the default): every write of the import is one store transaction (`ports.Atomic`), so a line
that fails (a memory whose key is taken, an episode id reused for other content, a malformed record, a full
disk) leaves the tenant as it was, and the error names the line. The search index is written once the records
are committed. With `keep_going` (`mneme import --continue`) each record is written on its own: one that fails
is skipped and reported (line, type, id, error), together with the records of it that cannot stand alone (the
revisions of a memory not imported), and the counts are exactly what was written.

Records whose id exists are left alone (`skipped`), so importing the same file twice changes nothing.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from mneme.errors import InvalidInput, MnemeError, ScopeNotFound
from mneme.models import Episode, HistoryEntry, Memory, Revision
from mneme.ports import Atomic, EpisodeStore, ErasureStore, FactStore, MemoryStore, ScopeStore
from mneme.records import Fact
from mneme.services.indexing import Indexer
from mneme.services.scopes import ScopeService

FORMAT = "mneme-export/1"
BATCH = 100  # episodes or facts written (and, record by record, indexed) together
KINDS = ("scopes", "aliases", "memories", "revisions", "episodes", "facts")


class PortableStore(ScopeStore, MemoryStore, EpisodeStore, FactStore, ErasureStore, Protocol):
    """The record store's roles export, import and erasure use."""


@dataclass
class Imported:
    """What an import wrote: `counts` by kind (and `skipped`: already present); with `keep_going`, `failed`
    lists each record not imported ({line, type, id, code, message})."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*KINDS, "skipped"), 0))
    failed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Pending:
    line: int
    record: Any  # Episode or Fact


@dataclass
class Importer:
    store: PortableStore
    scopes: ScopeService
    indexer: Indexer
    tenant: str
    keep_going: bool
    report: Imported = field(default_factory=Imported)
    scope_ids: dict[str, str] = field(default_factory=dict)
    episodes: list[_Pending] = field(default_factory=list)
    facts: list[_Pending] = field(default_factory=list)
    missing_memories: set[str] = field(default_factory=set)  # ids of memories not imported (keep_going)
    to_index: dict[str, list[str]] = field(default_factory=lambda: {"memories": [], "episodes": [], "facts": []})

    def run(self, lines: Iterable[dict[str, Any]], progress: Callable[[dict[str, int]], None] | None) -> Imported:
        store = self.store
        if self.keep_going:
            self._read(lines, progress)
        else:
            if not isinstance(store, Atomic):
                raise InvalidInput(
                    "this store cannot import all or nothing (no transactions across records): import with "
                    "--continue, which writes record by record and reports each record it could not import",
                    code="import_not_atomic",
                )
            with store.atomic():
                self._read(lines, progress)
        self._index()
        return self.report

    # -- reading ------------------------------------------------------------------------------------
    def _read(self, lines: Iterable[dict[str, Any]], progress: Callable[[dict[str, int]], None] | None) -> None:
        """Each line in its own savepoint; the batches of episodes and facts are written between lines (a
        line that fails never takes a batch down with it)."""
        for number, line in enumerate(lines, start=1):
            if line.get("type") != "episode":
                self._flush_episodes()  # before a fact (its sources first), and any other record
            with self._record(number, line):
                self._line(number, line)
            if len(self.episodes) >= BATCH:
                self._flush_episodes()
            if len(self.facts) >= BATCH:
                self._flush_facts()
            if number % BATCH == 0:
                if self.keep_going:
                    self._index()
                if progress:
                    progress(self.report.counts)
        self._flush_episodes()
        self._flush_facts()

    def _line(self, number: int, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "header":
            if line.get("format") != FORMAT:
                raise InvalidInput(f"not a {FORMAT} file", code="invalid_export")
        elif kind == "layers":
            if not self.store.get_layers(self.tenant):
                self.scopes.set_layers(self.tenant, {int(k): v for k, v in line["layers"].items()})
        elif kind == "scope":
            self._scope_id(line["path"])
        elif kind == "alias":
            parent_path, _, segment = line["path"].rpartition(".")
            parent, target = self._scope_id(parent_path), self._scope_id(line["target"])
            self.report.counts["aliases"] += self.store.put_alias(self.tenant, parent, segment, target)
        elif kind == "memory":
            self._memory(line)
        elif kind == "revision":
            self._revision(line)
        elif kind == "episode":
            fields = {
                **_fields(line),
                "tenant": self.tenant,
                "scope_id": self._scope_id(line["scope"]),
                "indexed": False,
            }
            self.episodes.append(_Pending(number, Episode.model_validate(fields)))
        elif kind == "fact":
            fields = {**_fields(line), "tenant": self.tenant, "scope_id": self._scope_id(line["scope"])}
            self.facts.append(_Pending(number, Fact.model_validate(fields)))
        else:
            raise InvalidInput(f"unknown record type {kind!r}", code="invalid_export")

    @contextlib.contextmanager
    def _record(self, number: int, line: dict[str, Any]) -> Iterator[None]:
        """One line's writes: all or none of them (a savepoint where the store has transactions). A failure
        names the line; with keep_going it is reported and the import goes on."""
        scopes, created = dict(self.scope_ids), self.report.counts["scopes"]
        try:
            with self._savepoint():
                yield
        except (MnemeError, ValidationError, KeyError, TypeError, ValueError) as e:
            if isinstance(self.store, Atomic):  # the line's scopes were rolled back with it
                self.scope_ids, self.report.counts["scopes"] = scopes, created
            self._failed(number, line, e)

    def _failed(self, number: int, line: dict[str, Any], error: Exception) -> None:
        kind, record_id = line.get("type"), _record_id(line)
        refused = error if isinstance(error, MnemeError) else _malformed(kind, error)
        where = f"line {number} ({kind} {record_id})" if record_id else f"line {number} ({kind})"
        if not self.keep_going:
            raise _at(refused, f"{where}: {refused.message}; nothing was imported (an import is all or nothing: "
                               "fix the file, or import with --continue to write every other record)")  # fmt: skip
        if kind == "memory" and record_id:
            self.missing_memories.add(record_id)
        self.report.failed.append({"line": number, "type": kind, "id": record_id, "code": refused.code,
                                   "message": refused.message})  # fmt: skip

    # -- records --------------------------------------------------------------------------------------
    def _scope_id(self, path: str) -> str:
        """The id of the scope at `path`, created (with its parents) when missing."""
        if path not in self.scope_ids:
            scopes = self.scopes
            try:
                self.scope_ids[path] = scopes.resolve(self.tenant, path).scope.scope_id
            except ScopeNotFound:
                self.scope_ids[path] = scopes.create(self.tenant, path, parents=True).scope.scope_id
                self.report.counts["scopes"] += 1
        return self.scope_ids[path]

    def _memory(self, line: dict[str, Any]) -> None:
        scope_id = self._scope_id(line["scope"]) if line.get("scope") else None
        memory = Memory.model_validate({**_fields(line, {"history", "target"}), "tenant": self.tenant,
                                        "scope_id": scope_id})  # fmt: skip
        store = self.store
        if store.get_memory(self.tenant, memory.memory_id) is not None:
            self.report.counts["skipped"] += 1
            return
        store.create_memory(memory)
        for entry in line.get("history", []):
            store.add_history(HistoryEntry.model_validate({**entry, "tenant": self.tenant}))
        self.to_index["memories"].append(memory.memory_id)
        self.report.counts["memories"] += 1

    def _revision(self, line: dict[str, Any]) -> None:
        revision = Revision.model_validate({**_fields(line), "tenant": self.tenant})
        if revision.memory_id in self.missing_memories:
            raise InvalidInput(f"its memory {revision.memory_id} was not imported", code="memory_not_imported")
        store = self.store
        if store.get_revision(self.tenant, revision.memory_id, revision.author) is not None:
            self.report.counts["skipped"] += 1
            return
        store.put_revision(revision)
        self.report.counts["revisions"] += 1

    def _flush_episodes(self) -> None:
        batch, self.episodes = self.episodes, []
        if not batch:
            return
        store = self.store
        existing = store.get_episodes(self.tenant, [p.record.episode_id for p in batch], vectors=False)
        new = [p for p in batch if p.record.episode_id not in existing]
        self.report.counts["skipped"] += len(batch) - len(new)
        self._write(new, lambda records: store.put_episodes(records), "episodes")

    def _flush_facts(self) -> None:
        """Store the new ones, embedded when the export carried no vectors of this model (else recall's vector
        channel and consolidation's reconcile would never see them)."""
        batch, self.facts = self.facts, []
        if not batch:
            return
        existing = self.store.get_facts(self.tenant, [p.record.fact_id for p in batch])
        new = [p for p in batch if p.record.fact_id not in existing]
        self.report.counts["skipped"] += len(batch) - len(new)
        embedder = self.indexer.embedder
        stale = [p for p in new if p.record.vector is None or p.record.model_id != embedder.model_id]
        if stale:
            vectors = embedder.embed([p.record.summary for p in stale])
            for pending, vector in zip(stale, vectors, strict=True):
                pending.record = pending.record.model_copy(
                    update={"vector": vector.tolist(), "model_id": embedder.model_id}
                )
        self._write(new, lambda records: self.store.put_facts(records), "facts")

    def _write(self, batch: list[_Pending], put: Callable[[list[Any]], object], kind: str) -> None:
        """A batch in one write; when it fails, record by record (to name the line, and with keep_going to
        write the others)."""
        if not batch:
            return
        try:
            with self._savepoint():
                put([p.record for p in batch])
            written = batch
        except MnemeError:
            written = []
            for pending in batch:
                line = {"type": kind.rstrip("s"), "id": _id(pending.record)}
                with self._record(pending.line, line):
                    put([pending.record])
                    written.append(pending)
        self.to_index[kind] += [_id(p.record) for p in written]
        self.report.counts[kind] += len(written)

    def _savepoint(self) -> contextlib.AbstractContextManager[None]:
        store = self.store
        return store.atomic() if isinstance(store, Atomic) else contextlib.nullcontext()

    # -- the index, once the records are written ------------------------------------------------------
    def _index(self) -> None:
        store, indexer = self.store, self.indexer
        memories, episodes, facts = (self.to_index[kind] for kind in ("memories", "episodes", "facts"))
        for memory in store.get_memories(self.tenant, memories).values():
            indexer.on_memory_change(memory)
        for start in range(0, len(episodes), BATCH):
            found = store.get_episodes(self.tenant, episodes[start : start + BATCH])
            indexer.index_episodes(list(found.values()))  # one that fails is left to the sweep (indexed: false)
        for start in range(0, len(facts), BATCH):
            indexer.index_facts(list(store.get_facts(self.tenant, facts[start : start + BATCH]).values()))
        self.to_index = {"memories": [], "episodes": [], "facts": []}


def _fields(line: dict[str, Any], drop: set[str] | None = None) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k not in {"type", "scope", *(drop or set())}}


def _id(record: Any) -> str:
    return str(record.episode_id if isinstance(record, Episode) else record.fact_id)


def _record_id(line: dict[str, Any]) -> str | None:
    for name in ("memory_id", "episode_id", "fact_id", "id", "path"):
        if isinstance(line.get(name), str):
            return str(line[name])[:128]
    return None


def _malformed(kind: Any, error: Exception) -> InvalidInput:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return InvalidInput(f"a {kind} record that does not read: {where}: {first.get('msg')}", code="invalid_export")
    if isinstance(error, KeyError):
        return InvalidInput(f"a {kind} record without its {error.args[0]!r}", code="invalid_export")
    return InvalidInput(f"a {kind} record that does not read ({type(error).__name__})", code="invalid_export")


def _at(error: MnemeError, message: str) -> MnemeError:
    """The same error (class, code, status, details), saying where."""
    placed = copy.copy(error)
    placed.message, placed.args = message, (message,)
    return placed
