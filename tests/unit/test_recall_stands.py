"""recall's call-off rule (`services/recall/truth/stands.py`): for a question about the present, when a change only
considered is called off, the first statement of the person ranks first, not the change considered nor the call-off
that names no value."""

from __future__ import annotations

import pytest

from mneme.bootstrap import Services
from mneme.language import changes
from mneme.services.recall.truth import stands as stands_module
from tests.unit.test_changes import turn
from tests.unit.test_recall_later import JANUARY, MAY, time_trace
from tests.unit.test_recall_ranking import recall, say

QUESTION = "Which bank is Kofi's current account with?"
MARCH = JANUARY.replace(month=3)


def considered(services: Services, then: str) -> tuple[str, str]:
    """Kofi's first statement, the change he considers, and `then` in a third conversation: the first and last ids."""
    first = say(services, "Kofi", "My current account is with Nationwide. Can I set up a savings pot for a holiday?",
                occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Kofi", "Monzo is offering a switching bonus and I love the pots. I'm thinking of moving my current"
        " account to Monzo.", occurred_at=MARCH, session_id="s2")  # fmt: skip
    return first, say(services, "Kofi", then, occurred_at=MAY, session_id="s3")


@pytest.mark.parametrize(
    "then",
    [
        "Gave up on switching. The app kept failing to verify my ID, and my bank account has been fine for years.",
        "I said no to the switching bonus in the end: my current account is fine where it is, I'm not moving banks.",
    ],
)
def test_a_change_considered_and_called_off_leaves_the_first_statement_first(services: Services, then: str) -> None:
    first, off = considered(services, then)
    response = recall(services, QUESTION, explain=True)
    assert response.results[0].id == first
    stands = time_trace(services, QUESTION)["stands"]
    assert stands["id"] == first and stands["called_off_by"] == off


def test_a_change_that_happened_is_no_call_off(services: Services) -> None:
    """ "Moved my current account to Monzo last week" is the change: the rule raises nothing."""
    considered(services, "Moved my current account to Monzo last week, the app is lovely and the pots work.")
    assert time_trace(services, QUESTION)["stands"] is None


@pytest.mark.parametrize(
    ("text", "stands"),
    [
        ("I work at Harlow Robotics in Cambridge, on the warehouse picking arms.", True),
        ("A startup in Berlin, Kinetik, offered me a lead engineer role with a big salary bump.", False),  # called off
        ("I might ask Harlow Robotics for a transfer to Cambridge.", False),  # a maybe
        ("Is Harlow Robotics hiring in Cambridge?", False),  # a question
    ],
)
def test_what_stands_states_a_value_the_call_off_does_not_name(text: str, stands: bool) -> None:
    """ "I said no to Kinetik" calls off Kinetik's offer: the offer is not the value that stands; the company asked
    about may be named by both ("the Halden Foundation's date stands")."""
    off = changes.said(turn("I said no to Kinetik. My partner's job is here and I like my team.", "Ines"))
    one = changes.said(turn(text, "Ines"))
    assert stands_module._states(one, off.reading.values - {"ines", "work"}) is stands
    asked_about_kinetik = stands or text.startswith("A startup")  # asked about, the company may be named by both
    assert stands_module._states(one, off.reading.values - {"kinetik"}) is asked_about_kinetik


def test_a_call_off_that_says_little_is_read_beside_the_change_it_calls_off(services: Services) -> None:
    """ "Right, so it's a loss: staying put." shares no word with the supplier: the quote it answers, asked about in
    the same conversation, says what of, and the first statement stands."""
    first = say(services, "Kofi", "Our gas is with EDF on a fixed tariff until next spring.", occurred_at=JANUARY,
                session_id="s1")  # fmt: skip
    say(services, "Kofi", "Octopus quoted me £1,620 a year on their fixed tariff for gas and electricity, against my"
        " £1,710. Is it worth switching?", occurred_at=MARCH, session_id="s2")  # fmt: skip
    off = say(services, "Kofi", "Right, so it's a loss: staying put.", occurred_at=MARCH.replace(minute=5),
              session_id="s2")  # fmt: skip
    question = "Who supplies Kofi's gas and electricity?"
    assert recall(services, question).results[0].id == first
    stands = time_trace(services, question)["stands"]
    assert stands["id"] == first and stands["called_off_by"] == off


def test_a_call_off_that_names_what_stays_ranks_above_the_change_considered(services: Services) -> None:
    """ "Should I switch?" is no change, so nothing is undone; the call-off names the network that stays and outranks
    the quote, which shares more of the question's words."""
    say(services, "Kofi", "Kofi here, on Tidewave mobile, £12 a month SIM-only.", occurred_at=JANUARY, session_id="s1")
    quote = say(services, "Kofi", "Orbit Mobile sent me a mobile network quote: £9 a month for 100GB with 5G. Should I"
                " switch mobile network to Orbit Mobile?", occurred_at=MARCH, session_id="s2")  # fmt: skip
    off = say(services, "Kofi", "Decided to stay put. When I rang to leave, Tidewave matched it at £10 with unlimited"
              " data.", occurred_at=MAY, session_id="s3")  # fmt: skip
    question = "Which mobile network is Kofi on?"
    ids = [r.id for r in recall(services, question).results]
    assert ids.index(off) < ids.index(quote)
    stands = time_trace(services, question)["stands"]
    assert stands["id"] == off and stands["over"] == quote and stands["called_off_by"] == off


