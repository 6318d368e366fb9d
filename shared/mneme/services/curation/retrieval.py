"""retrieve(path): the curated guidance of a scope as one deterministic Markdown bundle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel

from mneme.models import Memory, Principal
from mneme.ports import Clock, MemoryStore, ScopeStore
from mneme.services.context_pack import fenced
from mneme.services.curation.memories import MemoryService, tag_label
from mneme.services.scopes import ScopeService

Bucket = Literal["scoped", "layer", "value"]
BUCKET_OFFSET: dict[Bucket, int] = {"layer": 1, "value": 2, "scoped": 3}
EMISSION_ORDER: tuple[Bucket, ...] = ("scoped", "layer", "value")

CONTRACT = (
    "<!-- mneme bundle for {path}: walked {walk}. At each depth d (root is 0) blocks are emitted "
    "scoped, then layer-wide tagged, then value-targeted tagged, by key; emission order carries no "
    "precedence. Priorities: layer-wide 3d+1, value-targeted 3d+2, scoped 3d+3. A higher priority "
    "overrides a lower one where they conflict; lower-priority guidance still applies elsewhere. "
    "Equal priorities that contradict are a conflict: surface it, do not pick a side. Blocks whose "
    "header ends in '| pending' are unapproved work visible only to their author. -->\n"
)


class RetrievalStore(MemoryStore, ScopeStore, Protocol):
    """The record store's roles bundle retrieval uses: memories and the tenant's layers."""


class Block(BaseModel):
    kind: Literal["scoped", "tagged"]
    target: str  # canonical scope path, or `layer=value` / `layer=*`
    priority: int
    depth: int
    key: str
    memory_id: str
    version: int
    pending: bool
    body: str

    def header(self) -> str:
        parts = [f"{self.kind}: {self.target}", f"priority: {self.priority}", f"key: {self.key}"]
        if self.kind == "tagged":
            parts.append(f"memory_id: {self.memory_id}")
        if self.pending:
            parts.append("pending")
        return "<!-- " + " | ".join(parts) + " -->"

    def markdown(self) -> str:
        return f"{self.header()}\n{fence(self.body.rstrip())}\n"


def fence(body: str) -> str:
    """A body as the bundle renders it: in a code fence of backticks longer than any run of backticks in
    it, as the recall pack fences bodies (`context_pack.fenced`). No line of a body can close the fence,
    so nothing it holds (an unclosed fence, a comment, a look-alike header) can end its block or change
    the Markdown around it; the text inside is the body byte for byte, as `blocks[].body` in JSON."""
    return fenced(body)


class Bundle(BaseModel):
    path: str
    canonical_path: str
    blocks: list[Block]
    markdown: str


def priority(depth: int, bucket: Bucket) -> int:
    return 3 * depth + BUCKET_OFFSET[bucket]


def render(canonical_path: str, walk: list[str], blocks: list[Block]) -> str:
    opening = CONTRACT.format(path=canonical_path, walk=" → ".join(walk))
    return "\n".join([opening, *(block.markdown() for block in blocks)])


@dataclass
class RetrievalService:
    store: RetrievalStore
    clock: Clock
    scopes: ScopeService
    memories: MemoryService

    def retrieve(self, caller: Principal, path: str) -> Bundle:
        resolved = self.scopes.resolve(caller.tenant, path)
        layers = self.store.get_layers(caller.tenant)
        now = self.clock.now()
        revisions = {r.memory_id: r for r in self.store.list_revisions(caller.tenant, author=caller.principal)}
        blocks: list[Block] = []
        walk: list[str] = []
        for depth, scope in enumerate(resolved.chain):
            scope_path = ".".join(s.segment for s in resolved.chain[: depth + 1])
            walk.append(scope_path)
            layer = layers.get(depth)
            buckets: dict[Bucket, list[Memory]] = {
                "scoped": self.store.list_scoped_memories(caller.tenant, scope.scope_id),
                "layer": self.store.list_tagged_memories(caller.tenant, layer, None) if layer else [],
                "value": self.store.list_tagged_memories(caller.tenant, layer, scope.segment) if layer else [],
            }
            for bucket in EMISSION_ORDER:
                visible = self.memories.visible_to(caller, buckets[bucket], now)
                for memory in sorted(visible, key=lambda m: (m.key, m.memory_id)):
                    target = scope_path if bucket == "scoped" else tag_label(memory)
                    revision = revisions.get(memory.memory_id) if memory.status == "published" else None
                    body = revision.changes.get("body", memory.body) if revision else memory.body
                    blocks.append(
                        Block(
                            kind="scoped" if bucket == "scoped" else "tagged",
                            target=target,
                            priority=priority(depth, bucket),
                            depth=depth,
                            key=memory.key,
                            memory_id=memory.memory_id,
                            version=memory.version,
                            pending=memory.status == "pending" or revision is not None,
                            body=body,
                        )
                    )
        return Bundle(
            path=path,
            canonical_path=resolved.path,
            blocks=blocks,
            markdown=render(resolved.path, walk, blocks),
        )
