"""A property over random interleavings of remember (single, batch, repeated keys), create, edit, approve,
reject and erase, run in-process on SQLite with the hashing embedder. After every run:

- every acknowledged episode is readable with its content, or was erased; nothing is stored twice, and of
  all the calls that wrote an episode exactly one was told `created`;
- a non-author never sees unpublished content (another author's pending create, pending revision, or
  rejected proposal) through retrieve, recall, the change feed, reviews or history;
- the feed replayed from the start (latest entry per id, tombstones removing ids) is the visible state:
  the reader's bundles, the scope tree and the live episodes.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from mneme import bootstrap
from mneme.adapters.sqlite.index import SqliteSearchIndex
from mneme.adapters.sqlite.store import SqliteRecordStore
from mneme.errors import Forbidden, MnemeError
from mneme.models import Principal, Role
from mneme.services.recall import RecallRequest
from mneme.services.remember import RememberItem
from mneme.settings import Settings
from tests.conftest import FixedClock, principal
from tests.support.embedding import HashEmbedder

TENANT = "acme"
ADMIN = principal(TENANT, "root-admin", Role.admin)
ANN = principal(TENANT, "ann", Role.approver)
W1, W2 = principal(TENANT, "w1", Role.writer), principal(TENANT, "w2", Role.writer)
RITA = principal(TENANT, "rita", Role.reader)
WRITERS, ACTORS = (W1, W2), (W1, W2, ANN)
SCOPES = ("root.a", "root.e")  # root.e is the one erased
TOKEN = re.compile(r"zq\d+x")
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None  # no fsync cost where a RAM disk exists

item = st.fixed_dictionaries(
    {"scope": st.sampled_from(SCOPES), "content": st.sampled_from(["alpha", "beta"]),
     "key": st.sampled_from([None, "k1", "k2"])}
)  # fmt: skip
operation = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(WRITERS), st.lists(item, min_size=1, max_size=3)),
    st.tuples(st.just("create"), st.sampled_from(ACTORS), st.sampled_from(SCOPES), st.sampled_from(["k1", "k2"])),
    st.tuples(st.just("edit"), st.sampled_from(ACTORS), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("approve"), st.integers(0, 9), st.sampled_from([None, "w1", "w2"])),
    st.tuples(st.just("reject"), st.integers(0, 9), st.sampled_from([None, "w1", "w2"])),
    st.tuples(st.just("erase")),
)


@dataclass
class Model:
    """What the callers were told, and who owns each unpublished text."""

    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # episode id -> (scope, content)
    created: dict[str, int] = field(default_factory=dict)  # episode id -> callers told `created`
    memories: list[str] = field(default_factory=list)
    owner: dict[str, str] = field(default_factory=dict)  # text token -> the only principal who may see it unpublished
    published: set[str] = field(default_factory=set)
    counter: int = 0

    def token(self, owner: str) -> str:
        self.counter += 1
        token = f"zq{self.counter}x"
        self.owner[token] = owner
        return token

    def publish(self, body: str) -> None:
        self.published.update(TOKEN.findall(body))


def build(home: Path) -> bootstrap.Services:
    return bootstrap.build(
        Settings(home=home, cursor_secret="property"),  # type: ignore[arg-type]
        store=SqliteRecordStore(home / "mneme.db"),
        clock=FixedClock(),
        embedder=HashEmbedder(),
        index=SqliteSearchIndex(home / "index.db"),
        background=False,
    )


def run(services: bootstrap.Services, model: Model, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "remember":
        _, writer, items = op
        batch = [RememberItem(scope=i["scope"], content=i["content"], idempotency_key=i["key"], create_scope=True)
                 for i in items]  # fmt: skip
        answers = services.remember.remember(writer, batch)
        for answer, sent in zip(answers, batch, strict=True):
            model.acked[answer.episode_id] = (sent.scope, sent.content)
            model.created[answer.episode_id] = model.created.get(answer.episode_id, 0) + answer.created
            assert model.created[answer.episode_id] <= 1, "two callers were told they created one episode"
    elif kind == "create":
        _, actor, scope, key = op
        if services.store.find_child(TENANT, services.scopes.root(TENANT).scope_id, scope.split(".")[1]) is None:
            services.scopes.create(TENANT, scope, parents=True)
        memory, _ = services.memories.create(actor, scope=scope, key=key, body=f"rule {model.token(actor.principal)}")
        model.memories.append(memory.memory_id)
        if memory.status == "published":
            model.publish(memory.body)
    elif kind == "edit" and model.memories:
        _, actor, index, stale = op
        memory_id = model.memories[index % len(model.memories)]
        stored = services.store.get_memory(TENANT, memory_id)
        if stored is None:  # erased
            return
        pending_create = stored.status == "pending"
        owner = stored.author if pending_create or actor.has(Role.approver) else actor.principal
        version = stored.version + 1 if stale else stored.version
        outcome = services.review.edit(actor, memory_id, version=version, body=f"rule {model.token(owner)}")
        assert not stale, "a stale version was accepted"
        if outcome["revision"] is None and outcome["memory"].status == "published":
            model.publish(outcome["memory"].body)
    elif kind == "approve" and model.memories:
        _, index, author = op
        memory = services.review.approve(ANN, model.memories[index % len(model.memories)], author)
        model.publish(memory.body)
    elif kind == "reject" and model.memories:
        _, index, author = op
        services.review.reject(ANN, model.memories[index % len(model.memories)], "no", author)
    elif kind == "erase":
        services.portability.erase(TENANT, "root.e", dry_run=False)
        for episode_id in [i for i, (scope, _) in model.acked.items() if scope == "root.e"]:
            del model.acked[episode_id]
            model.created.pop(episode_id, None)  # the same key may create it again


def replay(services: bootstrap.Services, viewer: Principal) -> dict[str, tuple[str, Any]]:
    """The feed read from the start in small pages: id -> (kind, record), tombstones removing ids."""
    state: dict[str, tuple[str, Any]] = {}
    seen: list[str] = []
    cursor = None
    while True:
        page = services.feed.changes(viewer, cursor, limit=7)
        for change in page["changes"]:
            seen.append(change["id"])
            if change["deleted"]:
                state.pop(change["id"], None)
            else:
                state[change["id"]] = (change["kind"], change["record"])
        cursor = page["next_cursor"]
        if not page["has_more"]:
            assert len(seen) == len(set(seen)), "a record appears twice in one read of the feed"
            return state


def visible(services: bootstrap.Services, viewer: Principal) -> tuple[str, dict[str, tuple[int, str]]]:
    """Everything the viewer can read through retrieve, recall, reviews and history, as text, and the
    memories of its bundles (id -> (version, body))."""
    texts: list[str] = []
    bundled: dict[str, tuple[int, str]] = {}
    for path, _ in services.scopes.subtree(TENANT, "root"):
        bundle = services.retrieval.retrieve(viewer, path)
        texts.append(bundle.markdown)
        bundled.update({b.memory_id: (b.version, b.body) for b in bundle.blocks})
    query = " ".join(f"rule zq{n}x" for n in range(1, 60))
    recalled = services.recall.recall(viewer, RecallRequest(query=query, limit=200))
    texts.append("recall: " + recalled.model_dump_json().replace(query, "<the query>"))  # the pack echoes it
    texts.append("reviews: " + str(services.review.mine(viewer)))
    for memory in services.store.list_memories(TENANT, archived=True):
        with pytest.raises(Forbidden):
            services.review.history(viewer, memory.memory_id)
    return "\n".join(texts), bundled


def check(services: bootstrap.Services, model: Model) -> None:
    stored = [e for page in services.store.iter_episodes(TENANT) for e in page]
    assert sorted(e.episode_id for e in stored) == sorted(model.acked), "an acknowledged write is lost or doubled"
    assert {e.episode_id: (e.content) for e in stored} == {i: c for i, (_, c) in model.acked.items()}
    assert all(model.created.get(i) == 1 for i in model.acked), "no caller was told it created an episode"
    for viewer in (RITA, W1, W2):
        forbidden = {t for t, owner in model.owner.items() if t not in model.published and owner != viewer.principal}
        text, bundled = visible(services, viewer)
        state = replay(services, viewer)
        for route, seen in (("retrieve, recall or reviews", text), ("the feed", str(state))):
            leaked = forbidden & set(TOKEN.findall(seen))
            where = [line[:200] for line in seen.splitlines() if leaked & set(TOKEN.findall(line))]
            assert not leaked, f"{viewer.principal} saw unpublished work through {route}: {leaked} in {where}"
        # the replayed feed is the visible state
        assert {i for i, (k, _) in state.items() if k == "episode"} == set(model.acked)
        scopes = {s.scope_id for _, s in services.scopes.subtree(TENANT, "root")}
        assert {i for i, (k, _) in state.items() if k == "scope"} == scopes
        live = {i: r for i, (k, r) in state.items() if k == "memory" and r["status"] != "archived"}
        assert set(live) == set(bundled)
        if viewer is RITA:  # no revisions of its own folded into its bundles: bodies and versions agree
            assert {i: (r["version"], r["body"]) for i, r in live.items()} == bundled


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=18))
def test_random_interleavings_keep_every_write_and_leak_no_pending_work(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(dir=SCRATCH) as home:
        services = build(Path(home))
        services.scopes.create(TENANT, "root.a", parents=True)
        model = Model()
        note(repr([tuple(getattr(part, "principal", part) for part in op) for op in ops]))
        for op in ops:
            try:
                run(services, model, op)
            except MnemeError as refused:  # conflicts, forbidden edits, nothing pending: nothing written
                assert refused.status in (400, 403, 404, 409), refused
        check(services, model)
