"""Episodes and facts as records an agent or a person can address: get one by id, list a scope's subtree page by
page (newest first, behind an opaque signed cursor), with session, time and metadata filters. Forgetting and
correcting are `mneme.services.forgetting`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from mneme.errors import InvalidInput, NotFound
from mneme.models import Episode, Principal
from mneme.ports import EpisodeStore, ErasureStore, FactStore, MemoryStore
from mneme.records import Fact
from mneme.search_models import SearchFilter, holds, metadata_terms, shared_terms
from mneme.services.cursors import Cursors
from mneme.services.request_cache import per_request
from mneme.services.scopes import ScopeService

MAX_LIMIT = 200
SCAN_PAGE = 200  # records read per store call while filling a page
MAX_SCAN = 2000  # records read per request at most: a sparse filter answers a short page and a cursor to go on
HIGHEST_ID = "\uffff"  # sorts after every record id: a store page "below (t, HIGHEST_ID)" holds all of time t
HIGHEST_SEQUENCE = 1 << 31  # above any turn's place in its call

EPISODE_FIELDS = {"content", "occurred_at", "created_at", "session_id", "sequence", "tier", "metadata", "format",
                  "author"}  # fmt: skip
Position = tuple[datetime, int, str]  # an episode's place in a list: (created_at, sequence, episode_id)


def position(episode: Episode) -> Position:
    return episode.created_at, episode.sequence, episode.episode_id


class ListingStore(EpisodeStore, FactStore, ErasureStore, MemoryStore, Protocol):
    """The record store's roles listing agent-written records uses."""


@dataclass(frozen=True)
class Listing:
    """What `GET /v1/episodes` and `GET /v1/facts` ask for (the HTTP layer validates each field)."""

    scope: str = "root"
    session_id: str | None = None
    since: datetime | None = None  # occurred_at (a fact: valid_from), half-open: since <= t < until
    until: datetime | None = None
    metadata: dict[str, list[Any]] | None = None  # top-level key -> accepted values
    cursor: str | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidInput("since is after until: the period is empty", code="invalid_period")

    def passes(self, when: datetime, terms: list[str], session_id: str | None = None) -> bool:
        """Whether a record of this time, metadata terms (`search_models.metadata_terms`) and session is listed."""
        return (
            (self.since is None or when >= self.since)
            and (self.until is None or when < self.until)
            and (self.session_id is None or session_id == self.session_id)
            and holds(terms, SearchFilter(tenant="", ancestor_id="", metadata=self.metadata))
        )


def not_found(kind: Literal["episode", "fact"], record_id: str, forgotten: Any) -> NotFound:
    """404 for an absent record; a forgotten one says who forgot it, when and why (never its content)."""
    if forgotten is None:
        return NotFound(f"{kind} {record_id} does not exist", code=f"{kind}_not_found")
    details = {"id": record_id, "forgotten_by": forgotten.forgotten_by,
               "forgotten_at": forgotten.forgotten_at.isoformat(), "reason": forgotten.reason}  # fmt: skip
    return NotFound(f"{kind} {record_id} was forgotten", code=f"{kind}_forgotten", details=details)


