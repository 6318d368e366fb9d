"""recall: filters, tenancy, strictness, fallback, lifecycle, explain and the context pack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.errors import StoreUnavailable
from mneme.models import Role
from mneme.services.context_pack import estimate_tokens
from mneme.services.recall import RecallRequest, RecallResponse
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)
WRITER = principal("acme", "wendy", Role.writer)
DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def remember(services: Services, content: str, scope: str = "root.acme", **fields: Any) -> str:
    item = RememberItem.model_validate({"scope": scope, "content": content, "create_scope": True, **fields})
    return services.remember.remember(WRITER, [item])[0].episode_id


def recall(services: Services, query: str, caller: Any = ALICE, **fields: Any) -> RecallResponse:
    return services.recall.recall(caller, RecallRequest.model_validate({"query": query, **fields}))


def ids(response: RecallResponse) -> list[str]:
    return [r.id for r in response.results]


def test_another_tenant_never_sees_anything(services: Services) -> None:
    remember(services, "The safe code is in the blue folder.")
    other = principal("globex", "gina", Role.admin)
    assert ids(recall(services, "safe code blue folder", caller=other, scoring={"strictness": "recall"})) == []


def test_subtree_scope_limits_results(services: Services) -> None:
    north = remember(services, "Forklift inspection passed.", scope="root.acme.north")
    south = remember(services, "Forklift inspection failed.", scope="root.acme.south")
    assert ids(recall(services, "forklift inspection", scope="root.acme.north")) == [north]
    assert set(ids(recall(services, "forklift inspection", scope="root.acme"))) == {north, south}


def test_filters_on_time_tier_session_and_kind(services: Services) -> None:
    early = remember(services, "Budget meeting notes.", occurred_at=DAY, session_id="s1")
    late = remember(services, "Budget meeting notes, second.", occurred_at=DAY + timedelta(days=10), tier="daily")
    assert ids(recall(services, "budget meeting", since=DAY + timedelta(days=1))) == [late]
    assert ids(recall(services, "budget meeting", until=DAY + timedelta(days=1))) == [early]
    assert ids(recall(services, "budget meeting", tiers=["daily"])) == [late]
    assert ids(recall(services, "budget meeting", session_id="s1")) == [early]
    assert ids(recall(services, "budget meeting", kinds=["memory"])) == []


def test_dates_in_the_query_match_the_episode_date(services: Services) -> None:
    march = remember(services, "Stocktake completed.", occurred_at=DAY)
    remember(services, "Stocktake completed.", occurred_at=DAY + timedelta(days=60))
    response = recall(services, "stocktake March 2026", scoring={"strictness": "precision"})
    assert ids(response)[0] == march


def test_precision_applies_the_anchor_rule(services: Services) -> None:
    remember(services, "The courier collects parcels at noon.")
    remember(services, "Lunch is served at noon in the canteen.")
    precise = recall(services, "when does the courier come", scoring={"strictness": "precision"})
    assert [r.content for r in precise.results] == ["The courier collects parcels at noon."]


def test_generic_words_alone_do_not_admit(services: Services) -> None:
    remember(services, "A rule about knowledge and memory.")
    response = recall(services, "memory rule knowledge", scoring={"strictness": "precision", "fallback": "never"})
    assert response.results == []


def test_lexical_fallback_widens_the_channel_never_the_admission_rule(services: Services) -> None:
    episode = remember(services, "Parking permit renewed for van KX19.")
    vector_only = {"alpha": 1.0, "beta": 0.0}
    query = "KX19 blue truck depot"  # the cosine is under 0.25: balanced does not admit a vector-only hit
    assert recall(services, query, scoring={**vector_only, "fallback": "never"}).results == []
    response = recall(services, query, scoring={**vector_only, "fallback": "on_empty"}, explain=True)
    assert response.retrieval_path == "lexical_fallback" and ids(response) == [episode]
    assert response.explain and response.explain["fallback"] == {
        "policy": "on_empty",
        "triggered": True,
        "reason": "on_empty",
    }
    # four anchors need two hits; the episode has one, and the fallback does not change that
    precise = recall(services, query, scoring={**vector_only, "strictness": "precision"}, explain=True)
    assert precise.results == []
    assert (precise.explain or {})["omitted"] == [{"id": episode, "reason": "not_admitted:precision"}]


def test_vector_failure_falls_back_to_lexical_unless_told_never(services: Services) -> None:
    remember(services, "Alarm code changed on Friday.")

    class Broken:
        model_id, dimension = services.embedder.model_id, services.embedder.dimension

        def embed(self, texts: list[str]) -> Any:
            raise StoreUnavailable("embedder down")

    services.recall.embedder = Broken()  # type: ignore[assignment]
    response = recall(services, "alarm code", explain=True)
    assert response.retrieval_path == "lexical_fallback" and len(response.results) == 1
    assert response.explain and response.explain["fallback"]["reason"] == "vector_unavailable"
    with pytest.raises(StoreUnavailable):
        recall(services, "alarm code", scoring={"fallback": "never"})


def test_retrieval_path_names_the_channels(services: Services) -> None:
    remember(services, "Gate 3 closes at six.")
    assert recall(services, "gate closes").retrieval_path == "hybrid"
    assert recall(services, "gate closes", scoring={"alpha": 1, "beta": 0}).retrieval_path == "vector"
    assert recall(services, "gate closes", scoring={"alpha": 0, "beta": 1}).retrieval_path == "lexical"


def test_every_result_carries_per_channel_scores(services: Services) -> None:
    remember(services, "Gate 3 closes at six tonight for the night shift's cleaning crew.")
    [result] = recall(services, "gate closes").results
    assert set(result.scores) == {"vector", "lexical", "bm25", "lifecycle"}
    assert 0 < result.score <= 1 and result.scores["lexical"] == 1.0


def test_lifecycle_review_due_lowers_and_valid_until_omits(services: Services, clock: Any) -> None:
    services.scopes.create("acme", "root.acme")
    fresh, _ = services.memories.create(ALICE, scope="root.acme", key="fresh", body="Recycling goes out Tuesday.")
    services.memories.create(
        ALICE,
        scope="root.acme",
        key="due",
        body="Recycling goes out Tuesday.",
        review_due=clock.now() - timedelta(days=1),
    )
    expired, _ = services.memories.create(
        ALICE,
        scope="root.acme",
        key="gone",
        body="Recycling goes out Tuesday.",
        valid_until=clock.now() + timedelta(hours=1),
    )
    clock.advance(hours=2)
    response = recall(services, "recycling tuesday", explain=True)
    scores = {r.key: r for r in response.results}
    assert set(scores) == {"fresh", "due"}
    assert scores["due"].scores["lifecycle"] == 0.7 and scores["due"].score < scores["fresh"].score
    assert {"id": expired.memory_id, "reason": "lifecycle"} in (response.explain or {})["omitted"]
    assert fresh.memory_id == response.results[0].id


def test_pending_memories_are_recalled_only_by_their_author(services: Services) -> None:
    services.scopes.create("acme", "root.acme")
    services.memories.create(WRITER, scope="root.acme", key="idea", body="Try batching the payroll run.")
    assert [r.status for r in recall(services, "payroll batching", caller=WRITER).results] == ["pending"]
    assert recall(services, "payroll batching", caller=principal("acme", "omar", Role.writer)).results == []


def test_explain_reports_stages_filters_and_omissions(services: Services) -> None:
    remember(services, "Fire drill on the 3rd.")
    response = recall(services, "fire drill", explain=True)
    explain = response.explain or {}
    assert [s["stage"] for s in explain["stages"]] == [
        "search",
        "fuse",
        "admit",
        "lifecycle",
        "fallback",
        "time",
        "select",
        "prerequisites",
        "pack",
    ]
    assert explain["stages"][0]["channels"] == {"vector": 1, "lexical": 1, "revision": 0}
    assert explain["filters"]["ancestor_id"] and explain["anchors"] == ["drill", "fire"]
    assert recall(services, "fire drill").explain is None


def test_context_pack_expands_the_top_and_cards_the_rest(services: Services) -> None:
    episodes = [remember(services, f"Shipment {i} to Leeds was delayed by fog.") for i in range(6)]
    response = recall(services, "shipment Leeds delayed", disclosure={"expand_top": 2})
    context = response.context
    assert context.count("### ep_") == 2
    assert sum(1 for line in context.splitlines() if line.startswith("- ep_")) == 4
    fetch = context.strip().splitlines()[-1]
    assert fetch.startswith("fetch: ids=") and len(fetch.split("=")[1].split(",")) == 4
    assert set(ids(response)) == set(episodes)


def test_budget_demotes_bodies_first_then_drops_lowest_cards_never_cutting_a_body(services: Services) -> None:
    long_body = "The Leeds warehouse roof leaked again after heavy rain. " * 12
    for i in range(8):
        remember(services, f"{long_body} Report {i}.")
    full = recall(services, "Leeds warehouse roof leak", disclosure={"expand_top": 3})
    for budget in (600, 300, 120, 60):
        response = recall(
            services,
            "Leeds warehouse roof leak",
            disclosure={"expand_top": 3, "budget_tokens": budget},
            explain=True,
        )
        assert estimate_tokens(response.context) <= budget
        pack = (response.explain or {})["context"]
        for expanded in pack["expanded"]:
            body = next(r.content for r in response.results if r.id == expanded)
            assert body.strip() in response.context  # whole, never cut
        ranked = ids(full)
        if pack["dropped"]:
            assert pack["expanded"] == [] and pack["dropped"] == ranked[len(ranked) - len(pack["dropped"]) :]


def test_ids_fetch_full_bodies_within_the_tenant_only(services: Services) -> None:
    episode = remember(services, "Contract renewal is due in May.")
    response = services.recall.recall(ALICE, RecallRequest(ids=[episode, "ep_missing"], explain=True))
    assert ids(response) == [episode] and "Contract renewal is due in May." in response.context
    other = principal("globex", "gina", Role.admin)
    assert services.recall.recall(other, RecallRequest(ids=[episode])).results == []


def test_depends_on_pulls_prerequisites_into_the_pack(services: Services) -> None:
    services.scopes.create("acme", "root.acme")
    base, _ = services.memories.create(
        ALICE, scope="root.acme", key="release-foundation", body="Tag releases from main."
    )
    services.memories.create(
        ALICE,
        scope="root.acme",
        key="hotfix",
        body="Hotfix branches merge back quickly.",
        depends_on=["release-foundation"],
    )
    response = recall(services, "hotfix branches", scoring={"strictness": "precision"})
    assert [r.key for r in response.results] == ["release-foundation", "hotfix"]
    assert response.results[1].requires == [base.memory_id]
    assert f"requires: {base.memory_id}" in response.context


def test_session_delta_collapses_bodies_already_loaded(services: Services) -> None:
    remember(services, "Printer on floor 2 needs toner.")
    first = recall(services, "printer toner", session_id="chat-1", delta=True)
    assert "### ep_" in first.context
    second = recall(services, "printer toner", session_id="chat-1", delta=True)
    assert "### ep_" not in second.context and f"already loaded: {first.results[0].id}" in second.context
    other_session = recall(services, "printer toner", session_id="chat-2", delta=True)
    assert "### ep_" in other_session.context


class LaggingIndex:
    """An eventually consistent index: upserts land, but searches do not see them yet."""

    visibility_lag = 120.0

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def search_text(self, flt: Any, query: str, k: int) -> list[Any]:
        return []

    def search_vector(self, flt: Any, vector: Any, model_id: str, k: int) -> list[Any]:
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_fresh_episodes_are_recalled_before_an_eventually_consistent_index_catches_up(
    services: Services, clock: Any
) -> None:
    services.recall.index = LaggingIndex(services.index)  # type: ignore[assignment]
    north = remember(services, "Boiler pressure dropped in the north plant.", scope="root.acme.north")
    remember(services, "Boiler pressure dropped in the south plant.", scope="root.acme.south")
    response = recall(services, "boiler pressure", scope="root.acme.north", explain=True)
    assert ids(response) == [north]
    assert (response.explain or {})["stages"][0]["channels"]["fresh"] == 1
    clock.advance(seconds=121)
    assert recall(services, "boiler pressure", scope="root.acme.north", scoring={"fallback": "never"}).results == []


def test_a_busy_scope_does_not_crowd_another_scopes_fresh_episode_out_of_the_tail(services: Services) -> None:
    """The fresh tail is bounded (FRESH_LIMIT newest): read tenant-wide, sixty newer turns in a sibling
    scope pushed the searched scope's own fresh turn out of it; read scope by scope, it is found."""
    services.recall.index = LaggingIndex(services.index)  # type: ignore[assignment]
    north = remember(services, "Boiler pressure dropped in the north plant.", scope="root.acme.north")
    for n in range(60):
        remember(services, f"Chiller reading {n} logged in the south plant.", scope="root.acme.south")
    assert ids(recall(services, "boiler pressure", scope="root.acme.north")) == [north]
    assert north in ids(recall(services, "boiler pressure", scope="root.acme"))
    assert ids(recall(services, "boiler pressure")) == []  # the root's tail: the tenant's 50 newest