@pytest.mark.parametrize(
    "back",
    [
        "The new tool can't do time tracking, so everything moves back to the old board on Monday.",
        "Asana's gone. We're back on the old board, and honestly it's a relief.",
    ],
)
def test_a_return_to_the_value_before_a_change_ranks_that_value_first(services: Services, back: str) -> None:
    """The return names no tool, and "back" reads as a change of the first statement; the first statement holds again:
    it ranks first and is not marked as changed, the return just below it."""
    first = say(services, "Kofi", "Our team tracks every task on a Trello board, one column per client.",
                occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Kofi", "We've moved the team's task tracking to Asana, the import went fine.", occurred_at=MARCH,
        session_id="s2")  # fmt: skip
    returned = say(services, "Kofi", back, occurred_at=MAY, session_id="s3")
    question = "Which tool does Kofi's team track tasks in?"
    results = recall(services, question).results
    assert results[0].id == first and results[0].since_changed is None
    trace = time_trace(services, question)["returned"]
    assert trace["id"] == first and trace["returned_by"] == returned


def test_a_return_the_later_statement_rule_raised_still_gives_way_to_what_it_returns_to(services: Services) -> None:
    """No change is read of "happier as I was", so the later-statement rule raises it over the first statement as a
    later word of the same kind; it says no diet, and the first statement, which it returns to, ranks above it."""
    first = say(services, "user", "I've been vegetarian for eight years and I'm bored. Any high-protein lunch that"
                " isn't beans?", occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "user", "I'm thinking about trying a vegan month. What would I be missing without eggs and dairy?",
        occurred_at=MARCH, session_id="s2")  # fmt: skip
    returned = say(services, "user", "Lasted twelve days without cheese. I'm happier as I was, the eggs and cheese"
                   " are back in the fridge. Any ideas for a halloumi dinner?", occurred_at=MAY,
                   session_id="s3")  # fmt: skip
    question = "What diet does the user follow?"
    assert recall(services, question).results[0].id == first
    trace = time_trace(services, question)
    assert trace["later"]["id"] == returned and trace["returned"]["id"] == first


def test_a_return_that_names_the_value_beside_it_ranks_first(services: Services) -> None:
    """ "The Halden Lumo is back" names the e-reader it returns to, which Kofi named before: it is how things are now,
    above the change it ends, which shares as many of the question's words."""
    say(services, "Kofi", "I read all my e-books on a Halden Lumo e-reader, the battery lasts weeks.",
        occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Kofi", "I've started reading my e-books on my Pavo tablet instead. Any good apps for e-books?",
        occurred_at=MARCH, session_id="s2")  # fmt: skip
    back = say(services, "Kofi", "The tablet kept me awake at night, so the Halden Lumo is back on my bedside table.",
               occurred_at=MAY, session_id="s3")  # fmt: skip
    question = "What does Kofi read e-books on?"
    assert recall(services, question).results[0].id == back
    trace = time_trace(services, question)["returned"]
    assert trace["id"] == back and trace["returned_by"] == back


@pytest.mark.parametrize(
    "then",
    [
        "Thinking of moving my current account to Monzo, they've got a switching bonus and I love the pots.",
        "There's a rumour work will pay salaries only into a Monzo current account next year, I might have to switch.",
    ],
)
def test_a_change_only_considered_ranks_below_the_statement_it_would_change(services: Services, then: str) -> None:
    """Nothing calls the change off, and nothing changed: the plain statement of the bank ranks above the maybe or
    the rumour that names another."""
    first = say(services, "Kofi", "My current account is with Nationwide. Can I set up a savings pot for a holiday?",
                occurred_at=JANUARY, session_id="s1")  # fmt: skip
    maybe = say(services, "Kofi", then, occurred_at=MARCH, session_id="s2")
    assert recall(services, QUESTION).results[0].id == first
    trace = time_trace(services, QUESTION)["considered"]
    assert trace["id"] == first and trace["over"] == maybe


def test_a_change_said_plainly_after_the_first_statement_is_what_ranks_above_a_maybe(services: Services) -> None:
    """Nationwide, then Halvard Bank said plainly (a change), then a maybe about Monzo: the latest plain statement
    is how things are."""
    say(services, "Kofi", "My current account is with Nationwide. Can I set up a savings pot for a holiday?",
        occurred_at=JANUARY, session_id="s1")  # fmt: skip
    plain = say(services, "Kofi", "Switched my current account to Halvard Bank last month, the app is great.",
                occurred_at=MARCH, session_id="s2")  # fmt: skip
    say(services, "Kofi", "Thinking of moving my current account to Monzo, they've got a switching bonus.",
        occurred_at=MAY, session_id="s3")  # fmt: skip
    assert recall(services, QUESTION).results[0].id == plain
