"""Ranking rules a user of recall notices on conversations: the speaker, time, updates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.language import changes, text
from mneme.models import Principal, Role
from mneme.services.recall import RecallRequest, RecallResponse, prior
from mneme.services.recall.prior import ANSWERLESS_FACTOR, ASSISTANT_FACTOR
from mneme.services.recall.profile import PROFILE_BOOST
from mneme.services.recall.time import query_time
from mneme.services.remember import RememberItem
from tests.conftest import principal

ALICE = principal("acme", "alice", Role.admin)
DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def say(services: Services, speaker: str, content: str, **fields: Any) -> str:
    item = RememberItem.model_validate(
        {"scope": "root.chat", "content": content, "create_scope": True, "metadata": {"speaker": speaker}, **fields}
    )
    return services.remember.remember(ALICE, [item])[0].episode_id


def recall(services: Services, query: str, **fields: Any) -> RecallResponse:
    return services.recall.recall(ALICE, RecallRequest.model_validate({"query": query, "scope": "root.chat", **fields}))


def consolidate(services: Services, clock: Any, caller: Principal = ALICE) -> None:
    """One consolidation run once the turns have settled."""
    clock.advance(seconds=services.consolidation.deps.settings.settle_seconds + 1)
    services.consolidation.start(caller, None)


def test_a_query_naming_a_person_favours_that_persons_own_turns(services: Services) -> None:
    maya = say(services, "Maya", "I moved to Lisbon last spring.", occurred_at=DAY)
    tom = say(services, "Tom", "I moved to Lisbon last spring.", occurred_at=DAY.replace(hour=10))
    assert [r.id for r in recall(services, "Where did Maya move?").results] == [maya, tom]
    response = recall(services, "Where did Tom move?")
    assert [r.id for r in response.results] == [tom, maya]
    assert response.results[0].scores["speaker"] > 1 and "speaker" not in response.results[1].scores
    assert response.results[0].metadata == {"speaker": "Tom"}  # unchanged, as given


def test_the_speaker_is_searched_with_the_words_of_the_turn(services: Services) -> None:
    ravi = say(services, "Ravi", "I start at the bakery on Monday.", occurred_at=DAY)
    say(services, "Ana", "Good luck with it!", occurred_at=DAY)
    response = recall(services, "Ravi", scoring={"strictness": "precision"})
    assert [r.id for r in response.results] == [ravi]


def test_a_question_about_now_favours_the_latest_value(services: Services) -> None:
    say(services, "Ines", "I live in Lyon, in a small flat near the river.", occurred_at=DAY.replace(year=2024))
    latest = say(services, "Ines", "I live in Utrecht now, in a small flat near the canal.", occurred_at=DAY)
    response = recall(services, "Which city does Ines live in now?", explain=True)
    assert response.results[0].id == latest
    assert response.results[0].scores["recency"] > 1
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["prefer"] == "latest" and time["window"] is None


def test_turns_given_one_time_are_later_in_the_order_they_were_said(services: Services) -> None:
    """An exported log gives every turn of a session the session's one time: asked about now, its later turn is the
    later word (by the order the call gave them), not whichever id sorts last."""
    texts = ["Lyon for now.", "Maybe Lyon, maybe Utrecht.", "Utrecht, by the canal.", "Utrecht it is."]
    turn = {"scope": "root.chat", "create_scope": True, "occurred_at": DAY, "metadata": {"speaker": "Ines"}}
    items = [RememberItem.model_validate({**turn, "content": f"We live in {text}"}) for text in texts]
    said = [one.episode_id for one in services.remember.remember(ALICE, items)]
    recency = {r.id: r.scores["recency"] for r in recall(services, "Where do we live now?", limit=10).results}
    assert [recency[one] for one in said] == sorted(recency[one] for one in said) and len(set(recency.values())) == 4


def test_a_question_about_a_first_time_favours_the_earliest(services: Services) -> None:
    first = say(services, "Ana", "We went to the cinema together, our date.", occurred_at=DAY.replace(year=2024))
    say(services, "Ana", "We went to the cinema again, another date.", occurred_at=DAY)
    assert recall(services, "When did Ana first go on a date?").results[0].id == first


def test_a_period_in_the_query_is_read_against_occurred_at(services: Services) -> None:
    may = say(
        services, "Kavya", "Busy with fieldwork, sampling the glacier.", occurred_at=datetime(2024, 5, 20, tzinfo=UTC)
    )
    say(services, "Kavya", "Busy with fieldwork, sampling the lake.", occurred_at=datetime(2024, 8, 20, tzinfo=UTC))
    response = recall(services, "What fieldwork was Kavya busy with in May 2024?", explain=True)
    assert response.results[0].id == may and response.results[0].scores["window"] > 1
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["window"] == ["2024-05-01T00:00:00+00:00", "2024-06-01T00:00:00+00:00"] and time["inside"] == 1


def test_query_time_reads_windows_and_order_words() -> None:

    half = query_time("What was Tobias doing in the first half of September 2024?")
    assert (half.since, half.until, half.prefer) == (
        datetime(2024, 9, 1, tzinfo=UTC),
        datetime(2024, 9, 16, tzinfo=UTC),
        None,  # 'first' belongs to the window here
    )
    assert query_time("in 2023").until == datetime(2024, 1, 1, tzinfo=UTC)
    assert query_time("the autumn of 2024").since == datetime(2024, 9, 1, tzinfo=UTC)
    assert query_time("over Christmas 2022").until == datetime(2023, 1, 3, tzinfo=UTC)
    assert query_time("Who is her current employer?").prefer == "latest"
    assert not query_time("Where does Maya work?")
    assert query_time("What was her first job?").prefer == "earliest"
    assert not query_time("Who captains the Ladies' First XI?")  # an order word inside a name asks for no order
    assert not query_time("Which floor is the Second Avenue office on?")
    assert not query_time("Which van did Ines drive before her current one?")  # what held before it: no order


def test_a_relative_period_is_read_from_the_request_time_or_its_as_of(services: Services) -> None:
    earlier = say(
        services, "Kavya", "Busy with fieldwork, sampling the glacier.", occurred_at=datetime(2025, 5, 20, tzinfo=UTC)
    )
    later = say(
        services, "Kavya", "Busy with fieldwork, sampling the lake.", occurred_at=datetime(2026, 5, 20, tzinfo=UTC)
    )
    query = "What fieldwork was Kavya busy with last May?"
    response = recall(services, query, explain=True)  # the clock says November 2026
    assert response.results[0].id == later and response.results[0].scores["window"] > 1
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["said"] == "last may" and time["window"][0] == "2026-05-01T00:00:00+00:00"
    as_of = recall(services, query, as_of="2026-03-01T00:00:00Z")  # asked as of March 2026: May 2025
    assert as_of.results[0].id == earlier and "window" not in as_of.results[1].scores


def test_query_time_reads_relative_periods_only_against_a_reference() -> None:

    ref = datetime(2025, 6, 18, 15, 0, tzinfo=UTC)
    assert not query_time("What did Ines do last May?")  # no reference, no window
    window = {
        q: (w.since, w.until)
        for q in ("last May", "last summer", "last year", "last week", "two years ago", "3 days ago", "yesterday")
        for w in [query_time(f"What happened {q}?", ref)]
    }
    assert window["last May"] == (datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 6, 1, tzinfo=UTC))
    assert window["last summer"][0] == datetime(2024, 6, 1, tzinfo=UTC)  # this one has only begun
    assert window["last year"] == (datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC))
    assert window["last week"] == (datetime(2025, 6, 9, tzinfo=UTC), datetime(2025, 6, 16, tzinfo=UTC))
    assert window["two years ago"][0] == datetime(2023, 1, 1, tzinfo=UTC)
    assert window["3 days ago"] == (datetime(2025, 6, 15, tzinfo=UTC), datetime(2025, 6, 16, tzinfo=UTC))
    assert window["yesterday"][0] == datetime(2025, 6, 17, tzinfo=UTC)
    assert query_time("What was his last working day?", ref).since is None
    assert query_time("Where did she work in May 2024?", ref).since == datetime(2024, 5, 1, tzinfo=UTC)


def test_a_question_asking_when_favours_the_turn_that_says_when(services: Services) -> None:
    news = "The studio's takeover was the big news, everyone talks about the takeover."
    say(services, "Lucas", news, occurred_at=DAY)
    announced = "They announced the takeover on Tuesday, at the all-hands meeting in the Leeds office, to a full room."
    said = say(services, "Amara", announced, occurred_at=DAY.replace(hour=10))
    response = recall(services, "When was the studio's takeover announced?", explain=True)
    assert response.results[0].id == said and response.results[0].scores["says_when"] > 1
    assert "says_when" not in response.results[1].scores
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["says_when"] == 1
    other = recall(services, "Who talks about the takeover when asked about the studio?")  # 'when' as a conjunction
    assert all("says_when" not in r.scores for r in other.results)


def test_a_turn_that_only_addresses_the_named_person_does_not_outrank_their_answer(services: Services) -> None:
    say(services, "Maya", "Tom! Tom, hello Tom!", occurred_at=DAY)
    answer = say(services, "Tom", "We moved to Porto in the spring.", occurred_at=DAY.replace(hour=10))
    response = recall(services, "Where did Tom move?", explain=True)
    assert response.results[0].id == answer
    assert all(r.scores["bm25"] == 0 for r in response.results[1:])  # the name alone no longer scores
    assert response.explain is not None
    fuse = next(s for s in response.explain["stages"] if s["stage"] == "fuse")
    assert fuse["speakers_named"] == ["tom"]


def test_a_question_about_the_present_lets_the_newer_statement_supersede_the_older(services: Services) -> None:
    old = say(
        services,
        "Ines",
        "My sport these days is climbing: I climb at the climbing gym with my climbing club every week.",
        occurred_at=DAY.replace(year=2024),
    )
    new = say(services, "Ines", "I stopped climbing, my sport is rowing with my club.", occurred_at=DAY)
    other = say(services, "Tobias", "My sport these days is climbing with my club.", occurred_at=DAY.replace(month=5))
    response = recall(services, "What sport does Ines do these days?", explain=True)
    ranked = [r.id for r in response.results]
    assert ranked.index(new) < ranked.index(old)
    scores = {r.id: r.scores for r in response.results}
    assert scores[old]["superseded"] < 1 and scores[new]["newer"] > 1
    assert "superseded" not in scores[other]  # a later turn by someone else supersedes nothing of Ines's
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert [(s["id"], s["by"]) for s in time["superseded"]] == [(old, new)]


def test_a_question_about_a_past_period_keeps_the_older_statement(services: Services) -> None:
    old = say(
        services,
        "Ines",
        "My sport these days is climbing: I climb at the climbing gym with my climbing club every week.",
        occurred_at=DAY.replace(year=2024),
    )
    say(services, "Ines", "I stopped climbing, my sport is rowing with my club.", occurred_at=DAY)
    response = recall(services, "What sport did Ines do in 2024?", explain=True)
    assert response.results[0].id == old and "superseded" not in response.results[0].scores
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["superseded"] == [] and time["inside"] == 1


def test_a_fact_is_placed_in_time_by_its_valid_from(services: Services, clock: Any) -> None:
    """Consolidated facts have no occurred_at: a period in the query is read against the time their
    value holds from (valid_from, its source's occurred_at)."""
    writer = principal("acme", "wendy", Role.writer)
    for content, at in (
        ("Acme's VAT scheme is flat rate.", datetime(2025, 1, 10, tzinfo=UTC)),
        ("Pennine's VAT scheme is standard rate.", datetime(2026, 6, 10, tzinfo=UTC)),
    ):
        item = RememberItem.model_validate({"scope": "root.acme", "content": content, "create_scope": True,
                                            "occurred_at": at})  # fmt: skip
        services.remember.remember(writer, [item])
    consolidate(services, clock, writer)
    request = {"query": "Which VAT scheme held in January 2025?", "kinds": ["fact"], "tiers": ["raw"]}
    response = services.recall.recall(writer, RecallRequest.model_validate(request))
    top = response.results[0]
    assert top.fact is not None and top.fact["value"] == "flat rate" and top.scores["window"] > 1
    assert all("window" not in r.scores for r in response.results[1:])


def test_a_turn_that_says_something_outranks_filler_and_questions_about_it(services: Services) -> None:
    asked = say(services, "Hilde", "How are the kids?", session_id="s1", occurred_at=DAY)
    said = say(
        services,
        "Dario",
        "Leo joined the chess club at school and Isla crawls everywhere, she climbed the stairs twice.",
        session_id="s1",
        occurred_at=DAY.replace(minute=1),
    )
    filler = say(services, "Hilde", "Ha! The kids!", session_id="s1", occurred_at=DAY.replace(minute=2))
    response = recall(services, "What have the kids been up to?", explain=True)
    ranked = [result.id for result in response.results]
    assert ranked[0] == said and {asked, filler} <= set(ranked)
    scores = {result.id: result.scores for result in response.results}
    assert "substance" not in scores[said]
    assert scores[asked]["substance"] < scores[filler]["substance"] < 1  # a question says least


def test_a_question_about_what_a_person_is_like_favours_where_they_say_it(services: Services) -> None:
    likes = say(services, "Ines", "I don't miss meat at all, the vegetarian canteen dinner is better.", occurred_at=DAY)
    other = say(
        services, "Ines", "The steakhouse dinner place on the corner closed after a kitchen fire.", occurred_at=DAY
    )
    response = recall(services, "Would Ines enjoy a steakhouse dinner?", explain=True)
    ranked = {result.id: result for result in response.results}
    assert ranked[likes].scores["profile"] == PROFILE_BOOST and "profile" not in ranked[other].scores
    assert response.explain is not None
    fuse = next(s for s in response.explain["stages"] if s["stage"] == "fuse")
    assert fuse["speakers_named"] == ["ine"]
    plain = recall(services, "Where did Ines have dinner?")  # where, not what she is like
    assert all("profile" not in result.scores for result in plain.results)


def test_what_the_user_said_outranks_the_assistants_advice_unless_the_advice_is_asked_for(services: Services) -> None:
    told = say(services, "user", "I switched my phone contract to Giffgaff, twelve pounds a month.", occurred_at=DAY)
    advice = "Many phone contract deals cost twelve pounds a month; Giffgaff is one, and the phone contract is monthly."
    advised = say(services, "assistant", advice, occurred_at=DAY.replace(minute=1))
    about_user = recall(services, "Which phone contract does the user have?")
    assert [r.id for r in about_user.results] == [told, advised]
    assert about_user.results[1].scores["assistant"] == ASSISTANT_FACTOR
    about_advice = recall(services, "Which phone contract did you recommend?")
    assert all("assistant" not in r.scores for r in about_advice.results)


def test_a_question_about_the_present_asking_for_a_value_favours_a_turn_that_names_one(services: Services) -> None:
    """ "Where does the team file its bugs?" is answered by a turn naming a place; one naming none ranks lower,
    however many of the question's words it shares. A question about the past, or asking when, is left alone."""
    names = say(services, "Odile", "The team files every new bug in Burrow, since the import.", occurred_at=DAY)
    none = say(services, "Odile", "The team files its bugs in a hurry, and the team files them with no steps at all.",
               occurred_at=DAY.replace(minute=1))  # fmt: skip
    present = recall(services, "Where does the team file its bugs?")
    assert [r.id for r in present.results][:2] == [names, none]
    assert present.results[1].scores["answerless"] == ANSWERLESS_FACTOR
    assert "answerless" not in present.results[0].scores
    past = recall(services, "Where did the team file its bugs?")
    assert all("answerless" not in r.scores for r in past.results)
    assert not prior.asks_value("Which marathon did he sign up for, and why did he not run it?", "present")
    assert not prior.asks_value("When is the review?", "present")


def test_a_question_asking_for_an_amount_favours_a_turn_that_tells_a_number(services: Services) -> None:
    """ "How much rent does the user pay?" is answered by a turn with a number in what it tells; a request about the
    rent that tells none ranks lower, however many of the question's words it shares, in any tense. A question about
    how much someone cares is not about an amount."""
    amount = say(services, "user", "My rent is £875 a month, by standing order.", occurred_at=DAY)
    request = say(services, "user", "Draft a letter about the rent the user pays each month, please, a firm one.",
                  occurred_at=DAY.replace(minute=1))  # fmt: skip
    for query in ("How much rent does the user pay each month?", "How much rent did the user pay each month?"):
        response = recall(services, query)
        assert [r.id for r in response.results][:2] == [amount, request], query
        assert response.results[1].scores["quantityless"] == ANSWERLESS_FACTOR
        assert "quantityless" not in response.results[0].scores
    counted = say(services, "user", "Down to just one since Biscuit went to my sister's.", occurred_at=DAY)
    response = recall(services, "How many cats does the user have?")
    assert "quantityless" not in next(r for r in response.results if r.id == counted).scores  # "just one" counts
    assert prior.asks_quantity("How many beehives does the father keep?")
    assert prior.asks_quantity("What time is the team's daily standup?")
    assert not prior.asks_quantity("How much does Marisol look after her mother?")
    assert not prior.asks_quantity("Which bank does the user use?")


def test_a_question_asking_who_favours_a_turn_that_names_someone_over_one_with_only_numbers(services: Services) -> None:
    """ "Who is Tess's physio?": a turn of Tess's about her physio that tells only numbers ("at about 90%") names
    nobody; the one naming the physio ranks first. Asked who did something, the turns that answer may say "she"."""
    numbers = say(services, "Tess", "Knee's at about 90%. My physio reckons I can run the 10k in 2 weeks.",
                  occurred_at=DAY)  # fmt: skip
    named = say(services, "Tess", "My new physio is Ingrid Vos.", occurred_at=DAY.replace(minute=1))
    response = recall(services, "Who is Tess's physio?")
    assert [r.id for r in response.results][:2] == [named, numbers]
    assert response.results[1].scores["answerless"] == ANSWERLESS_FACTOR
    assert prior.asks_person("Who walks the dog?") and not prior.asks_person("Who moved in with them in August?")


def test_a_question_about_before_a_named_change_favours_what_was_said_before_it(services: Services) -> None:
    old = say(services, "Tomasz", "Twelve winters in a flat in Poznan, right by the old market square.",
              occurred_at=DAY.replace(year=2024))  # fmt: skip
    told = say(services, "Tomasz", "My first month in Gdansk is done, and the sea air is a shock.", occurred_at=DAY)
    after = say(services, "Tomasz", "Gdansk has better bakeries than I expected.", occurred_at=DAY.replace(day=9))
    response = recall(services, "Where did Tomasz live before Gdansk?", explain=True)
    ranked = [r.id for r in response.results]
    assert ranked[0] == old
    scores = {r.id: r.scores for r in response.results}
    assert scores[old]["before_change"] > 1 and scores[told]["after_change"] < 1 and scores[after]["after_change"] < 1
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert time["truth"] == "past" and time["named_change"] == 2
    in_2025 = recall(services, "Where did Tomasz live before 2025?")  # a time after "before" is no change named
    assert all("after_change" not in r.scores for r in in_2025.results)


def test_a_fact_about_another_participant_weighs_less_for_a_question_about_someone(
    services: Services, clock: Any
) -> None:
    say(services, "Bruno", "I use Helix for everything. Ottilie swears by Sublime Text.", occurred_at=DAY)
    say(services, "Ottilie", "Because I like my plugins, Bruno.", occurred_at=DAY.replace(minute=1))
    consolidate(services, clock)
    asked_of_ottilie = recall(services, "Which editor does Ottilie use?", explain=True)
    facts = [r for r in asked_of_ottilie.results if r.fact is not None and r.fact["entity"] == "Bruno"]
    assert facts and all(r.scores["other_person"] < 1 for r in facts)
    assert asked_of_ottilie.explain is not None
    fuse = next(s for s in asked_of_ottilie.explain["stages"] if s["stage"] == "fuse")
    assert fuse["other_persons_facts"] == len(facts)
    asked_of_bruno = recall(services, "Which editor does Bruno use?")
    assert all("other_person" not in r.scores for r in asked_of_bruno.results)


def test_another_speakers_turn_about_their_own_things_weighs_less_for_a_question_about_someone(
    services: Services,
) -> None:
    """Asked who Elif's physio is, Bram's "My new physio's called Sunita Rao" is about Bram's: it weighs less than
    Elif's own word, and a turn of Bram's that names Elif, or any turn asked about by relation, keeps its score."""
    elif_ = say(services, "Elif", "My knee's finally improving. Gwen Probert is a miracle worker.", occurred_at=DAY)
    bram = say(services, "Bram", "I've moved to the sports clinic on the new health plan. My new physio's called"
               " Sunita Rao.", occurred_at=DAY.replace(month=5))  # fmt: skip
    about_her = say(services, "Bram", "Elif says her physio does the awful single-leg squats with her.",
                    occurred_at=DAY.replace(month=5, minute=1))  # fmt: skip
    asked = {r.id: r for r in recall(services, "Who is Elif's physiotherapist?").results}
    assert asked[bram].scores["other_own"] < 1
    assert "other_own" not in asked[elif_].scores and "other_own" not in asked[about_her].scores
    assert list(asked).index(elif_) < list(asked).index(bram)
    by_relation = recall(services, "Who is Elif's sister's physiotherapist?").results
    assert all("other_own" not in r.scores for r in by_relation)


def test_mine_is_the_speakers_own(services: Services) -> None:
    """Felix's "Mine's been rock solid on Kestrel Broadband" is Felix's broadband, not someone called "Mine": asked
    who provides Hana's, it weighs less than Hana's own word."""
    hana = say(services, "Hana", "My internet dropped out in a client call again. Stellar Fibre say it's works.",
               occurred_at=DAY)  # fmt: skip
    felix = say(services, "Felix", "Mine's been rock solid on Kestrel Broadband. 70 meg, never drops.",
                occurred_at=DAY.replace(minute=1))  # fmt: skip
    asked = {r.id: r for r in recall(services, "Who provides Hana's broadband?").results}
    assert asked[felix].scores["other_own"] < 1 and "other_own" not in asked[hana].scores


@pytest.mark.parametrize(
    ("text", "own"),
    [
        ("My physio at the sports clinic is Ravi Menon, he's thorough.", True),  # he: Ravi
        ("My physio at the sports clinic sorted me out, he's thorough.", False),  # he: anyone, Hana perhaps
        ("My physio session was up Calton Hill. He says the steps count as rehab.", False),  # named before, apart
    ],
)
def test_a_he_of_someone_a_turn_names_keeps_it_the_speakers_own(services: Services, text: str, own: bool) -> None:
    """Felix's "My physio at the sports clinic is Ravi Menon, he's thorough" is about Felix's physio: the "he" is
    the one it names. Naming no one before it in its sentence, "he" may be the person asked about, and the turn keeps
    its score."""
    say(services, "Hana", "My physio Oona Byrne has me doing step-downs twice a day.", occurred_at=DAY)
    felix = say(services, "Felix", text, occurred_at=DAY.replace(minute=1))
    asked = {r.id: r for r in recall(services, "Who is Hana's physio?").results}
    assert ("other_own" in asked[felix].scores) is own


def test_a_fact_about_someone_named_in_the_turns_does_not_answer_a_question_about_a_speaker_by_name(
    services: Services, clock: Any
) -> None:
    say(services, "Wilf", "I'm in Dundee these days, near the V&A.", occurred_at=DAY)
    say(services, "Wilf", "My brother Cormac lives in Aberdeen, he works offshore.", occurred_at=DAY.replace(minute=1))
    say(services, "Ada", "Aberdeen in February, brave man.", occurred_at=DAY.replace(minute=2))
    consolidate(services, clock)
    asked = recall(services, "Where does Wilf live?")
    cormacs = [r for r in asked.results if r.fact is not None and r.fact["entity"] == "Cormac"]
    assert cormacs and all(r.scores["other_person"] < 1 for r in cormacs)
    by_relation = recall(services, "Where does Wilf's brother live?")  # he may be asked about by relation
    assert any(r.fact and r.fact["entity"] == "Cormac" for r in by_relation.results)
    assert all("other_person" not in r.scores for r in by_relation.results if r.fact and r.fact["entity"] == "Cormac")


def test_a_change_undone_puts_the_return_first(services: Services) -> None:
    own = say(services, "Nkechi", "Please sign my emails as Nkechi Obi-Watson, my own surname.",
              occurred_at=DAY.replace(year=2024, month=1))  # fmt: skip
    changed = say(services, "Nkechi", "I changed my surname on my emails to Marlowe, my husband's, from now on.",
                  occurred_at=DAY.replace(year=2024, month=5))  # fmt: skip
    back = say(services, "Nkechi", "Long story, but I've gone back to Obi-Watson everywhere.",
               occurred_at=DAY.replace(year=2024, month=10))  # fmt: skip
    response = recall(services, "Which surname does Nkechi sign her emails with?", explain=True)
    ranked = [r.id for r in response.results]
    assert ranked.index(back) < ranked.index(changed) and ranked.index(back) < ranked.index(own)
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    assert {(s["id"], s["by"]) for s in time["superseded"]} >= {(changed, back)}


def test_a_change_called_off_leaves_the_earlier_statement_first(services: Services) -> None:
    own = say(services, "user", "Our energy supplier is Bulb, on a fixed deal until June.",
              occurred_at=DAY.replace(year=2024, month=1), session_id="s1")  # fmt: skip
    change = say(services, "user", "Switched our energy supplier to Ecotricity today, the green tracker deal.",
                 occurred_at=DAY.replace(year=2024, month=3), session_id="s2")  # fmt: skip
    off = say(services, "user", "Read the Ecotricity small print and changed my mind, so we're staying put.",
              occurred_at=DAY.replace(year=2024, month=3, day=9), session_id="s3")  # fmt: skip
    response = recall(services, "Who supplies the user's energy?", explain=True)
    ranked = [r.id for r in response.results]
    assert ranked.index(own) < ranked.index(change)
    assert response.explain is not None
    time = next(s for s in response.explain["stages"] if s["stage"] == "time")
    pairs = {(s["id"], s["by"]): s["why"] for s in time["superseded"]}
    assert pairs[(change, off)].startswith("undone") and (own, change) not in pairs


def test_asked_about_before_a_change_the_turn_of_that_conversation_that_answers_ranks_first(
    services: Services,
) -> None:
    phone = say(services, "Dara", "My Moto G7's battery is dead by lunchtime every single day.",
                occurred_at=DAY.replace(year=2024, month=2), session_id="s1")  # fmt: skip
    say(services, "Dara", "It's four years old, to be fair.",
        occurred_at=DAY.replace(year=2024, month=2, minute=1), session_id="s1")  # fmt: skip
    say(services, "Dara", "Traded the old phone in and got a Pixel 8, the battery lasts two days.",
        occurred_at=DAY.replace(year=2024, month=6), session_id="s2")  # fmt: skip
    response = recall(services, "Which phone did Dara have before the Pixel?")
    assert response.results[0].id == phone


def test_asked_about_the_first_the_turn_of_that_conversation_that_names_a_value_ranks_first(
    services: Services,
) -> None:
    """Of the first conversation, the turn that names the inhaler, not the one after it that the question's words
    find best ("First proper preventer I've had.")."""
    clenil = say(services, "Dara", "Asthma review done. The nurse has me on Clenil, two puffs twice a day.",
                 occurred_at=DAY.replace(year=2024, month=2), session_id="s1")  # fmt: skip
    vague = say(services, "Dara", "First proper preventer inhaler I've had.",
                occurred_at=DAY.replace(year=2024, month=2, minute=1), session_id="s1")  # fmt: skip
    say(services, "Dara", "The GP swapped my preventer inhaler to Fostair, so much better.",
        occurred_at=DAY.replace(year=2024, month=6), session_id="s2")  # fmt: skip
    ranked = [r.id for r in recall(services, "Which preventer inhaler was Dara prescribed originally?").results]
    assert ranked.index(clenil) < ranked.index(vague) and ranked[0] == clenil


def test_a_question_about_what_someone_has_talked_about_asks_what_was_said_not_how_things_are(
    services: Services,
) -> None:
    say(services, "Pia", "The operation on my shoulder is booked for March.", occurred_at=DAY.replace(month=1))
    say(services, "Pia", "I had the operation on Tuesday, the new joint is titanium.", occurred_at=DAY.replace(month=4))
    for question, truth in [
        ("What health problems has Pia talked about?", None),
        ("How is Pia's shoulder?", "present"),
        ("What broke on Pia's old shoulder?", None),  # a verb in the past beside "old": an event
    ]:
        response = recall(services, question, explain=True)
        assert response.explain is not None
        assert next(s for s in response.explain["stages"] if s["stage"] == "time")["truth"] == truth


def test_a_question_about_what_someone_started_on_asks_for_the_earliest() -> None:
    assert query_time("What salary did Leon start on?").prefer == "earliest"
    assert query_time("What salary is Leon on?").prefer is None


def test_a_light_verb_before_to_is_not_searched_for(services: Services) -> None:
    """ "How does Leena get to work?" asks about work, not "get": Marcus's "What do I get Priya?" shares only the verb
    and no longer outranks Leena's own turn. "Get married" is the event asked about, and keeps its verb."""
    ferry = say(services, "Leena", "On the 07:40 ferry again, the river is like glass this morning on my way to work.",
                occurred_at=DAY)  # fmt: skip
    say(services, "Marcus", "Okay, secret santa. Limit's fifteen pounds, I've got Priya. What do I get Priya?",
        occurred_at=DAY.replace(minute=1))  # fmt: skip
    assert recall(services, "How does Leena get to work?").results[0].id == ferry
    assert text.query_words("How does Leena get to work?") == ["leena", "work"]
    assert text.query_words("When did Amara and Nnamdi get married?") == ["amara", "nnamdi", "get", "married"]
    assert text.query_words("Where do I go to?") == ["go"]  # nothing else left: all of them


def test_a_turn_naming_values_only_in_its_questions_names_none(services: Services) -> None:
    """ "Where does the user live?": a request naming places ("what's the fastest way from Amersfoort Centraal to
    Papendorp?") answers it no better than a turn naming none."""
    asks = say(services, "user", "Quick one: what's the fastest way from Amersfoort Centraal to Papendorp?",
               occurred_at=DAY)  # fmt: skip
    response = recall(services, "Where does the user live?", scoring={"strictness": "recall"})
    scores = {r.id: r.scores for r in response.results}
    assert scores[asks]["answerless"] == ANSWERLESS_FACTOR


def test_asked_about_before_a_named_change_the_turn_naming_it_ranks_below_what_came_before(
    services: Services,
) -> None:
    """The turn that names the change the question asks before shares the question's words ("Linear"), and says
    what held after it, not before."""
    jira = say(services, "Dara", "We track it all in Jira, please. If it's not on the board, it doesn't exist.",
               occurred_at=DAY.replace(year=2024))  # fmt: skip
    say(services, "Dara", "Migration's done: all 412 tickets are in Linear, cycles start Monday.", occurred_at=DAY)
    assert recall(services, "Which tracker did Dara's team use before Linear?").results[0].id == jira


def test_asked_about_before_a_change_a_restatement_after_it_is_not_the_change(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ghent, then the move to Utrecht, then a turn read only as another answer after it ("same answer"): what held
    before the move is Ghent, not the move itself, which the restatement superseded."""
    ghent = say(services, "Odile", "Always. My flat in Ghent is right by the Korenmarkt, ten minutes from everything.",
                occurred_at=DAY.replace(year=2024, month=2), session_id="s1")  # fmt: skip
    move = say(services, "Odile", "Last box packed. The van leaves for Utrecht at 7 and the landlady wants the keys.",
               occurred_at=DAY.replace(year=2024, month=7), session_id="s2")  # fmt: skip
    walk = say(services, "Odile", "And a short walk from the new office. No more forty minutes on the train.",
               occurred_at=DAY.replace(year=2024, month=9), session_id="s3")  # fmt: skip
    reasons = {(ghent, move): "home: utrecht instead of ghent", (move, walk): "same answer: new"}

    def reason(one: Any, then: Any, *args: Any, **kwargs: Any) -> str | None:
        return reasons.get((one.record.episode_id, then.record.episode_id))

    monkeypatch.setattr(changes, "update_reason", reason)
    response = recall(services, "Where did Odile live before she moved?", scoring={"strictness": "recall"})
    assert response.results[0].id == ghent
