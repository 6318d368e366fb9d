"""The AWS record store: one DynamoDB table, string keys `PK`/`SK`, four KEYS_ONLY indexes.

Every PK starts with `T#<tenant>#` except the API key item, read before the tenant is known.
Key builders (with escaping) live in `mneme.adapters.dynamo.codec`. The store is composed of parts
that each inherit the table's plumbing (`table.DynamoTable`: calls and error translation,
queries, batches, transactions, feed moves): `scopes`, `memories`, `episodes`
(with consolidation records), `extras` (review, change feed, API keys), `erasure`,
`publish` (publish steps) and `structure` (drafts and the publish journal).

| item             | PK                                         | SK                    | holds                      |
|------------------|--------------------------------------------|-----------------------|----------------------------|
| scope            | `T#<t>#SCOPE#<scope_id>`                   | `SCOPE`               | Scope                      |
| name slot        | `T#<t>#SLOTS#<parent_id>`                  | `SEG#<segment>`       | live Scope copy or alias   |
|                  | `T#<t>#ROOTSLOTS` (parent None)            | `SEG#<segment>`       | live Scope copy or alias   |
| alias back-ref   | `T#<t>#ALIASOF#<scope_id>`                 | `SLOT#<parent>#<seg>` | `parent_id`, `segment`     |
|                  |                                            | `ROOT#<seg>` (None)   | (one per alias of scope)   |
| layers           | `T#<t>#LAYERS`                             | `LAYERS`              | `layers`: depth -> name    |
| memory           | `T#<t>#MEMS`                               | `MEM#<id>`            | Memory                     |
| memory key slot  | `T#<t>#MSLOT#SCOPE#<scope_id>`             | `KEY#<key>`           | non-archived Memory copy   |
|                  | `T#<t>#MSLOT#TAG#<layer>#ALL` / `#VAL#<v>` | `KEY#<key>`           | non-archived Memory copy   |
|                  | (a pending draft: its author's slot)       | `KEY#<key>#PENDING#<author>` |                     |
| episode          | `T#<t>#EPISODES`                           | `EP#<id>`             | Episode (+ GSI1-3 keys)    |
| delivered id     | `T#<t>#DELIVERED#<principal>#<session>`    | `ID#<id>`             | `id`                       |
| dirty scope      | `T#<t>#DIRTY`                              | `SCOPE#<scope_id>`    | `dirtied_at` (+ GSI1 keys) |
| checkpoint       | `T#<t>#CONSOL#<scope_id>`                  | `CHECKPOINT`          | Checkpoint                 |
| lease            | `T#<t>#CONSOL#<scope_id>`                  | `LEASE`               | `owner`, `until`           |
| fact             | `T#<t>#FACTS`                              | `FACT#<id>`           | Fact                       |
| scope's fact     | `T#<t>#SCOPEFACTS#<scope_id>`              | `FACT#<id>`           | Fact copy                  |
| contradiction    | `T#<t>#CONTRA#<scope_id>`                  | `C#<id>`              | Contradiction              |
| forgotten record | `T#<t>#FORGOTTEN`                          | `ID#<id>`             | Forgotten (who, when, why) |
| scope's forgotten| `T#<t>#SCOPEFORGOT#<scope_id>`             | `ID#<id>`             | Forgotten copy (erasure)   |
| run              | `T#<t>#RUNS`                               | `RUN#<run_id>`        | Run (`stages` as JSON,     |
|                  |                                            |                       | + GSI2 keys)               |
| feed entry       | `T#<t>#FEED`                               | `<position>#<id>`     | `kind`, `id`, `position`   |
| revision         | `T#<t>#REVS`                               | `M#<memory>#<author>` | Revision (`changes` JSON)  |
| author revision  | `T#<t>#AUTHREVS#<author>#<status>`         | `M#<memory>`          | Revision copy              |
| queued revision  | `T#<t>#REVQ#<status>`                      | `M#<memory>#<author>` | Revision copy              |
| history entry    | `T#<t>#HIST#<memory>`                      | `SEQ#<seq:012d>`      | HistoryEntry, `seq`        |
| API key          | `APIKEY#<key_hash>` (not tenant-prefixed)  | `APIKEY`              | ApiKey                     |
| tenant's API key | `T#<t>#APIKEYS`                            | `KEY#<key_id>`        | ApiKey copy                |
| structure draft  | `T#<t>#DRAFTS`                             | `DRAFT#<draft_id>`    | Draft JSON `doc`, `status` |
| publish journal  | `T#<t>#JOURNAL`                            | `DRAFT#<draft_id>`    | status, cursor, steps,     |
|                  |                                            |                       | `now`, published draft     |
| publish lock     | `T#<t>#JOURNAL`                            | `ACTIVE`              | `draft_id` being applied   |
| journal's plan   | `T#<t>#JOURNAL#<draft_id>`                 | `PLAN#<hash>#<part>`  | Plan JSON bytes (300 KB)   |

| index (KEYS_ONLY) | partition key                     | sort key                            | set on             |
|-------------------|-----------------------------------|-------------------------------------|--------------------|
| GSI1 (sparse)     | `GSI1PK = UNINDEXED#<shard>`      | `GSI1SK = <created>#<t>#<id>`       | unindexed episodes |
|                   | `GSI1PK = DIRTY#<shard>`          | `GSI1SK = <dirtied_at>#<t>#<scope>` | dirty scopes       |
| GSI2              | `GSI2PK = T#<t>#EPISODES`         | `GSI2SK = <created>#<id>`           | every episode      |
|                   | `GSI2PK = T#<t>#RUNS`             | `GSI2SK = <started>#<run_id>`       | every run          |
| GSI3              | `GSI3PK = T#<t>#SCOPEEPS#<scope>` | `GSI3SK = <created>#<id>`           | every episode      |
| GSI4 (sparse)     | `GSI4PK = T#<t>#SESSION#<session>`| `GSI4SK = <occurred>#<id>`          | episodes with a    |
|                   |                                   |                                     | session_id         |

`<created>` is `created_at` as ISO-8601 UTC with microseconds, so it sorts (as does every stored
datetime). GSI1 serves the two cross-tenant patterns (the index sweep, the consolidation schedule);
each of its partitions caps near 1,000 writes/s, so a tenant's marks go to one of 16 shards by a hash
of the tenant (`marker_partition`) and readers query them all, plus the bare partition of marks
written before the sharding. Index hits are re-read
from the table, so a stale entry (an episode marked indexed a moment ago) is dropped and what is
returned is current. GSI3 lags writes by milliseconds: consolidation reads episodes created before
`started_at - settle_seconds`, which covers it. GSI4 lags the same way: a turn remembered alone within
milliseconds of the turn before it may be indexed without it as context. Episodes written before GSI4
existed carry no GSI4 keys and give no context until `backfill_sessions` (run first by every index
rebuild, `mneme reindex`) sets them, or a publish that rewrites the episode (a move, an archive) writes them.

Items carry `item_type`: scope, scope_slot (a live scope), scope_alias (`scope_id` it resolves to),
alias_ref, layers, memory, memory_slot, episode, delivered, dirty, checkpoint, lease, fact, fact_copy,
contradiction, run, feed, revision, revision_copy, history, api_key, api_key_copy, draft, journal,
journal_lock, journal_plan, forgotten, forgotten_copy. Scope, memory, episode and fact items also carry
`feed_position` (see the change feed), and `structure_draft` once a publish wrote them (see the
journal). A name slot holds a live scope or an alias, never both, so one `attribute_not_exists(PK)`
enforces "taken by a scope or an alias". Every alias has a back-reference in its scope's `ALIASOF`
partition, written and deleted in the alias's transaction (so a merge can repoint, and an erasure find,
the aliases resolving to a scope; aliases written before back-references existed are not found that
way). A key slot exists exactly while its memory is not archived, so its partition is also the listing.
Copies are written in the transaction of their original. Base-table reads are strongly consistent.

| access pattern         | operation and key condition                                                     |
|------------------------|---------------------------------------------------------------------------------|
| get_scope              | GetItem scope                                                                   |
| find_child/find_alias  | GetItem name slot; `item_type` tells live scope from alias                      |
| list_children          | Query PK = `T#<t>#SLOTS#<parent_id>`, filter item_type = scope_slot             |
| create_scope           | Transact: Put scope + Put slot, both `attribute_not_exists(PK)`; feed move      |
| rename_scope           | GetItem scope; Transact: Put scope if `segment = old` and unmoved, Put old      |
|                        | slot as alias if it is this scope's live slot (+ its back-ref), Put new slot    |
|                        | if free or this scope's own alias (consumed: Delete its back-ref); feed move    |
| get/put_layers         | GetItem / Put layers                                                            |
| create_memory          | Transact: Put memory + Put key slot, both `attribute_not_exists(PK)`; feed move |
|                        | (a draft: + ConditionCheck that the key's published slot does not exist)        |
| update_memory          | GetItem memory; Transact: Put memory if `version = expected` and unmoved,       |
|                        | then refresh its own slot, or Delete its old slot and/or Put the new one if     |
|                        | free; feed move                                                                 |
| get_memory             | GetItem memory                                                                  |
| list_scoped_memories   | Query PK = `T#<t>#MSLOT#SCOPE#<scope_id>`                                       |
| list_tagged_memories   | Query PK = `T#<t>#MSLOT#TAG#<layer>#ALL` (value None) or `...#VAL#<value>`      |
| list_memories          | Query PK = `T#<t>#MEMS`, filter status <> archived                              |
| put_episodes           | BatchGetItem episodes; Transact: Put each new one `attribute_not_exists(PK)`    |
|                        | and its feed entry (fifty episodes per transaction; one alone: two PutItems)    |
| get_episodes           | BatchGetItem `T#<t>#EPISODES` / `EP#<id>`                                       |
| mark_indexed           | UpdateItem each: SET indexed, REMOVE GSI1PK, GSI1SK (not a feed change)         |
| list_recent_episodes   | Query PK = `T#<t>#FEED` AND SK >= `<since>`, newest first, filter kind episode  |
|                        | (or GSI3 per given scope); BatchGetItem the hits, eventually consistent         |
| session_episodes       | Query GSI4 `GSI4PK = T#<t>#SESSION#<session> AND GSI4SK < <before>`, latest     |
|                        | (`<session>`: `models.context_session`, the id or a turn's instant and metadata)|
|                        | first; BatchGetItem the hits, keep the scope's (page on until `limit` are kept) |
| backfill_sessions      | Query PK = `T#<t>#EPISODES`, filter a string session_id and no GSI4PK, project the |
|                        | key sources; per 100: Transact UpdateItem SET GSI4PK, GSI4SK if the episode     |
|                        | exists, lacks GSI4PK and has the session and occurred_at read (cancelled: each  |
|                        | UpdateItem alone, skipping the changed)                                         |
| list_unindexed         | Query GSI1 per shard `UNINDEXED#00..15` and bare `UNINDEXED`, BatchGetItem hits |
| iter_episodes          | Query PK = `T#<t>#EPISODES`, one yielded batch per page                         |
| get/add_delivered      | Query / BatchWriteItem PK = `T#<t>#DELIVERED#<principal>#<session_id>`          |
| mark_dirty             | BatchWriteItem dirty marks (upsert refreshes `dirtied_at`)                      |
| list_dirty             | tenant: Query PK = `T#<t>#DIRTY`; None: Query GSI1 per shard of `DIRTY`          |
| clear_dirty            | DeleteItem dirty mark if `dirtied_at <= dirtied_before`                         |
| list_episodes_after    | Query GSI3 `GSI3PK = T#<t>#SCOPEEPS#<scope_id> AND GSI3SK BETWEEN               |
|                        | <after> AND <before>` (or `< <before>`), BatchGetItem the hits                  |
| get/save_checkpoint    | GetItem / Put if `version = expected` (or absent when expected is 0)            |
| acquire/release_lease  | Put lease if absent, ours or `until <= now` / Delete if `owner` is ours         |
| put_facts              | BatchGetItem contradictions; per 25 facts: BatchGetItem their `feed_position`,  |
|                        | Transact: Put fact if unmoved + scope copy + feed move each (the last one also  |
|                        | Puts new contradictions, the rest a hundred per transaction); a fact moved      |
|                        | meanwhile (concurrent upsert) fails the condition: read again and retry         |
| get_facts / list_facts | BatchGetItem facts / Query PK = `T#<t>#FACTS` or `T#<t>#SCOPEFACTS#<scope>`     |
| put_run / get_run      | Put / GetItem run                                                               |
| list_runs              | Query GSI2 `GSI2PK = T#<t>#RUNS`, newest first, Limit `limit`; BatchGetItem the |
|                        | hits. Fewer than `limit` found: Query PK = `T#<t>#RUNS`, SK begins_with `RUN#`  |
|                        | (runs stored before GSI2 listed them, or listed a moment ago), sorted here      |
| backfill_runs          | Query PK = `T#<t>#RUNS`, SK begins_with `RUN#`, filter no GSI2PK; per 100:      |
|                        | Transact UpdateItem SET GSI2PK, GSI2SK if the run exists, lacks GSI2PK and      |
|                        | started when read (cancelled: each UpdateItem alone, skipping the changed)      |
| list_changes           | read the clock; Query PK = `T#<t>#FEED AND SK BETWEEN <after pos>#<after id>    |
|                        | AND <settled>$` (or `SK <= <settled>$`), drop the `after` entry itself;         |
|                        | `<settled>` = now - horizon, and `$` sorts just above `#`                       |
| list_episodes          | per scope: Query GSI3 `GSI3PK = T#<t>#SCOPEEPS#<scope> AND GSI3SK < <before>`,  |
|                        | newest first, Limit `limit`; the newest `limit` of all, BatchGetItem'd          |
| forget_episode / _fact | GetItem; Transact: Delete it if unmoved (+ a fact's scope copy), feed move to a |
|                        | `deleted:<kind>` tombstone, Put the forgotten record and its scope copy; then   |
|                        | (a fact) BatchWriteItem delete its history                                      |
| get_forgotten          | GetItem `T#<t>#FORGOTTEN` / `ID#<id>`                                           |
| list_forgotten_since   | Query PK = `T#<t>#GONE` AND SK >= `<since>` (consistent; marks expire in a day) |
| update_fact            | GetItem fact; Transact: Put it if unmoved and `version = expected` + scope copy |
|                        | + feed move (stale version: Conflict, read again)                               |
| put_revision           | Transact: Put revision + author's and queued copy under its status, Delete      |
|                        | both copies under the other two statuses (upsert with no read; 7 items)         |
| get_revision           | GetItem revision                                                                |
| list_revisions         | memory_id (+ author): Query PK = `T#<t>#REVS`, `begins_with(SK,                 |
|                        | M#<memory>#)` (GetItem revision); author: Query `T#<t>#AUTHREVS#<author>        |
|                        | #<status>`; neither: Query `T#<t>#REVQ#<status>`; one Query per status          |
|                        | asked for (status None: all three); memory's hits filtered by status            |
| add_history            | Query PK = `T#<t>#HIST#<memory>` backwards, Limit 1 (the last seq); Put         |
|                        | `SEQ#<seq + 1>` if `attribute_not_exists(PK)`; taken meanwhile: read again      |
| list_history           | Query PK = `T#<t>#HIST#<memory>` (sequence order = append order)                |
| put_api_key            | Transact: Put API key if free or same tenant+key_id, Put tenant's copy          |
| get_api_key            | GetItem `APIKEY#<key_hash>`                                                     |
| list_api_keys          | Query PK = `T#<t>#APIKEYS`                                                      |
| revoke_api_key         | GetItem tenant's copy; Transact: Put both with `revoked_at`                     |
| list_aliases           | Query PK = `T#<t>#SLOTS#<parent_id>`, filter item_type = scope_alias            |
| put_alias              | Transact: Put alias slot if `attribute_not_exists(PK)` + its back-ref           |
| erase_scopes           | Query `T#<t>#MEMS` (the scopes' memories, archived too), GSI3 per scope (its    |
|                        | episodes, re-read), `SCOPEFACTS#<scope>` (its facts); dry run: counts. Then per |
|                        | scope, deepest first: BatchWriteItem Put a tombstone feed entry per record      |
|                        | (kind `deleted:<kind>`, id only); BatchWriteItem Delete its memories (key slot, |
|                        | revisions with their copies, history), episodes, facts and copies, their feed   |
|                        | entries,                                                                        |
|                        | contradictions, checkpoint, lease, dirty mark, aliases resolving to it (via     |
|                        | `ALIASOF`) and slots under it; last, Transact: Delete scope + feed entry + live |
|                        | slot, Put its tombstone. Not atomic; erasing again finishes it (a crash between |
|                        | tombstones and deletes can leave a record two tombstones). Delivered ids stay.  |
| put/get_draft          | Put / GetItem draft                                                             |
| apply_structure        | the journal (below and in `mneme.adapters.dynamo.structure`): check the plan;   |
|                        | Put plan parts; Transact: Put journal + lock if absent; per step one or more    |
|                        | Transacts (each <= 100 items) then UpdateItem cursor; Transact: Put draft,      |
|                        | journal `done`, Delete lock                                                     |
| resume_journals        | GetItem lock; GetItem journal, Query its plan parts; run the remaining steps    |

Queries follow `LastEvaluatedKey` to the end (`page_size` caps a page, for tests); results are
sorted in Python as the port orders them. Batch calls retry unprocessed keys with backoff. A
transaction holds at most 100 items: create_scope 3, create_memory 4, update_memory at most 5,
rename_scope 7, put_episodes 2 per episode (50 a transaction), put_facts at most 4 per fact (25 a
transaction), put_revision 7; a publish step's transactions are sized per record kind (e.g. 20 scopes
or memories at 5 items, 33 episodes at 3).

Structure publish journal (`apply_structure`; details in `mneme.adapters.dynamo.structure`). A draft's
plan can exceed a transaction, so it is applied as ordered steps recorded in a journal: the plan is
checked (stale: Conflict, nothing written), stored, and the journal head + the tenant's publish lock
are put in one transaction; each step reads what it changes and writes final state (records it wrote
carry `structure_draft = <draft_id>` and are skipped when a step runs again), then the head's cursor
advances; the last transaction stores the published draft, marks the head done and drops the lock.
A crash leaves the head `applying`: `apply_structure` of that draft, or `resume_journals(tenant)`,
reruns from the cursor with the journal's plan and `now`, reaching the state an uninterrupted publish
reaches. The draft reads `open` until then; readers may see the tree part-way meanwhile. A publish of
another draft first completes the interrupted one, then raises Conflict `stale_preview`.

Change feed ("feed move" above). A scope, memory, episode or fact has one entry in its tenant's feed
partition `T#<t>#FEED`, at `<position>#<id>`, and carries that position in `feed_position`. A write
of the record is one TransactWriteItems: Put the record with the new `feed_position` on condition
that the stored one is still the one read ("unmoved"; absent for a new record), Put the new entry,
Delete the old one. Two writers moving one record cannot leave two entries: the second fails its
condition (put_facts reads again and retries; update_memory and rename_scope raise the Conflict they
raise for any concurrent change). A retried put_episodes adds no entry; mark_indexed is no change.
One new episode alone is the exception: its entry is Put, then the episode on its condition, without a
transaction (half the write units); a crash between them leaves an entry the feed skips while its record
does not exist, and names the episode twice if a retry then writes it (at least once, never missed).

Ordering. The position is the writer's clock at the write (`now`, injectable), moved 1 µs past the
record's previous position and past the last position this store object handed out; fixed-width UTC
text `%Y-%m-%dT%H:%M:%S.%fZ`, as the SQLite store writes, so `<position>#<id>` sorts as (position,
id). Writers are not serialised, so a transaction can commit after one with a later position has
committed and been read; a reader whose cursor passed the earlier position would never see it. So
list_changes reads its clock first and returns only entries at or before `settled = now -
feed_horizon_seconds` (default 5 s): a cursor never goes past `settled`. Assumption: a write
transaction is visible to readers within the horizon of its position as the reader's clock tells it:
one TransactWriteItems (with the SDK's retries) plus writer/reader clock skew stays under the horizon.
Then any entry still uncommitted when a reader reads its clock has position > settled >= the cursor it
can reach, so it lands ahead of every cursor and is read, once, when it settles (a committed
transaction is wholly visible: the Query's read-committed isolation matters only during the commit).
If the assumption breaks (a stalled commit, a clock off by more) a reader can miss a change: raise the
horizon. The cost is latency: a change reaches the feed `feed_horizon_seconds` after its write. Each
tenant's feed is one partition (about 1,000 writes/s; a move is a Put and a Delete). Records written
before the feed existed have no entry until their next write.
"""

from __future__ import annotations

from mneme.adapters.dynamo.episodes import DynamoEpisodes
from mneme.adapters.dynamo.erasure import DynamoErasure
from mneme.adapters.dynamo.extras import DynamoExtras
from mneme.adapters.dynamo.memories import DynamoMemories
from mneme.adapters.dynamo.records import DynamoRecords
from mneme.adapters.dynamo.structure import DynamoStructure
from mneme.adapters.dynamo.table import EXPIRES_AT, TABLE_SCHEMA, create_table

__all__ = ["EXPIRES_AT", "TABLE_SCHEMA", "DynamoRecordStore", "create_table"]


class DynamoRecordStore(DynamoStructure, DynamoErasure, DynamoRecords, DynamoEpisodes, DynamoMemories, DynamoExtras):
    """The record store on one DynamoDB table (see the module docstring); each part inherits `DynamoTable`."""