class SeeingLaggingIndex(LaggingIndex):
    """An eventually consistent index that still returns what it held a moment ago."""

    def search_text(self, flt: Any, query: str, k: int) -> list[Any]:
        return list(self.inner.search_text(flt, query, k))

    def search_vector(self, flt: Any, vector: Any, model_id: str, k: int) -> list[Any]:
        return list(self.inner.search_vector(flt, vector, model_id, k))


class LaggingReads:
    """The store, its eventually consistent episode reads answered from a replica a moment behind."""

    def __init__(self, inner: Any, replica: dict[str, Any]) -> None:
        self.inner, self.replica = inner, replica

    def get_episodes(self, tenant: str, ids: Any, *, consistent: bool = True, **kwargs: Any) -> Any:
        if consistent:
            return self.inner.get_episodes(tenant, ids, **kwargs)
        return {i: self.replica[i] for i in ids if i in self.replica}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_episode_forgotten_within_the_index_lag_is_never_shown_from_a_lagging_read(
    services: Services, clock: Any
) -> None:
    """Episodes are loaded eventually consistent (half DynamoDB's read units); one forgotten a moment ago
    may still be in the index and in a lagging read, and recall still leaves it out."""
    from mneme.models import Forgotten

    kept = remember(services, "Boiler pressure dropped in the north plant on Monday.")
    gone = remember(services, "Boiler pressure dropped in the north plant on Tuesday.")
    replica = services.store.get_episodes("acme", [kept, gone])
    services.recall.index = SeeingLaggingIndex(services.index)  # type: ignore[assignment]
    services.recall.store = LaggingReads(services.recall.store, replica)  # type: ignore[assignment]
    assert sorted(ids(recall(services, "boiler pressure north plant"))) == sorted([kept, gone])

    record = {"tenant": "acme", "record_id": gone, "kind": "episode", "scope_id": replica[gone].scope_id,
              "forgotten_by": "wendy", "forgotten_at": clock.now()}  # fmt: skip
    services.store.forget_episode("acme", gone, Forgotten.model_validate(record))  # the index not told yet

    response = recall(services, "boiler pressure north plant", explain=True)
    assert ids(response) == [kept]


