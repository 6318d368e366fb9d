"""`DynamoRecordStore`'s episodes, delivered ids and consolidation records (dirty marks, checkpoints,
leases, facts, contradictions, runs); keys and access patterns are in the module docstring of
`mneme.adapters.dynamo.store`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from mneme.adapters.dynamo.codec import (
    DIRTY,
    Item,
    Write,
    attr,
    checkpoint_key,
    contradiction_key,
    delete,
    delivered_pk,
    dirty_key,
    dirty_update,
    episode_key,
    esc,
    expression,
    fact_key,
    feed_key,
    feed_pk,
    from_item,
    iso_utc,
    key,
    lease_key,
    marker_partition,
    marker_partitions,
    put,
    run_key,
    scope_fact_key,
    tenant_pk,
    to_item,
    to_model,
)
from mneme.adapters.dynamo.codec import position_text as feed_position_text
from mneme.adapters.dynamo.table import (
    FEED_POSITION,
    GSI1,
    GSI2,
    GSI3,
    GSI4,
    DynamoTable,
    position_of,
    text_of,
    unmoved,
)
from mneme.errors import Conflict, StoreUnavailable
from mneme.models import Episode, SessionPosition, context_session, session_position
from mneme.records import Checkpoint, Contradiction, Fact, Run

UNINDEXED = "UNINDEXED"
EPISODE_CODEC: dict[str, Any] = {"json_fields": ("metadata",), "vector_fields": ("vector",)}
FACT_CODEC: dict[str, Any] = {"vector_fields": ("vector",)}
RUN_CODEC: dict[str, Any] = {"json_fields": ("stages",)}
EPISODES_PER_TRANSACTION = 50  # episode + feed entry
FACTS_PER_TRANSACTION = 25  # fact + scope copy + feed entry + old feed entry
FACT_ATTEMPTS = 5


BACKFILL_PAGE = 1000  # episodes read per Query page when looking for missing GSI4 keys
BACKFILL_PER_TRANSACTION = 100  # DynamoDB's limit of items per TransactWriteItems


def position_text(position: SessionPosition) -> str:
    """Text that sorts as the session's order (fixed-width times, then the call's sequence)."""
    return f"{iso_utc(position.occurred_at)}#{iso_utc(position.created_at)}#{position.sequence:06d}"


def session_keys(tenant: str, session_id: str, position: SessionPosition, episode_id: str) -> dict[str, str]:
    """An episode's GSI4 keys: its session's turns in session order. (Keys written before the order had a
    creation time and sequence, `<occurred>#<id>`, sort among these by time alone.)"""
    return {
        "GSI4PK": tenant_pk(tenant, "SESSION", esc(session_id)),
        "GSI4SK": f"{position_text(position)}#{episode_id}",
    }


def stored_position(item: Item) -> SessionPosition | None:
    """The session position of an episode item, from its own attributes (None when one is missing)."""
    occurred, created = text_of(item, "occurred_at"), text_of(item, "created_at")
    if occurred is None or created is None:
        return None
    sequence = item.get("sequence", {}).get("N", "0")
    return SessionPosition(datetime.fromisoformat(occurred), datetime.fromisoformat(created), int(sequence))


def with_session_keys(tenant: str, item: Item) -> Item:
    """An episode item with its GSI4 keys, derived from its own attributes when it has a session and lacks
    them (stored before GSI4): a rewrite of the whole item then gives them, and never drops keys that
    `backfill_sessions` set after the item was read."""
    session, episode_id, position = text_of(item, "session_id"), text_of(item, "episode_id"), stored_position(item)
    if session is None or position is None or episode_id is None or "GSI4PK" in item:
        return item
    keys = session_keys(tenant, session, position, episode_id)
    return {**item, **{name: attr(value) for name, value in keys.items()}}


def _session_keys_update(tenant: str, item: Item) -> Write:
    """SET the GSI4 keys of an episode read without them, if it still exists, still lacks them and still
    has the session and time they were derived from (else: code `episode_changed`)."""
    session, occurred, episode_id = (str(item[name]["S"]) for name in ("session_id", "occurred_at", "episode_id"))
    position = stored_position(item)
    assert position is not None  # the backfill's query projects occurred_at and created_at
    values = {
        **session_keys(tenant, session, position, episode_id),
        "session": session,
        "occurred": occurred,
    }
    same = "attribute_exists(PK) AND attribute_not_exists(#GSI4PK)"
    same += " AND #session_id = :session AND #occurred_at = :occurred"
    change = "SET #GSI4PK = :GSI4PK, #GSI4SK = :GSI4SK"
    update = {"Key": {"PK": item["PK"], "SK": item["SK"]}, "UpdateExpression": change, "ConditionExpression": same}
    return Write({"Update": {**update, **expression(values, same, change)}}, "episode_changed", "")


def _backfill_query(
    pk: str, *, missing: str, wanted: str, values: dict[str, Any], key: str = "#PK = :pk"
) -> dict[str, Any]:
    """A Query of partition `pk` (narrowed by `key`) for the items lacking keys (`missing`, the filter), each
    projected to `wanted`, a page of `BACKFILL_PAGE` at a time; `values` binds the expressions' other `:x`."""
    return {
        "KeyConditionExpression": key,
        "FilterExpression": missing,
        "ProjectionExpression": wanted,
        "Limit": BACKFILL_PAGE,  # eventually consistent: each update's condition checks the item again
        **expression({"pk": pk, **values}, key, missing, wanted),
    }


