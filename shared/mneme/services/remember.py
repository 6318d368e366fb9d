"""remember: validate, embed, store, index. Batches are all-or-nothing; retries write nothing twice.

When the embedding service is unavailable (`StoreUnavailable`, `Throttled`: a Bedrock brownout), remember
still answers 201: the episodes are stored without a vector (the record store is the truth, nothing
acknowledged is lost), indexed by their words at once (BM25 finds them), left unindexed, and answered with
`indexed: false` and the warning `embedding_deferred`. The repair sweep embeds them and indexes them again,
vector included (`Indexer.index_episodes`); recall's vector leg skips them until then.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from mneme import sttp
from mneme.errors import Conflict, InvalidInput, MnemeError, PayloadTooLarge, ScopeNotFound, StoreUnavailable, Throttled
from mneme.models import Episode, Principal, Tier, Timestamp
from mneme.observability import logger
from mneme.ports import Clock, ConsolidationStore, Embedder, EpisodeStore
from mneme.services.indexing import Indexer
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAX_CONTENT_BYTES = 32 * 1024
MAX_METADATA_BYTES = 4 * 1024
MAX_BATCH = 100
T = TypeVar("T")
R = TypeVar("R")
SESSION_ID_PATTERN = r"^[A-Za-z0-9._:@-]+$"


class RememberStore(EpisodeStore, ConsolidationStore, Protocol):
    """The record store's roles remembering uses: episodes, and marking their scopes dirty."""


class RememberItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str = Field(min_length=4, max_length=600, description="the scope to store it in")
    # The size limit is in bytes, a 413 (DESIGN: too large) like every content limit; the schema still says it.
    content: str = Field(
        min_length=1,
        json_schema_extra={"maxLength": MAX_CONTENT_BYTES},
        description="the observation, self-contained: name the subject, include dates and specifics",
    )
    occurred_at: Timestamp | None = Field(default=None, description="when it happened, with a timezone (default: now)")
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=SESSION_ID_PATTERN,
        description=(
            "the conversation this turn belongs to: the two turns of the same session and scope said just before "
            "it (within the hour) are searched with it, so a short reply is found by a question about what was asked"
        ),
    )
    tier: Tier = "raw"
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "returned unchanged on recall; `speaker` (a string: who said it, for a conversation's turns) "
            "is also searched, and a recall query naming that person favours their turns"
        ),
    )
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=256, description="a retry with the same key returns the first result"
    )
    create_scope: StrictBool = Field(default=False, description="create the scope (and its parents) if missing")
    format: Literal["text", "sttp"] = "text"
    profile: Literal["strict", "tolerant"] = "strict"  # how an STTP node is validated


class Message(BaseModel):
    """One turn of a conversation: who said it (`name`, or else `role`) and what they said."""

    model_config = ConfigDict(extra="forbid")

    role: str | None = Field(default=None, min_length=1, max_length=64, description="user, assistant, system, tool, …")
    name: str | None = Field(default=None, min_length=1, max_length=128, description="the speaker's name, if known")
    content: str = Field(min_length=1)
    occurred_at: Timestamp | None = Field(default=None, description="when it was said (default: the call's time)")

    @property
    def speaker(self) -> str:
        return (self.name or self.role or "").strip()