class CountingStore:
    """The store, counting the episodes recall reads by id after the fresh tail listed them."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.listed, self.reread = inner, set[str](), list[str]()

    def list_recent_episodes(self, *args: Any) -> list[Any]:
        episodes = self.inner.list_recent_episodes(*args)
        self.listed.update(e.episode_id for e in episodes)
        return list(episodes)

    def get_episodes(self, tenant: str, ids: Any, **kwargs: Any) -> Any:
        self.reread += [i for i in ids if i in self.listed]
        return self.inner.get_episodes(tenant, ids, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_fresh_tail_reads_each_recent_episode_once(services: Services) -> None:
    """On DynamoDB every episode read is ~2 read units (4.4 KB, strongly consistent): the fresh tail's
    episodes were read again to load the candidates, doubling a busy tenant's recall (bench/cost.py)."""
    services.recall.index = LaggingIndex(services.index)  # type: ignore[assignment]
    counting = CountingStore(services.recall.store)
    services.recall.store = counting  # type: ignore[assignment]
    written = [remember(services, f"Boiler pressure reading {n} in the north plant.") for n in range(5)]
    response = recall(services, "boiler pressure north plant", explain=True)
    assert sorted(ids(response)) == sorted(written)
    assert counting.listed >= set(written)
    assert counting.reread == []


