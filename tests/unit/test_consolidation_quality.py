"""Consolidation that earns its place: recall never hides what answers, one place per observation,
roll-ups for time only and without boilerplate, replays that write nothing, clusters set aside."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from mneme.bootstrap import Services
from mneme.consolidation.stages import MAX_HOLDS, OUTAGE
from mneme.errors import ReasonerOutputInvalid, StoreUnavailable
from mneme.records import MAX_LISTED_IDS, Proposal, Reading
from mneme.services.recall import RecallRequest
from tests.unit.test_consolidation import WRITER, _scope, remember, settle


def consolidate(services: Services, clock: Any) -> Any:
    settle(services, clock)
    return services.consolidation.start(WRITER, None)


def test_a_claim_fact_folds_its_grounding_turn_and_shows_it_beside_it(services: Services, clock: Any) -> None:
    ids = remember(
        services, "I moved to Berlin last year.", "Cool! What did it look like?", metadata={"speaker": "Maya"}
    )
    run = consolidate(services, clock)
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert fact.summary == "Maya lives in Berlin." and fact.source_episode_ids == [ids[0]]
    assert services.consolidation.get(WRITER, run.run_id).facts == [  # the run lists the facts it wrote
        {"fact_id": fact.fact_id, "scope_id": fact.scope_id, "summary": "Maya lives in Berlin.", "status": "active"}
    ]
    response = services.recall.recall(WRITER, RecallRequest(query="Where does Maya live?", explain=True))
    top = response.results[0]
    assert top.id == fact.fact_id
    assert [s.get("text") for s in top.sources or []] == ["I moved to Berlin last year."]
    assert ids[0] not in [r.id for r in response.results]  # folded: the fact shows its words
    assert "said by Maya on" in response.context and "I moved to Berlin last year." in response.context
    assert {"id": ids[0], "reason": f"source_of:{fact.fact_id}"} in response.explain["omitted"]


def test_a_word_and_colon_opening_a_message_is_not_taken_for_its_speaker(services: Services, clock: Any) -> None:
    remember(services, "Reminder: my billing plan is Basic.", "Note: my billing plan is Basic.",
             metadata={"speaker": "Ines"})  # fmt: skip
    consolidate(services, clock)
    entities = {f.entity for f in services.store.list_facts("acme") if f.tier == "raw"}
    assert not entities & {"Reminder", "Note"}


def test_a_lower_case_speaker_owns_its_words(services: Services, clock: Any) -> None:
    """Messages sent as {"role": "user"} or {"name": "ines"}: the speaker is lower case, and its first-person
    words were owned by nobody (no fact), while the name became a roll-up topic."""
    remember(services, "My billing plan is Basic.", metadata={"speaker": "ines"})
    remember(services, "I live in Leeds.", metadata={"speaker": "user"})
    consolidate(services, clock)
    facts = services.store.list_facts("acme")
    claims = {(f.entity, f.property, f.value) for f in facts if f.tier == "raw"}
    assert {("Ines", "billing plan", "Basic"), ("User", "lives in", "Leeds")} <= claims
    assert not any({"ines", "user"} & set(f.summary.replace(",", " ").split()) for f in facts if f.tier != "raw")


def test_a_fact_never_folds_a_source_that_does_not_state_it(services: Services, clock: Any) -> None:
    from mneme.records import Fact

    [other] = remember(services, "Acme moved offices to Leeds in spring.")
    scope_id = _scope_of(services, "root.acme")
    now = clock.now()
    fact = Fact(tenant="acme", fact_id="fa_test", scope_id=scope_id, entity="Acme", property="VAT scheme",
                value="flat rate", summary="Acme's VAT scheme is flat rate.", confidence=0.5,
                source_episode_ids=[other], valid_from=now, created_at=now, updated_at=now,
                reinforced_at=now)  # fmt: skip
    services.store.put_facts([fact])
    services.consolidation.deps.indexer.index_facts([fact])
    response = services.recall.recall(WRITER, RecallRequest(query="Acme offices Leeds VAT"))
    ids = [r.id for r in response.results]
    assert other in ids and "fa_test" in ids  # the turn keeps its own place: the fact does not state it
    assert all(not s.get("text") for r in response.results if r.id == "fa_test" for s in r.sources or [])


def test_small_talk_makes_no_fact_and_rollups_carry_no_boilerplate(services: Services, clock: Any) -> None:
    remember(services, "Haha, that's hilarious.", "Haha that is hilarious!", "Tom: I'm allergic to peanuts.")
    consolidate(services, clock)
    facts = services.store.list_facts("acme")
    assert [f.summary for f in facts if f.tier == "raw"] == ["Tom is allergic to peanuts."]
    rollups = [f for f in facts if f.tier != "raw"]
    assert [f.tier for f in rollups] == ["daily"]  # the week would repeat its one day: not written
    for rollup in rollups:
        assert "summary" not in rollup.summary and "observations" not in rollup.summary
        assert rollup.summary == "Tom is allergic to peanuts."  # the period's claims; small talk is not quoted
    precise = RecallRequest.model_validate(
        {"query": "observations", "scoring": {"strictness": "precision", "fallback": "never"}, "limit": 50}
    )
    assert services.recall.recall(WRITER, precise).results == []
    summary = RecallRequest.model_validate({"query": "daily summary", "tiers": ["daily", "weekly"]})
    assert services.recall.recall(WRITER, summary).results == []


def test_a_roll_up_states_the_claims_then_quotes_the_informative_sentences_with_their_speakers() -> None:
    from datetime import UTC, datetime, timedelta

    from mneme.language.digests import Standing, compose
    from mneme.models import Episode
    from mneme.records import Fact

    at = datetime(2026, 3, 2, 9, tzinfo=UTC)
    said = ["Maya: I moved to Berlin.", "Maya: The flat in Berlin has a balcony over the canal.",
            "Tom: A balcony! Lucky.", "Tom: Did you paint it?",
            "Maya: We painted the kitchen sage green and the hallway white."]  # fmt: skip
    stamps = {"content_hash": "h", "created_at": at, "author": "a", "tenant": "t", "scope_id": "s"}
    turns = [Episode(episode_id=f"ep{n}", content=text, occurred_at=at + timedelta(minutes=n), **stamps)
             for n, text in enumerate(said)]  # fmt: skip
    claim = Fact(tenant="t", fact_id="fa", scope_id="s", entity="Maya", property="lives in", value="Berlin",
                 summary="Maya lives in Berlin.", confidence=0.5, source_episode_ids=["ep0"], valid_from=at,
                 created_at=at, updated_at=at, reinforced_at=at)  # fmt: skip
    text = compose("daily", Standing.of([claim]), turns)
    assert text.split("\n") == [
        "Maya lives in Berlin.",  # the claim, then what no claim says: no question, no small talk
        "Maya: The flat in Berlin has a balcony over the canal.",
        "Maya: We painted the kitchen sage green and the hallway white.",
    ]
    moved = claim.model_copy(update={"status": "superseded"})
    assert "Berlin." not in compose("daily", Standing.of([moved]), turns[:1])  # a superseded value is not restated


def test_a_roll_up_quotes_a_pronoun_with_whom_it_is_about_and_an_assistant_only_alone() -> None:
    from datetime import UTC, datetime, timedelta

    from mneme.language.digests import quotes
    from mneme.models import Episode

    at = datetime(2026, 5, 4, 20, tzinfo=UTC)
    stamps = {"content_hash": "h", "created_at": at, "author": "a", "tenant": "t", "scope_id": "s"}

    def said(*texts: str) -> list[Episode]:
        return [Episode(episode_id=f"ep{n}", content=text, occurred_at=at + timedelta(minutes=n), **stamps)
                for n, text in enumerate(texts)]  # fmt: skip

    turns = said(
        "Odile: My brother Anselm got the lock-keeper job on the Kennet. He starts at Newbury lock in June.",
        "Odile: Mine still leaks every time it rains on the skylight side.",  # whose? not said in its turn
        "Assistant: Lock-keeping suits people who like routine; remind him to check the pension terms.",
    )
    quoted = quotes(turns, 6)
    assert quoted == [
        "Odile: My brother Anselm got the lock-keeper job on the Kennet. He starts at Newbury lock in June."
    ]  # the pronoun's sentence with the one naming him; nothing of "Mine …"; no advice while a person spoke
    alone = said("Assistant: Reminder set for the boiler service at Whitcombe Heating on 12 June, 9am.")
    assert quotes(alone, 6) == ["Assistant: Reminder set for the boiler service at Whitcombe Heating on 12 June, 9am."]


def test_rollups_are_returned_only_for_a_period_or_their_tier(services: Services, clock: Any) -> None:
    remember(services, "The kiln firing went well.", occurred_at=clock.now() - timedelta(days=1))  # a Saturday
    remember(services, "Kiln firing again on Friday.", occurred_at=clock.now())  # and the Sunday: one ISO week
    consolidate(services, clock)
    plain = services.recall.recall(WRITER, RecallRequest(query="kiln firing", explain=True))
    assert all(r.tier in (None, "raw") or r.kind == "episode" for r in plain.results)
    assert plain.explain["filters"]["rollups"] is False
    asked = services.recall.recall(WRITER, RecallRequest(query="kiln firing", tiers=["daily", "weekly"]))
    assert [r.tier for r in asked.results] == ["daily"] or [r.tier for r in asked.results] == ["weekly"]
    # one of the two: the daily and the weekly roll-up cover the same turns, one place for them
    period = services.recall.recall(WRITER, RecallRequest(query=f"kiln firing in {clock.now():%B %Y}"))
    assert {r.tier for r in period.results if r.kind == "fact"} == {"weekly"}  # a day's digest is too fine
    year = services.recall.recall(WRITER, RecallRequest(query=f"kiln firing in {clock.now():%Y}", explain=True))
    assert all(r.tier in (None, "raw") for r in year.results)  # a year is not answered by a week's digest
    assert year.explain["filters"]["rollup_tiers"] == ["quarterly", "yearly"]  # a week's is too fine for a year:
    assert not any(o["id"].startswith("ro_") for o in year.explain["omitted"])  # never a candidate taking a place
    asked = services.recall.recall(WRITER, RecallRequest(query=f"kiln firing in {clock.now():%Y}", tiers=["weekly"]))
    assert [r.tier for r in asked.results] == ["weekly"]


def test_one_observation_takes_one_place_in_a_pack(services: Services, clock: Any) -> None:
    ids = remember(services, "I'm a site reliability engineer at Cloudflare.", metadata={"speaker": "Raj"})
    consolidate(services, clock)
    response = services.recall.recall(WRITER, RecallRequest(query="Raj engineer Cloudflare", tiers=["raw", "daily"]))
    shown = [s["id"] for r in response.results if r.kind == "fact" for s in r.sources or [] if s.get("text")] + [
        r.id for r in response.results if r.kind == "episode"
    ]
    assert shown.count(ids[0]) == 1
    assert response.context.count("site reliability engineer at Cloudflare") == 1


def test_a_replay_writes_nothing_and_reinforces_nothing(services: Services, clock: Any) -> None:
    remember(services, "Acme's VAT scheme is flat rate.", "Acme's VAT scheme is flat rate, Sam confirmed.")
    settle(services, clock)
    deps = services.consolidation.deps
    from mneme.consolidation.service import run_stage
    from mneme.consolidation.stages import STAGE_NAMES, Batch

    batch = Batch(tenant="acme", scope_id=_scope(services), run_id="r1", started_at=clock.now())
    for name in STAGE_NAMES[:-1]:  # a crash before the checkpoint
        batch = Batch.model_validate(run_stage(deps, {"stage": name, "batch": batch.model_dump(mode="json")}))
    before = {f.fact_id: f.model_dump() for f in services.store.list_facts("acme")}
    clock.advance(minutes=5)
    run = services.consolidation.start(WRITER, None)  # the replay
    assert run.status == "succeeded"
    assert run.counter("reconcile", "unchanged") == 1 and run.counter("reconcile", "reinforce") == 0
    assert run.counter("commit", "facts_written") == 0 and run.counter("rollup", "rollups") == 0
    after = {f.fact_id: f.model_dump() for f in services.store.list_facts("acme")}
    assert after == before  # not even updated_at moved


class Rejected:
    """A reasoner whose answers never hold up: grounding rejects every one."""

    name, generative = "rejected", True

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
        self.calls += 1
        if self.calls % 2:
            raise ReasonerOutputInvalid("not JSON")
        return Reading(facts=[Proposal(entity="Globex", property="p", value="nowhere", summary="Globex is nowhere.",
                                       sources=[1])])  # fmt: skip


def test_a_window_that_always_fails_is_set_aside_and_the_checkpoint_moves(services: Services, clock: Any) -> None:
    ids = remember(services, *[f"Pallet {i} damaged in transit at dock {i}." for i in range(12)])
    reasoner = services.consolidation.deps.reasoner = Rejected()
    run = consolidate(services, clock)
    assert run.status == "partial" and run.errors == []  # done, but windows were given up on: set_aside says why
    windows = run.counter("cluster", "clusters")
    assert run.counter("extract", "set_aside") == windows == 1 and reasoner.calls == 2
    assert services.store.get_checkpoint("acme", _scope(services)).processed == len(ids)
    entry = run.set_aside[0]
    assert entry["scope_id"] == _scope(services) and "not consolidated after 2 attempts" in entry["reason"]
    assert len(entry["episode_ids"]) <= MAX_LISTED_IDS and entry["episodes"] == len(ids)
    stored = services.consolidation.get(WRITER, run.run_id)
    assert stored.set_aside == run.set_aside
    assert services.store.list_dirty("acme", 10) == [("acme", _scope(services))]  # it waits to come back
    clock.advance(minutes=15)
    assert consolidate(services, clock).counter("extract", "reasoner_calls") == 0  # not before its backoff
    assert reasoner.calls == 2


def test_a_window_set_aside_comes_back_after_a_bounded_backoff(services: Services, clock: Any) -> None:
    from mneme.consolidation.backoff import BACKOFF, MAX_RETURNS

    # Given a window set aside (every answer refused)
    ids = remember(services, *[f"Crate {i} of tiles left at bay {i}." for i in range(6)])
    reasoner = services.consolidation.deps.reasoner = Rejected()
    consolidate(services, clock)
    # When runs come after each backoff (1, 4, 16 hours)
    runs = []
    for n in range(MAX_RETURNS):
        clock.advance(seconds=(BACKOFF * 4**n).total_seconds() + 60)
        runs.append(consolidate(services, clock))
    # Then each offers the window again, lists it in the run, and the last gives up on it for good
    assert [r.counter("extract", "returned") for r in runs] == [1, 1, 1] and reasoner.calls == 2 * (1 + MAX_RETURNS)
    assert [r.returned[0]["outcome"] for r in runs] == ["set aside again", "set aside again", "given up"]
    assert runs[-1].returned[0]["attempts"] == MAX_RETURNS + 1 and runs[-1].returned[0]["episodes"] == len(ids)
    assert services.store.get_checkpoint("acme", _scope(services)).waiting == []
    assert services.store.list_dirty("acme", 10) == []  # nothing waits: the scope is clean
    clock.advance(days=30)
    assert consolidate(services, clock).counter("extract", "reasoner_calls") == 0


def test_a_window_that_comes_back_to_a_working_reasoner_is_consolidated(services: Services, clock: Any) -> None:
    from mneme.consolidation.backoff import BACKOFF
    from mneme.consolidation.reasoning import ExtractiveReasoner

    [said] = remember(services, "Tom: I'm allergic to peanuts.")
    services.consolidation.deps.reasoner = Rejected()
    consolidate(services, clock)
    services.consolidation.deps.reasoner = ExtractiveReasoner()  # the outage is over, the prompt fixed...
    remember(services, "Tom: I live in Leeds.")  # and something new came meanwhile
    clock.advance(seconds=BACKOFF.total_seconds() + 60)
    run = consolidate(services, clock)
    assert run.status == "succeeded" and run.counter("extract", "recovered") == 1
    assert [(r["outcome"], r["episode_ids"]) for r in run.returned] == [("consolidated", [said])]
    facts = {f.summary for f in services.store.list_facts("acme") if f.tier == "raw"}
    assert facts == {"Tom is allergic to peanuts.", "Tom lives in Leeds."}
    assert services.store.get_checkpoint("acme", _scope(services)).waiting == []


class Down:
    name, generative = "down", True

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
        self.calls += 1
        raise StoreUnavailable("model endpoint unavailable")


def test_an_unavailable_reasoner_holds_a_scope_for_a_bounded_number_of_runs(services: Services, clock: Any) -> None:
    remember(
        services, *[f"Crate {i} of tiles {'blue green red amber violet'.split()[i % 5]} at bay {i}." for i in range(10)]
    )
    reasoner = services.consolidation.deps.reasoner = Down()
    runs = []
    for _ in range(MAX_HOLDS):
        runs.append(consolidate(services, clock))
        assert runs[-1].counter("extract", "reasoner_calls") <= 2 * OUTAGE  # stops calling during an outage
        clock.advance(minutes=15)
    held, last = runs[:-1], runs[-1]
    assert all(r.status == "failed" and r.counter("checkpoint", "held") == 1 for r in held)
    assert last.status == "partial" and last.counter("extract", "set_aside") >= 1
    assert "unavailable in 3 runs in a row" in last.set_aside[0]["reason"]
    checkpoint = services.store.get_checkpoint("acme", _scope(services))
    assert checkpoint.processed == 10 and checkpoint.held == 0
    assert checkpoint.set_aside and checkpoint.set_aside[0]["run_id"] == last.run_id
    assert reasoner.calls <= MAX_HOLDS * 2 * OUTAGE


def _scope_of(services: Services, path: str) -> str:
    return services.scopes.resolve("acme", path).scope.scope_id


def test_out_of_time_extract_commits_the_clusters_it_tried_and_leaves_the_rest_for_the_next_batch(
    services: Services, clock: Any, monkeypatch: Any
) -> None:
    from mneme.consolidation import extract, stages
    from mneme.consolidation.reasoning import ExtractiveReasoner
    from mneme.consolidation.service import run_batch

    schemes = [("Acme", "flat rate"), ("Globex", "standard rate"), ("Initech", "cash accounting"), ("Hooli", "flat")]
    for name, scheme in schemes:  # four sessions: four windows
        remember(services, f"{name}'s VAT scheme is {scheme}.", session_id=f"call-{name}")
    settle(services, clock)
    deps = services.consolidation.deps
    now = [0.0]
    monkeypatch.setattr(extract.time, "monotonic", lambda: now[0])
    calls = 0

    class Slow:
        name, generative = "slow", False

        def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
            nonlocal calls
            calls += 1
            now[0] += 60 if calls < 2 else 600  # the second window uses the task's time up
            return ExtractiveReasoner().propose(turns, known, feedback)

    deps.reasoner = Slow()
    token = stages.DEADLINE.set(300.0)
    try:
        batch = run_batch(
            deps, stages.Batch(tenant="acme", scope_id=_scope(services), run_id="r", started_at=clock.now())
        )
    finally:
        stages.DEADLINE.reset(token)
    assert batch.errors == [] and calls == 2 and batch.counters["extract"]["deferred"] == 2
    assert batch.full and len(batch.episode_ids) == 2  # cut before the first untried cluster's episode
    assert services.store.get_checkpoint("acme", _scope(services)).processed == 2
    run = services.consolidation.start(WRITER, None)  # the next batch takes the rest
    assert run.counter("extract", "deferred") == 0 and run.counter("collect", "episodes_read") == 2
    assert len([f for f in services.store.list_facts("acme") if f.tier == "raw"]) == 4


def test_an_execution_that_ended_without_finish_concludes_its_run(services: Services, clock: Any) -> None:
    import json

    run, targets = services.consolidation.open(WRITER, None)
    assert run.status == "running"
    child_input = json.dumps({"tenant": "acme", "run_id": run.run_id, "scope_id": "s"})
    child = {
        "detail-type": "Step Functions Execution Status Change",
        "detail": {"status": "FAILED", "input": child_input},
    }
    assert services.consolidation.ended(child) == {"concluded": False}  # a Map child: its parent records it
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "detail": {
            "status": "TIMED_OUT",
            "input": json.dumps({"tenant": "acme", "run_id": run.run_id, "targets": targets}),
            "error": "States.Timeout",
        },
    }
    assert services.consolidation.ended(event)["status"] == "failed"
    stored = services.consolidation.get(WRITER, run.run_id)
    assert stored.status == "failed" and stored.finished_at is not None
    assert stored.errors == [{"stage": "workflow", "message": "execution timed out: States.Timeout"}]
    assert services.consolidation.ended(event) == {"concluded": False}  # concluded once


def test_relative_places_and_times_are_no_values() -> None:
    from mneme.consolidation.claims.window import claims

    assert claims("Niamh: Aoife's wedding was last weekend, down in Kenmare.") == []
    assert claims("Kavya: Ewan's whole life is here.") == []
    assert claims("Tom: My sister's name is Anna.") == [("Tom", "sister's name", "Anna")]


def test_a_fact_takes_as_sources_the_episodes_it_cites(services: Services, clock: Any) -> None:
    ids = remember(services, "Acme's VAT scheme is flat rate.", "Acme's VAT scheme is flat rate, says Sam.")

    class Citing:
        name, generative = "citing", True
        calls = 0

        def propose(self, turns: Any, known: Any = (), feedback: Any = None) -> Reading:
            self.calls += 1
            assert (feedback is None) == (self.calls == 1)
            said = next(t.number for t in turns if "says Sam" in t.text)
            cited = [3] if self.calls == 1 else [said]  # first a third turn that is not there: refused
            return Reading(facts=[Proposal(entity="Acme", property="VAT scheme", value="flat rate",
                                           summary="Acme pays flat-rate VAT.", sources=cited)])  # fmt: skip

    services.consolidation.deps.reasoner = Citing()
    run = consolidate(services, clock)
    assert run.counter("extract", "rejected") == 1
    [fact] = [f for f in services.store.list_facts("acme") if f.tier == "raw"]
    assert fact.source_episode_ids == [ids[1]]  # the other stays an episode


def test_a_period_of_nothing_but_small_talk_gets_no_rollup(services: Services, clock: Any) -> None:
    remember(services, "Lol.", "Night!", "Haha yes.", occurred_at=clock.now())
    consolidate(services, clock)
    assert services.store.list_facts("acme") == []


def test_an_execution_failed_on_its_data_limit_concludes_its_run(services: Services, clock: Any) -> None:
    """States.DataLimitExceeded is terminal: no catcher sees it, the EventBridge rule hands the failure over."""
    import json

    run, targets = services.consolidation.open(WRITER, None)
    started = json.dumps({"tenant": "acme", "run_id": run.run_id, "targets": targets})
    why = "The state/task returned a result larger than allowed"
    detail = {"status": "FAILED", "input": started, "error": "States.DataLimitExceeded", "cause": why}
    event = {"detail-type": "Step Functions Execution Status Change", "detail": detail}
    assert services.consolidation.ended(event)["status"] == "failed"
    [error] = services.consolidation.get(WRITER, run.run_id).errors
    assert error["message"].startswith("execution failed: States.DataLimitExceeded")


def _claim(services: Services, clock: Any, fact_id: str, entity: str, prop: str, value: str, summary: str,
           source: str) -> None:  # fmt: skip
    from mneme.records import Fact

    now, embedder = clock.now(), services.consolidation.deps.embedder
    fact = Fact(tenant="acme", fact_id=fact_id, scope_id=_scope_of(services, "root.acme"), entity=entity,
                property=prop, value=value, summary=summary, confidence=0.6, source_episode_ids=[source],
                valid_from=now, created_at=now, updated_at=now, reinforced_at=now,
                vector=embedder.embed([summary])[0].tolist(), model_id=embedder.model_id)  # fmt: skip
    services.store.put_facts([fact])
    services.consolidation.deps.indexer.index_facts([fact])


def _top(services: Services, query: str) -> tuple[str, list[str]]:
    response = services.recall.recall(WRITER, RecallRequest(query=query, explain=True))
    return response.results[0].content, [o["reason"] for o in response.explain["omitted"]]


def test_a_fact_drawn_from_part_of_a_turn_does_not_take_the_place_of_the_turn_that_answers(
    services: Services, clock: Any
) -> None:
    """A turn says more than one claim drawn from it: "Ilse's brother is Jonas." does not answer where Ilse
    teaches, so it does not fold the turn that says (its cosine with the question is far below the turn's)."""
    [turn] = remember(services, "My brother Jonas cooks in Ghent, and I teach maths in Utrecht.",
                      metadata={"speaker": "Ilse"})  # fmt: skip
    _claim(services, clock, "fa_brother", "Ilse", "brother", "Jonas", "Ilse's brother is Jonas.", turn)
    content, omitted = _top(services, "Which town does Ilse teach in?")
    assert "Utrecht" in content and "source_of:fa_brother" not in omitted


def test_a_fact_that_only_says_what_the_question_says_ranks_below_the_one_that_answers(
    services: Services, clock: Any
) -> None:
    """ "What does Wen do at St Mary's?" is not answered by "Wen works at St Mary's.": that fact weighs less
    (`echo`) and does not fold the turn; the claim that answers does. A question that asks nothing of the
    kind ("Does Wen work at St Mary's?") keeps the fact at its weight."""
    [turn] = remember(services, "I'm a staff nurse on the cardiac ward at St Mary's.", metadata={"speaker": "Wen"})
    _claim(services, clock, "fa_where", "Wen", "works at", "St Mary's", "Wen works at St Mary's.", turn)
    _claim(services, clock, "fa_role", "Wen", "works as", "staff nurse", "Wen works as a staff nurse.", turn)
    content, _ = _top(services, "What does Wen do at St Mary's?")
    assert "staff nurse" in content
    response = services.recall.recall(WRITER, RecallRequest(query="Does Wen work at St Mary's?", explain=True))
    assert all("echo" not in r.scores for r in response.results)


def test_a_fact_about_another_person_does_not_fold_the_turn_about_the_one_asked_about(
    services: Services, clock: Any
) -> None:
    """ "User's nephew is Hamza." is the user's, not Hamza's: for a question about Hamza's school it keeps
    its own (lower, `other_person`) place and the turn that names the school stays in sight, first."""
    [turn] = remember(services, "My nephew Hamza is at Oakfield Academy, doing his GCSEs.",
                      metadata={"speaker": "User"})  # fmt: skip
    _claim(services, clock, "fa_nephew", "User", "nephew", "Hamza", "User's nephew is Hamza.", turn)
    content, omitted = _top(services, "Which school does Hamza go to?")
    assert "Oakfield" in content and "source_of:fa_nephew" not in omitted