class Conversation(BaseModel):
    """A conversation's messages in the order they were said: one episode each, in one session, the speaker
    in `metadata.speaker` (and the role in `metadata.role`), each with its place in the call (`sequence`)."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(min_length=4, max_length=600, description="the scope to store it in")
    messages: list[Message] = Field(
        min_length=1, max_length=MAX_BATCH, description="the turns in the order they were said: role or name, content"
    )
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=SESSION_ID_PATTERN,
        description="the conversation's id: its turns are searched with the turns said just before them",
    )
    occurred_at: Timestamp | None = Field(default=None, description="the time of the messages that give none")
    metadata: dict[str, Any] = Field(default_factory=dict, description="returned with every message's recall")
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=256, description="a retry with the same key writes nothing twice"
    )
    create_scope: StrictBool = Field(default=False, description="create the scope (and its parents) if missing")

    def items(self) -> list[RememberItem]:
        """One item a message. Each message's idempotency key derives from the call's key, or absent one
        from the call's scope, session and metadata and the message's place, speaker, text and time: a
        retried call writes nothing twice, also when its messages give no time."""
        for index, message in enumerate(self.messages):
            if not message.speaker:
                raise InvalidInput(
                    f"message {index}: give its role or name", code="invalid_message", details={"item": index}
                )
        call = self.idempotency_key or json.dumps(
            [self.scope, self.session_id, self.metadata, self.occurred_at and self.occurred_at.isoformat()],
            sort_keys=True,
        )
        return [
            RememberItem(
                scope=self.scope,
                content=message.content,
                occurred_at=message.occurred_at or self.occurred_at,
                session_id=self.session_id,
                metadata={**self.metadata, **self._speaker(message)},
                idempotency_key=self._key(call, index, message),
                create_scope=self.create_scope,
            )
            for index, message in enumerate(self.messages)
        ]

    @staticmethod
    def _speaker(message: Message) -> dict[str, str]:
        return {"speaker": message.speaker} | ({"role": message.role} if message.role else {})

    @staticmethod
    def _key(call: str, index: int, message: Message) -> str:
        when = message.occurred_at and message.occurred_at.isoformat()
        basis = json.dumps([call, index, message.role, message.name, message.content, when])
        return "msg_" + hashlib.sha256(basis.encode()).hexdigest()[:40]


def first_of_each(episodes: list[Episode]) -> dict[str, Episode]:
    """The first episode of each id, in batch order."""
    unique: dict[str, Episode] = {}
    for episode in episodes:
        unique.setdefault(episode.episode_id, episode)
    return unique


EMBEDDING_DEFERRED = "embedding_deferred"


class Remembered(BaseModel):
    episode_id: str
    created: bool  # True for exactly one caller: the one whose conditional write stored the episode
    indexed: bool
    warnings: list[Literal["embedding_deferred"]] = Field(
        default_factory=list,
        description=(
            "embedding_deferred: the embedding service was unavailable; the episode is stored and found by "
            "its words now, and by meaning once the index repair embeds it (within minutes; indexed is false "
            "until then)"
        ),
    )


def reused_for(earlier: Episode, episode: Episode) -> str:
    """What differs between the item an idempotency key was first used for and this one."""
    if earlier.scope_id != episode.scope_id:
        return "another scope"
    if earlier.content != episode.content:
        return "different content"
    return "the same content with other fields (kind, tier, session, metadata or time)"


def episode_id(tenant: str, item: RememberItem, scope_id: str, occurred_at: datetime) -> str:
    """From the idempotency key; absent one, from scope, content, occurred_at (and the other fields, so two
    observations that differ only in metadata stay two episodes)."""
    if item.idempotency_key is not None:
        basis = ["key", tenant, item.idempotency_key]
    else:
        basis = ["auto", tenant, scope_id, item.content, occurred_at.isoformat(), content_hash(scope_id, item)]
    return "ep_" + hashlib.sha256("\x1f".join(basis).encode()).hexdigest()[:32]


def content_hash(scope_id: str, item: RememberItem) -> str:
    canonical = json.dumps([scope_id, item.content, item.session_id, item.tier, item.metadata], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def sttp_fields(index: int, item: RememberItem) -> dict[str, Any]:
    """Validate an STTP node; a failure is a 400 carrying the diagnostics. The raw text is kept as is."""
    result = sttp.parse(item.content, item.profile)
    if result.node is None or not result.ok:
        raise InvalidInput(
            f"item {index}: the STTP node is not valid under the {item.profile} profile",
            code="invalid_sttp",
            details={"item": index, "diagnostics": [asdict(d) for d in result.diagnostics]},
        )
    return sttp.node_to_episode_fields(result.node)


def check_limits(index: int, item: RememberItem) -> None:
    where = {"item": index}
    if not item.content.strip():
        raise InvalidInput(f"item {index}: content is empty", code="invalid_content", details=where)
    if len(item.content.encode()) > MAX_CONTENT_BYTES:
        raise PayloadTooLarge(f"item {index}: content exceeds {MAX_CONTENT_BYTES} bytes", details=where)
    if len(json.dumps(item.metadata).encode()) > MAX_METADATA_BYTES:
        raise PayloadTooLarge(f"item {index}: metadata exceeds {MAX_METADATA_BYTES} bytes", details=where)
    if item.occurred_at is not None and item.occurred_at.tzinfo is None:
        raise InvalidInput(f"item {index}: occurred_at needs a timezone (e.g. Z)", details=where)


def in_background(work: Callable[[T], R], arg: T) -> Future[R]:
    """`work(arg)` on a thread of its own, so the caller's thread goes on meanwhile (a call's embedding,
    which holds no lock and writes nothing, runs beside the rest of its preparation)."""
    future: Future[R] = Future()

    def run() -> None:
        try:
            future.set_result(work(arg))
        except BaseException as e:
            future.set_exception(e)

    threading.Thread(target=run, name="remember-embed", daemon=True).start()
    return future


@dataclass
class RememberService:
    store: RememberStore
    clock: Clock
    scopes: ScopeService
    embedder: Embedder
    indexer: Indexer

    @per_request  # the batch's paths share their prefixes, its episodes their ancestors: each read once
    def remember(self, caller: Principal, items: list[RememberItem]) -> list[Remembered]:
        """Store every item or none; the error names the first bad item."""
        if not 1 <= len(items) <= MAX_BATCH:
            raise InvalidInput(f"a batch holds 1 to {MAX_BATCH} items", code="invalid_batch")
        for index, item in enumerate(items):
            check_limits(index, item)
        nodes = {index: sttp_fields(index, item) for index, item in enumerate(items) if item.format == "sttp"}
        scope_ids = self._scope_ids(caller, items)
        now = self.clock.now()
        episodes = [
            self._episode(caller, item, scope_ids[item.scope], now, index, nodes.get(index))
            for index, item in enumerate(items)
        ]
        unique = first_of_each(episodes)
        existing = self.store.get_episodes(caller.tenant, list(unique))
        for index, episode in enumerate(episodes):
            earlier = existing.get(episode.episode_id) or unique[episode.episode_id]
            if earlier.content_hash != episode.content_hash:
                raise Conflict(
                    f"item {index}: this idempotency key was already used for {reused_for(earlier, episode)}",
                    code="idempotency_key_reused",
                    details={"item": index, "episode_id": episode.episode_id},
                )
        new = [e for e in unique.values() if e.episode_id not in existing]
        if new:
            new = self._embedded_and_indexed(caller, new, now)
        try:
            written, created = self.store.put_episodes(new) if new else ([], set())
        except Conflict as race:  # another writer stored a different item under one of these keys meanwhile:
            if race.code == "idempotency_key_reused":  # the index holds this call's text, give it the stored one
                stored_now = self.store.get_episodes(caller.tenant, [ep.episode_id for ep in new])
                self.indexer.upsert_episodes(list(stored_now.values()))
            raise
        stored = {**existing, **{e.episode_id: e for e in written}}
        answers = []
        for e in episodes:  # the conditional write decided: only the caller that wrote a record created it
            record = stored[e.episode_id]
            deferred = not record.indexed and record.vector is None  # no vector yet: the sweep embeds it
            answers.append(
                Remembered(
                    episode_id=e.episode_id,
                    created=e.episode_id in created,
                    indexed=record.indexed,
                    warnings=[EMBEDDING_DEFERRED] if deferred else [],
                )
            )
            created.discard(e.episode_id)  # the same item twice in a batch is created once
        return answers

    def _embedded_and_indexed(self, caller: Principal, new: list[Episode], now: datetime) -> list[Episode]:
        """The new episodes with their vectors (none while the embedding service is unavailable), already in
        the index (`indexed` says whether that worked, and is False without a vector):
        the index is written before the records, so a stored episode is marked indexed as it is written,
        never rewritten to say so (on DynamoDB, the write units of a second write of the whole item). A
        crash between the two leaves documents without records, which recall never shows (it reads the
        records) and the caller's retry writes again."""
        # The consolidation mark first: a crash after the write must not leave a scope without its mark, and
        # a store that cannot write (a full disk: 507) refuses before the model starts, so a refused call
        # leaves no embedding running behind it. While the model runs: the index documents but their vectors.
        self.store.mark_dirty(caller.tenant, sorted({e.scope_id for e in new}), now)
        embedding = in_background(self.embedder.embed, [e.search_text or e.content for e in new])
        drafts = self.indexer.draft_documents(new)
        vectors = self._vectors(embedding)
        if vectors is None:  # indexed by their words now, not marked: the sweep embeds and indexes them again
            self.indexer.upsert_episodes(new, drafts)
            return new
        new = [
            e.model_copy(update={"vector": v.tolist(), "model_id": self.embedder.model_id})
            for e, v in zip(new, vectors, strict=True)
        ]
        indexed = self.indexer.upsert_episodes(new, drafts)
        return [e.model_copy(update={"indexed": indexed}) for e in new]

    def _vectors(self, embedding: Future[NDArray[np.float32]]) -> NDArray[np.float32] | None:
        """The batch's vectors; None when the embedding service is unavailable (the episodes are then
        stored without one, for the sweep to embed). Other failures (a rejected text, a denied model:
        faults to fix, not to wait out) reach the caller."""
        try:
            return embedding.result()
        except (StoreUnavailable, Throttled) as e:
            logger.warning("embedding unavailable; storing without vectors", extra={"code": e.code})
            return None

    def _scope_ids(self, caller: Principal, items: list[RememberItem]) -> dict[str, str]:
        """Resolve every scope first; create the missing ones only when the whole batch is valid."""
        resolved: dict[str, str] = {}
        missing: list[str] = []
        for index, item in enumerate(items):
            if item.scope in resolved or item.scope in missing:
                continue
            try:
                resolved[item.scope] = self.scopes.resolve(caller.tenant, item.scope).scope.scope_id
            except ScopeNotFound:
                if not item.create_scope:
                    raise ScopeNotFound(
                        f"item {index}: scope {item.scope!r} does not exist (pass create_scope: true)",
                        details={"item": index, "path": item.scope},
                    ) from None
                missing.append(item.scope)
            except MnemeError as e:
                e.message, e.details = f"item {index}: {e.message}", {"item": index, "path": item.scope}
                raise
        for path in missing:
            try:
                resolved[path] = self.scopes.create(caller.tenant, path, parents=True).scope.scope_id
            except Conflict:  # created concurrently
                resolved[path] = self.scopes.resolve(caller.tenant, path).scope.scope_id
        return resolved

    def _episode(
        self,
        caller: Principal,
        item: RememberItem,
        scope_id: str,
        now: datetime,
        sequence: int,
        node: dict[str, Any] | None,
    ) -> Episode:
        node = node or {}
        occurred_at = (item.occurred_at or node.get("occurred_at") or now).astimezone(UTC)
        return Episode(
            tenant=caller.tenant,
            episode_id=episode_id(caller.tenant, item, scope_id, occurred_at),
            scope_id=scope_id,
            content=item.content,
            content_hash=content_hash(scope_id, item),
            occurred_at=occurred_at,
            created_at=now,
            author=caller.principal,
            session_id=item.session_id or node.get("session_id"),
            sequence=sequence,
            tier=node.get("tier") or item.tier,
            metadata=item.metadata,
            format=item.format,
            search_text=node.get("text"),
            structured=node.get("metadata"),
        )