@dataclass
class RecordsService:
    store: ListingStore
    scopes: ScopeService
    cursors: Cursors

    # -- one record -----------------------------------------------------------------------
    def episode(self, caller: Principal, episode_id: str) -> Episode:
        found = self.store.get_episodes(caller.tenant, [episode_id], vectors=False).get(episode_id)
        if found is None:
            raise not_found("episode", episode_id, self.store.get_forgotten(caller.tenant, episode_id))
        return found

    def fact(self, caller: Principal, fact_id: str) -> Fact:
        found = self.store.get_facts(caller.tenant, [fact_id]).get(fact_id)
        if found is None:
            raise not_found("fact", fact_id, self.store.get_forgotten(caller.tenant, fact_id))
        return found

    @per_request
    def get_episode(self, caller: Principal, episode_id: str) -> dict[str, Any]:
        """The episode and the facts drawn from it."""
        episode = self.episode(caller, episode_id)
        facts = self.store.list_facts(caller.tenant, episode.scope_id)
        derived = [f for f in facts if episode_id in f.source_episode_ids]
        view = self.episode_view(caller.tenant, episode)
        view["facts"] = [self.fact_view(caller.tenant, f) for f in derived]
        return view

    @per_request
    def get_fact(self, caller: Principal, fact_id: str) -> dict[str, Any]:
        """The fact, its source episodes (those forgotten since are listed by id) and its corrections."""
        fact = self.fact(caller, fact_id)
        tenant, ids = caller.tenant, fact.source_episode_ids
        sources = self.store.get_episodes(tenant, ids, vectors=False)
        view = self.fact_view(tenant, fact)
        view["sources"] = [self.episode_view(tenant, sources[i]) for i in ids if i in sources]
        view["missing_sources"] = [i for i in ids if i not in sources]
        history = self.store.list_history(tenant, fact_id)
        view["history"] = [h.model_dump(mode="json", exclude={"tenant", "memory_id"}) for h in history]
        return view

    # -- lists ----------------------------------------------------------------------------
    @per_request
    def list_episodes(self, caller: Principal, listing: Listing) -> dict[str, Any]:
        """Newest remembered first; the turns one call gave (one `created_at`) by their place in it, the last
        first, so a conversation reads in order. The store pages by (created_at, id): a call's turns are read
        whole before any of them is listed, and the cursor is a position (created_at, sequence, id)."""
        tenant, scope_ids = caller.tenant, self._subtree(caller.tenant, listing)
        after = self._position(tenant, listing.cursor)
        before = (after[0], HIGHEST_ID) if after else None
        found: list[Episode] = []
        scanned, exhausted, first, last = 0, False, None, None
        while not exhausted and not (scanned >= MAX_SCAN and last != first):  # the bound, once past a call
            page = self.store.list_episodes(tenant, scope_ids, before, SCAN_PAGE)
            exhausted, scanned = len(page) < SCAN_PAGE, scanned + len(page)
            for episode in page:
                before = (episode.created_at, episode.episode_id)
                if (after is None or position(episode) < after) and self._listed(episode, listing):
                    found.append(episode)
            first, last = (first or page[0].created_at, page[-1].created_at) if page else (first, last)
            if sum(1 for e in found if e.created_at != last) > listing.limit:
                break
        whole = sorted((e for e in found if exhausted or e.created_at != last), key=position, reverse=True)
        shown = whole[: listing.limit]
        if len(whole) > listing.limit or (not exhausted and len(shown) == listing.limit):
            resume: Position | None = position(shown[-1])
        else:  # stopped short of a page (the scan's bound): resume with the call it was reading, whole
            resume = None if exhausted or last is None else (last, HIGHEST_SEQUENCE, "")
        return {"episodes": [self.episode_view(tenant, e) for e in shown], **self._position_page(tenant, resume)}

    @staticmethod
    def _listed(episode: Episode, listing: Listing) -> bool:
        terms = metadata_terms(episode.metadata)
        return not episode.archived and listing.passes(episode.occurred_at, terms, episode.session_id)

    @per_request
    def list_facts(self, caller: Principal, listing: Listing) -> dict[str, Any]:
        """A subtree's facts (any status), newest first. Facts are few next to episodes: read whole, then paged."""
        if listing.session_id is not None:
            raise InvalidInput("facts have no session; list episodes by session_id", code="invalid_filter")
        tenant = caller.tenant
        before = self._before(tenant, listing.cursor, "facts")
        facts = [f for scope_id in self._subtree(tenant, listing) for f in self.store.list_facts(tenant, scope_id)]
        facts.sort(key=lambda f: (f.created_at, f.fact_id), reverse=True)
        if before is not None:
            facts = [f for f in facts if (f.created_at, f.fact_id) < before]
        terms: dict[str, list[str]] = {}
        if listing.metadata:  # a fact carries its sources' metadata (as the index does)
            sources = self.store.get_episodes(tenant, [i for f in facts for i in f.source_episode_ids], vectors=False)
            terms = {f.fact_id: shared_terms([sources[i].metadata for i in f.source_episode_ids if i in sources])
                     for f in facts}  # fmt: skip
        kept = [f for f in facts if listing.passes(f.valid_from, terms.get(f.fact_id, []))]
        page = kept[: listing.limit]
        last = (page[-1].created_at, page[-1].fact_id) if len(kept) > listing.limit else None
        return {"facts": [self.fact_view(tenant, f) for f in page], **self._page(tenant, last, "facts")}

    # -- views ----------------------------------------------------------------------------
    def episode_view(self, tenant: str, episode: Episode) -> dict[str, Any]:
        view = episode.model_dump(mode="json", include=EPISODE_FIELDS)
        if episode.structured:
            view["sttp"] = episode.structured
        return {"id": episode.episode_id, "kind": "episode", "scope": self._path(tenant, episode.scope_id), **view}

    def fact_view(self, tenant: str, fact: Fact) -> dict[str, Any]:
        view = fact.model_dump(mode="json", exclude={"tenant", "fact_id", "scope_id", "vector", "model_id"})
        return {"id": fact.fact_id, "kind": "fact", "scope": self._path(tenant, fact.scope_id), **view}

    # -- helpers --------------------------------------------------------------------------
    def _path(self, tenant: str, scope_id: str) -> str:
        return self.scopes.paths_of(tenant, [scope_id]).get(scope_id, scope_id)

    def _subtree(self, tenant: str, listing: Listing) -> list[str]:
        return [scope.scope_id for _, scope in self.scopes.subtree(tenant, listing.scope)]

    def _before(self, tenant: str, cursor: str | None, purpose: str) -> tuple[datetime, str] | None:
        if cursor is None:
            return None
        values = self.cursors.decode(tenant, cursor, purpose)
        try:
            at, record_id = values
            return datetime.fromisoformat(at), str(record_id)
        except (ValueError, TypeError) as e:
            raise InvalidInput("invalid cursor", code="invalid_cursor") from e

    def _position(self, tenant: str, cursor: str | None) -> Position | None:
        """An episode list's cursor: the position of the last episode listed (a cursor from before positions,
        (created_at, id), resumes with that call's turns, whole)."""
        if cursor is None:
            return None
        values = self.cursors.decode(tenant, cursor, "episodes")
        try:
            at, sequence, record_id = values if len(values) == 3 else (values[0], HIGHEST_SEQUENCE, "")
            return datetime.fromisoformat(at), int(sequence), str(record_id)
        except (ValueError, TypeError) as e:
            raise InvalidInput("invalid cursor", code="invalid_cursor") from e

    def _position_page(self, tenant: str, last: Position | None) -> dict[str, Any]:
        if last is None:
            return {"next_cursor": None, "has_more": False}
        values = [last[0].isoformat(), last[1], last[2]]
        return {"next_cursor": self.cursors.encode(tenant, values, "episodes"), "has_more": True}

    def _page(self, tenant: str, last: tuple[datetime, str] | None, purpose: str) -> dict[str, Any]:
        """`next_cursor` resumes after `last`; without one the listing reached the end."""
        if last is None:
            return {"next_cursor": None, "has_more": False}
        return {"next_cursor": self.cursors.encode(tenant, [last[0].isoformat(), last[1]], purpose), "has_more": True}