def run_keys(tenant: str, run_id: str, started_at: datetime) -> dict[str, str]:
    """A run's GSI2 keys: the tenant's runs in start order."""
    return {"GSI2PK": tenant_pk(tenant, "RUNS"), "GSI2SK": f"{iso_utc(started_at)}#{run_id}"}


def _run_keys_update(tenant: str, item: Item) -> Write:
    """SET the GSI2 keys of a run read without them, if it still exists, lacks them and started when read."""
    run_id, started = str(item["run_id"]["S"]), str(item["started_at"]["S"])
    values = {**run_keys(tenant, run_id, datetime.fromisoformat(started)), "started": started}
    same = "attribute_exists(PK) AND attribute_not_exists(#GSI2PK) AND #started_at = :started"
    change = "SET #GSI2PK = :GSI2PK, #GSI2SK = :GSI2SK"
    update = {"Key": {"PK": item["PK"], "SK": item["SK"]}, "UpdateExpression": change, "ConditionExpression": same}
    return Write({"Update": {**update, **expression(values, same, change)}}, "run_changed", "")


class DynamoEpisodes(DynamoTable):
    """Episodes (with the index-sweep and consolidation reads through GSI1-3) and consolidation records."""

    @staticmethod
    def _episode_item(episode: Episode, position: str) -> Item:
        tenant, episode_id, created = episode.tenant, episode.episode_id, iso_utc(episode.created_at)
        attributes = {  # no GSI2 keys (those written before still stand): the feed lists the newest
            "feed_position": position,
            "GSI3PK": tenant_pk(tenant, "SCOPEEPS", episode.scope_id),
            "GSI3SK": f"{created}#{episode_id}",
        }
        if (session := context_session(episode)) is not None:  # a session's turns in time order (sparse)
            attributes.update(session_keys(tenant, session, session_position(episode), episode_id))
        if not episode.indexed:
            attributes.update(
                GSI1PK=marker_partition(UNINDEXED, tenant), GSI1SK=f"{created}#{esc(tenant)}#{episode_id}"
            )
        return to_item(episode, episode_key(tenant, episode_id), **EPISODE_CODEC, item_type="episode", **attributes)

    def _episodes(self, keys: Sequence[Item], *, consistent: bool = True) -> list[Episode]:
        items = self._batch_get(keys, consistent=consistent)
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def put_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        """More than 50 episodes are written fifty at a time (two items each: the episode and its feed
        entry), each fifty atomically."""
        if len(episodes) > EPISODES_PER_TRANSACTION:
            per = EPISODES_PER_TRANSACTION
            stored: list[Episode] = []
            written: set[str] = set()
            for start in range(0, len(episodes), per):
                chunk_stored, chunk_written = self.put_episodes(episodes[start : start + per])
                stored += chunk_stored
                written |= chunk_written
            return stored, written
        try:
            return self._put_new_episodes(episodes)
        except Conflict as e:
            if e.code != "episode_race":
                raise
            return self._put_new_episodes(episodes)  # a concurrent writer won; now its records are read

    def _put_new_episodes(self, episodes: Sequence[Episode]) -> tuple[list[Episode], set[str]]:
        unique: dict[tuple[str, str], Episode] = {}
        for episode in episodes:  # the first of repeated ids is the one written
            unique.setdefault((episode.tenant, episode.episode_id), episode)
        stored = {(e.tenant, e.episode_id): e for e in self._episodes([episode_key(*k) for k in unique])}
        new = [episode for k, episode in unique.items() if k not in stored]
        chosen = {**{(e.tenant, e.episode_id): e for e in new}, **stored}
        for episode in episodes:
            if chosen[(episode.tenant, episode.episode_id)].content_hash != episode.content_hash:
                reused = "this idempotency key was already used for a different item (its content, scope or fields)"
                raise Conflict(reused, code="idempotency_key_reused", details={"episode_id": episode.episode_id})
        free, race = "attribute_not_exists(PK)", "an episode was written concurrently"
        if len(new) == 1:
            self._put_one_episode(new[0], free, race)
        elif new:
            writes: list[Write] = []
            for e in new:
                position = self._position()
                writes.append(put(self._episode_item(e, position), free, "episode_race", race))
                writes += self._feed_move(e.tenant, "episode", e.episode_id, None, position)
            self._transact(writes)  # conditional on every new id: all written by this call, or none
        return [chosen[(episode.tenant, episode.episode_id)] for episode in episodes], {e.episode_id for e in new}

    def _put_one_episode(self, episode: Episode, free: str, race: str) -> None:
        """One new episode without a transaction (which doubles every write unit): its feed entry first,
        then the episode on condition that its id is free. A crash between the two leaves an entry whose
        record does not exist, which the feed skips; if the episode is then written by a retry, the feed
        names it at both positions (at least once, never missed). An entry whose write lost the race is
        deleted again."""
        position = self._position()
        (entry,) = self._feed_move(episode.tenant, "episode", episode.episode_id, None, position)
        self._write_one(entry)
        try:
            self._write_one(put(self._episode_item(episode, position), free, "episode_race", race))
        except Conflict:
            self._write_one(delete(feed_key(episode.tenant, position, episode.episode_id), None, "conflict", ""))
            raise

    def get_episodes(
        self, tenant: str, episode_ids: Sequence[str], *, vectors: bool = True, consistent: bool = True
    ) -> dict[str, Episode]:
        found = self._episodes([episode_key(tenant, i) for i in dict.fromkeys(episode_ids)], consistent=consistent)
        return {episode.episode_id: episode for episode in found}

    def mark_indexed(self, tenant: str, episode_ids: Sequence[str]) -> None:
        for episode_id in dict.fromkeys(episode_ids):
            try:
                self._call(
                    "update_item",
                    TableName=self.table_name,
                    Key=episode_key(tenant, episode_id),
                    UpdateExpression="SET #indexed = :yes REMOVE GSI1PK, GSI1SK",
                    ConditionExpression="attribute_exists(PK)",
                    **expression({"yes": True}, "#indexed"),
                )
            except Conflict:  # no such episode in this tenant: nothing to mark
                continue

    def list_recent_episodes(
        self, tenant: str, since: datetime, limit: int, scope_ids: Sequence[str] | None = None
    ) -> list[Episode]:
        """For `scope_ids`, through GSI3 (each scope's episodes by creation); for the tenant, from its change
        feed (a Query of small entries: an episode's entry is written with it, at or after its creation).
        Eventually consistent reads, half the read units: an episode stored less than about a second ago
        (DynamoDB's convergence) may be missing, as it was from GSI2 before; this is the fresh tail of a
        recall over an index that lags its writes by a minute or more."""
        if limit < 1:
            return []
        if scope_ids is None:
            items = self._recent_in_feed(tenant, since, limit)
        else:
            items = []
            for scope_id in dict.fromkeys(scope_ids):
                condition = "GSI3PK = :pk AND GSI3SK >= :since"
                query = {"IndexName": GSI3, "KeyConditionExpression": condition, "ScanIndexForward": False}
                values = expression({"pk": tenant_pk(tenant, "SCOPEEPS", scope_id), "since": iso_utc(since)})
                items += self._index_items({**query, **values}, limit, consistent=False)
        episodes = [to_model(Episode, item, **EPISODE_CODEC) for item in items]
        recent = [episode for episode in episodes if episode.created_at >= since]
        return sorted(recent, key=lambda e: (e.created_at, e.sequence), reverse=True)

    def _recent_in_feed(self, tenant: str, since: datetime, limit: int) -> list[Item]:
        """The episodes of the tenant's newest feed entries from `since` on, up to `limit` created since."""
        condition, kind = "PK = :pk AND SK >= :since", "#kind = :episode"
        query = {
            "KeyConditionExpression": condition,
            "FilterExpression": kind,
            "ScanIndexForward": False,
            "Limit": limit,  # eventually consistent, as the episodes' read that follows
            **expression({"pk": feed_pk(tenant), "since": feed_position_text(since), "episode": "episode"}, kind),
        }
        found: list[Item] = []
        for page in self._pages(query):
            keys = [episode_key(tenant, str(entry["id"]["S"])) for entry in page]
            items = self._batch_get(keys, consistent=False)
            found += [item for item in items if str(item["created_at"]["S"]) >= iso_utc(since)]
            if len(found) >= limit:
                break
        return found

    def session_episodes(
        self, tenant: str, scope_id: str, session_id: str, before: SessionPosition, limit: int
    ) -> list[Episode]:
        if limit < 1:
            return []
        condition = "GSI4PK = :pk AND GSI4SK < :before"  # "<position>#<id>" < "<before>": strictly earlier
        values = {"pk": tenant_pk(tenant, "SESSION", esc(session_id)), "before": position_text(before)}
        query = {"IndexName": GSI4, "KeyConditionExpression": condition, "ScanIndexForward": False}
        items = self._index_items(
            {**query, **expression(values)}, limit, keep=lambda i: text_of(i, "scope_id") == scope_id
        )
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def backfill_sessions(self, tenant: str) -> int:
        """GSI4 keys for the tenant's episodes written before GSI4 existed (a string `session_id`, no
        `GSI4PK`): the episode partition is read in pages (a filter, and only the key sources projected),
        and each page's missing keys are SET by conditional updates, a hundred per transaction. The condition
        keeps an erased episode erased and never overwrites a concurrent write; a transaction it cancels is
        done again one update at a time, skipping the episodes that changed (the next run looks again)."""
        query = _backfill_query(
            tenant_pk(tenant, "EPISODES"),
            missing="attribute_type(#session_id, :string) AND attribute_not_exists(#GSI4PK)",
            wanted="#PK, #SK, #episode_id, #session_id, #occurred_at, #created_at, #sequence",
            values={"string": "S"},
        )
        return self._backfill(query, lambda item: _session_keys_update(tenant, item))

    def _backfill(self, query: dict[str, Any], update: Callable[[Item], Write]) -> int:
        """`update` for every item the query's pages return, a hundred per transaction; how many applied."""
        added = 0
        for page in self._pages(query):
            updates = [update(item) for item in page]
            for start in range(0, len(updates), BACKFILL_PER_TRANSACTION):
                added += self._apply_updates(updates[start : start + BACKFILL_PER_TRANSACTION])
        return added

    def _apply_updates(self, updates: Sequence[Write]) -> int:
        """All in one transaction, or (one condition failed, or a concurrent transaction touched an item)
        each on its own; returns how many were applied."""
        if not updates:
            return 0
        try:
            self._transact(updates)
            return len(updates)
        except (Conflict, StoreUnavailable):
            pass
        applied = 0
        for update in updates:
            try:
                self._call("update_item", [update], TableName=self.table_name, **update.request["Update"])
                applied += 1
            except Conflict:  # erased or rewritten meanwhile
                continue
        return applied

    def list_unindexed(self, limit: int) -> list[Episode]:
        if limit < 1:
            return []
        items = self._marked(UNINDEXED, limit, keep=lambda item: "GSI1PK" in item)  # else marked meanwhile
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def _marked(self, base: str, limit: int, keep: Callable[[Item], bool] = lambda item: True) -> list[Item]:
        """Up to `limit` items marked `base` in GSI1, oldest first (GSI1SK) across every shard."""
        found: list[Item] = []
        for partition in marker_partitions(base):
            query = {"IndexName": GSI1, "KeyConditionExpression": "GSI1PK = :q", **expression({"q": partition})}
            found += self._index_items(query, limit, keep)
        return sorted(found, key=lambda item: str(item.get("GSI1SK", {}).get("S", "")))[:limit]

    def iter_episodes(self, tenant: str, batch: int = 500) -> Iterator[list[Episode]]:
        # Eventually consistent (half the read units): a rebuild needs no read-your-writes, an episode
        # written meanwhile is indexed by its own write (or the repair sweep).
        query = {"KeyConditionExpression": "PK = :pk", "Limit": batch}
        for page in self._pages({**query, **expression({"pk": tenant_pk(tenant, "EPISODES")})}):
            if page:
                yield [to_model(Episode, item, **EPISODE_CODEC) for item in page]

    def get_delivered(self, tenant: str, principal: str, session_id: str) -> set[str]:
        return {str(from_item(item)["id"]) for item in self._query(delivered_pk(tenant, principal, session_id))}

    def add_delivered(self, tenant: str, principal: str, session_id: str, ids: Sequence[str]) -> None:
        pk = delivered_pk(tenant, principal, session_id)
        items = [{**key(pk, f"ID#{i}"), "item_type": attr("delivered"), "id": attr(i)} for i in dict.fromkeys(ids)]
        puts = [{"PutRequest": {"Item": item}} for item in items]
        self._batch_write(puts)

    # -- consolidation --------------------------------------------------------------------
    def mark_dirty(self, tenant: str, scope_ids: Sequence[str], now: datetime) -> None:
        for scope_id in dict.fromkeys(scope_ids):  # one UpdateItem each (a remember marks one scope, or few)
            self._call("update_item", TableName=self.table_name, **dirty_update(tenant, scope_id, now))

    def list_dirty(self, tenant: str | None, limit: int) -> list[tuple[str, str]]:
        if limit < 1:
            return []
        items = self._marked(DIRTY, limit) if tenant is None else self._query(tenant_pk(tenant, "DIRTY"))
        marks = sorted((from_item(item) for item in items), key=lambda mark: str(mark["dirtied_at"]))
        return [(str(mark["tenant"]), str(mark["scope_id"])) for mark in marks[:limit]]

    def clear_dirty(self, tenant: str, scope_id: str, dirtied_before: datetime) -> None:
        unchanged, before = "#dirtied_at <= :before", iso_utc(dirtied_before)
        try:
            self._write_one(delete(dirty_key(tenant, scope_id), unchanged, "conflict", "", before=before))
        except Conflict:  # refreshed during the run (or already clear): the mark stays
            return

    def list_episodes_after(
        self, tenant: str, scope_id: str, after: tuple[datetime | None, str], before: datetime, limit: int
    ) -> list[Episode]:
        if limit < 1:
            return []
        created, episode_id = after
        values = {"pk": tenant_pk(tenant, "SCOPEEPS", scope_id), "upper": iso_utc(before)}
        condition, lower = "GSI3PK = :pk AND GSI3SK < :upper", ""
        if created is not None:  # (created_at, episode_id) order is the order of "<created>#<episode_id>"
            lower = f"{iso_utc(created)}#{episode_id}"
            if lower >= values["upper"]:
                return []
            condition, values["lower"] = "GSI3PK = :pk AND GSI3SK BETWEEN :lower AND :upper", lower
        query = {"IndexName": GSI3, "KeyConditionExpression": condition, **expression(values)}
        items = self._index_items(query, limit, keep=lambda item: item["GSI3SK"]["S"] != lower)
        return [to_model(Episode, item, **EPISODE_CODEC) for item in items]

    def get_checkpoint(self, tenant: str, scope_id: str) -> Checkpoint:
        item = self._get(checkpoint_key(tenant, scope_id))
        return to_model(Checkpoint, item) if item else Checkpoint(tenant=tenant, scope_id=scope_id)

    def save_checkpoint(self, checkpoint: Checkpoint, expected_version: int) -> None:
        item = to_item(checkpoint, checkpoint_key(checkpoint.tenant, checkpoint.scope_id), item_type="checkpoint")
        unchanged = "attribute_not_exists(PK) OR #version = :v" if expected_version == 0 else "#version = :v"
        moved = "the checkpoint moved: another run advanced this scope"
        self._write_one(put(item, unchanged, "checkpoint_moved", moved, v=expected_version))

    def acquire_lease(self, tenant: str, scope_id: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        lease = {
            **lease_key(tenant, scope_id),
            "item_type": attr("lease"),
            "owner": attr(owner),
            "until": attr(iso_utc(now + ttl)),
        }
        free = "attribute_not_exists(PK) OR #owner = :owner OR #until <= :now"
        try:
            self._write_one(put(lease, free, "conflict", "leased", owner=owner, now=iso_utc(now)))
        except Conflict:  # another owner holds a live lease
            return False
        return True

    def release_lease(self, tenant: str, scope_id: str, owner: str) -> None:
        try:
            self._write_one(delete(lease_key(tenant, scope_id), "#owner = :owner", "conflict", "", owner=owner))
        except Conflict:  # not ours (any more): leave it
            return

    def put_facts(self, facts: Sequence[Fact], contradictions: Sequence[Contradiction] = ()) -> None:
        """Atomic up to 25 facts (four items each: fact, scope copy, feed entry, old feed entry) with their
        new contradictions; larger sets go in chunks, each atomic."""
        unique = list({(fact.tenant, fact.fact_id): fact for fact in facts}.values())  # the last of an id wins
        added = {(c.tenant, c.scope_id, c.contradiction_id): c for c in reversed(contradictions)}  # first wins
        stored = {(i["PK"]["S"], i["SK"]["S"]) for i in self._batch_get([contradiction_key(*k) for k in added])}
        new: list[Write] = []
        for ident, contradiction in added.items():  # a stored contradiction is never rewritten
            contra_key = contradiction_key(*ident)
            if (contra_key["PK"]["S"], contra_key["SK"]["S"]) not in stored:
                new.append(put(to_item(contradiction, contra_key, item_type="contradiction"), None, "conflict", ""))
        per, riding = FACTS_PER_TRANSACTION, 0
        chunks = [unique[start : start + per] for start in range(0, len(unique), per)]
        for index, chunk in enumerate(chunks):  # the last chunk takes the contradictions that fit
            riding = 100 - 4 * len(chunk) if index == len(chunks) - 1 else 0
            self._put_fact_chunk(chunk, new[:riding])
        for start in range(riding, len(new), 100):
            self._transact(new[start : start + 100])

    def _put_fact_chunk(self, facts: Sequence[Fact], extra: Sequence[Write]) -> None:
        """One transaction: each fact (and its scope copy) moved to the feed's head, plus `extra`. A fact
        whose feed entry moved after it was read (a concurrent upsert) makes it read and try again."""
        for attempt in range(FACT_ATTEMPTS):
            keys = [fact_key(fact.tenant, fact.fact_id) for fact in facts]
            items = self._batch_get(keys, projection=f"PK, SK, {FEED_POSITION}")
            positions = {(i["PK"]["S"], i["SK"]["S"]): position_of(i) for i in items}
            writes: list[Write] = []
            for fact, record_key in zip(facts, keys, strict=True):
                previous = positions.get((record_key["PK"]["S"], record_key["SK"]["S"]))
                position = self._position(previous)
                same, feed_values = unmoved(previous)
                record = to_item(fact, record_key, **FACT_CODEC, item_type="fact", feed_position=position)
                copy = to_item(
                    fact, scope_fact_key(fact.tenant, fact.scope_id, fact.fact_id), **FACT_CODEC, item_type="fact_copy"
                )
                writes += [
                    put(record, same, "fact_race", "a fact was written concurrently", **feed_values),
                    put(copy, None, "conflict", ""),
                    *self._feed_move(fact.tenant, "fact", fact.fact_id, previous, position),
                ]
            try:
                if writes or extra:
                    self._transact([*writes, *extra])
                return
            except Conflict as e:
                if e.code != "fact_race" or attempt == FACT_ATTEMPTS - 1:
                    raise

    def get_facts(self, tenant: str, fact_ids: Sequence[str]) -> dict[str, Fact]:
        items = self._batch_get([fact_key(tenant, fact_id) for fact_id in dict.fromkeys(fact_ids)])
        return {fact.fact_id: fact for fact in (to_model(Fact, item, **FACT_CODEC) for item in items)}

    def list_facts(self, tenant: str, scope_id: str | None = None) -> list[Fact]:
        pk = tenant_pk(tenant, "FACTS") if scope_id is None else tenant_pk(tenant, "SCOPEFACTS", scope_id)
        facts = [to_model(Fact, item, **FACT_CODEC) for item in self._query(pk)]
        return sorted(facts, key=lambda fact: fact.fact_id)

    def put_run(self, run: Run) -> None:
        listed = run_keys(run.tenant, run.run_id, run.started_at)
        item = to_item(run, run_key(run.tenant, run.run_id), **RUN_CODEC, item_type="run", **listed)
        self._call("put_item", TableName=self.table_name, Item=item)

    def get_run(self, tenant: str, run_id: str) -> Run | None:
        item = self._get(run_key(tenant, run_id))
        return to_model(Run, item, **RUN_CODEC) if item else None

    def list_runs(self, tenant: str, limit: int) -> list[Run]:
        """The newest `limit` runs through GSI2 (`<started>#<run_id>`, newest first), re-read from the table.
        A tenant with fewer listed runs may still hold runs written before runs were listed (no GSI2 keys,
        older than every listed one: `backfill_runs` lists them) or one listed a moment ago that GSI2 does
        not show yet: its run partition, then no larger than `limit` plus those, is read and sorted here."""
        if limit < 1:
            return []
        query = {"IndexName": GSI2, "KeyConditionExpression": "GSI2PK = :pk", "ScanIndexForward": False}
        items = self._index_items({**query, **expression({"pk": tenant_pk(tenant, "RUNS")})}, limit)
        if len(items) < limit:
            items = self._query(tenant_pk(tenant, "RUNS"), prefix="RUN#")
        runs = [to_model(Run, item, **RUN_CODEC) for item in items]
        return sorted(runs, key=lambda run: (run.started_at, run.run_id), reverse=True)[:limit]

    def backfill_runs(self, tenant: str) -> int:
        """GSI2 keys for the tenant's runs written before runs were listed by start time, as
        `backfill_sessions` does for episodes (condition: the run exists, still lacks GSI2PK and started when
        read)."""
        query = _backfill_query(
            tenant_pk(tenant, "RUNS"),
            missing="attribute_not_exists(#GSI2PK)",
            wanted="#PK, #SK, #run_id, #started_at",
            values={"prefix": "RUN#"},
            key="#PK = :pk AND begins_with(#SK, :prefix)",
        )
        return self._backfill(query, lambda item: _run_keys_update(tenant, item))