def test_a_fact_folds_its_sources_and_a_stale_fact_is_marked_on_its_card(services: Services, clock: Any) -> None:
    episode = remember(services, "The invoice contact for Pennine Joinery is Sam Patel.")
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)
    services.consolidation.start(WRITER, None)
    facts = [f for f in services.store.list_facts("acme") if episode in f.source_episode_ids]
    assert facts
    services.store.put_facts([f.model_copy(update={"stale": True}) for f in facts])
    response = recall(services, "invoice contact Pennine Joinery", disclosure={"expand_top": 0}, explain=True)
    assert response.results[0].kind == "fact" and episode not in ids(response)
    assert {"id": episode, "reason": f"source_of:{response.results[0].id}"} in (response.explain or {})["omitted"]
    cards = [line for line in response.context.splitlines() if line.startswith("- fa_")]
    assert cards and all(line.endswith(" (stale)") for line in cards)


def test_the_text_channel_reads_deeper_than_the_vector_channel(services: Services) -> None:
    items = [f"Invoice {i} for the harbour crane was paid by transfer on day {i}." for i in range(130)]
    for batch in (items[:100], items[100:]):  # a batch holds at most 100
        services.remember.remember(
            ALICE, [RememberItem(scope="root.acme", content=t, create_scope=True) for t in batch]
        )
    response = recall(services, "harbour crane invoice", limit=10, explain=True)
    assert response.explain is not None
    search = next(stage for stage in response.explain["stages"] if stage["stage"] == "search")
    assert search["channels"]["vector"] == 50 and search["channels"]["lexical"] == 100  # TEXT_DEPTH
