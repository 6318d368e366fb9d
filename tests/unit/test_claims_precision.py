"""Claims from real chat that nobody tuned on: the general safeguards that keep a wrong fact out. Words
someone else said, jokes, passing states, judgements dressed as values, corrections and retractions, what
an assistant says; and next to them the plain statements the safeguards must keep."""

from __future__ import annotations

import pytest

from mneme.consolidation.claims.window import Claim, claims, window_claims


@pytest.mark.parametrize(
    "text",
    [
        # someone else's words: quoted, retold, "goes", "was like", a quoted message
        'Sam: so Jonah goes "I\'m moving to Oslo, I got a job at Equinor"',
        'Sam: she messaged "I moved to Leeds, my rent is £900"',
        "Sam: > I live in Leeds now and I work at Asda",
        "Sam: then he's like, I'm a pilot now",
        "Sam: and she goes, my husband is a surgeon",
        "Sam: Tom swears, my sister lives in Paris",
        "Sam: Jo texted me, she's vegan now",
        "Sam: Sian works at Monzo, I believe",
        "Sam: my brother lives in Cardiff, iirc",
        # a passing state, a wish, an exception
        "Sam: I'm living in Leeds for the summer",
        "Sam: I work at Acme, for now",
        "Sam: I moved to Leeds for six months",
        "Sam: my manager is Sam until June",
        "Sam: my dream job is zookeeper",
        "Sam: I'm vegan except for cheese",
        # jokes and retractions
        "Sam: I'm allergic to cats, jk I just hate them",
        "Sam: I live in Leeds, said no one ever",
        "Sam: I'm a pilot now 😂",
        "Sam: I'm allergic to Mondays",
        "Sam: I live in Crocs",
        "Sam: I work at Tesco. well, worked",
        "Sam: my partner is a chef, or was, he's retraining",
        # judgements, stand-ins and times dressed as values
        "Sam: my car is a wreck",
        "Sam: my spirit animal is a sloth",
        "Sam: our team is the best",
        "Sam: I prefer the old one",
        "Sam: my favourite bit is the ending",
        "Sam: I switched to the morning shift",
        "Sam: we switched to Tuesdays for deploys",
        "Sam: I switched to working from home",
        "Sam: my flight home is BA2490",
        "Sam: my password is hunter2",
        # a hobby or a favour is no job; someone met is no one's
        "Sam: I'm a keen gardener",
        "Sam: I'm a hard worker",
        "Sam: I'm a taxi driver for my kids at weekends",
        "Sam: I've got a guy called Dave coming to fix the boiler",
        "Sam: we got a new sofa, a guy called Marco fitted it",
        # a company is no place, a kin word no name
        "Sam: hi, I'm from British Gas, calling about your meter",
        "Sam: Nan lives in Hull",
    ],
)
def test_nothing_from_other_peoples_words_jokes_passing_states_or_judgements(text: str) -> None:
    assert claims(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Sam: my favourite film is "Alien"', [Claim("Sam", "favourite film", "Alien")]),  # a quoted title
        ("Sam: I moved to Leeds this week", [Claim("Sam", "lives in", "Leeds")]),  # a change lasts
        ("Sam: I've lived in Leeds for six years", [Claim("Sam", "lives in", "Leeds")]),
        ("Sam: I've worked at Acme for two years", [Claim("Sam", "works at", "Acme")]),
        ("Sam: my car is a blue Polo", [Claim("Sam", "car", "a blue Polo")]),
        ("Sam: we switched to the annual plan", [Claim("Sam", "uses", "the annual plan")]),
        ("Sam: I switched to oat milk", [Claim("Sam", "uses", "oat milk")]),
        ("Sam: I'm allergic to penicillin", [Claim("Sam", "allergic to", "penicillin")]),
        ("Sam: my son's called Max", [Claim("Sam", "son's name", "Max")]),
        ("Sam: Uncle Emeka works at Shell", [Claim("Emeka", "works at", "Shell")]),
        ("Sam: I'm a gardener at Kew", [Claim("Sam", "works as", "gardener"), Claim("Sam", "works at", "Kew")]),
        # a value is what it names: a person's name, a date, a tool; a period of time owns nothing
        ("Elif: my new manager is a guy called Tomasz", [Claim("Elif", "manager", "Tomasz")]),
        ("Dario: Our daughter Isla was born on Saturday!", [Claim("Dario", "daughter", "Isla")]),
        ("Magnus: The events budget for the year is €120,000, so two conferences", []),
        ("User: Good, we use one board already.", []),
    ],
)
def test_the_plain_statement_next_to_each_trap_still_holds(text: str, expected: list[Claim]) -> None:
    assert claims(text) == expected


def test_an_assistant_states_nothing_not_even_of_others() -> None:
    window = [("User", "can you update my details?"), ("Assistant", "Noted: Dave lives in Ripon and works at Boots.")]
    assert window_claims(window) == []


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ([("Ola", "I live in Bath"), ("Ola", "sorry, I meant Bristol")], [(1, Claim("Ola", "lives in", "Bristol"))]),
        ([("Sol", "I work at Acme"), ("Sol", "*Apex")], [(1, Claim("Sol", "works at", "Apex"))]),
        ([("sol", "I work at Acme"), ("sol", "Correction: Apex")], [(1, Claim("Sol", "works at", "Apex"))]),
        ([("Uma", "I'm 34"), ("Uma", "sorry, 35, I keep forgetting")], [(1, Claim("Uma", "age", "35"))]),
        ([("Quin", "my birthday is the 5th, no wait, the 6th")], [(0, Claim("Quin", "birthday", "the 6th"))]),
        (
            [("Vic", "my dentist is Dr Hale. actually no, it's Dr Hill now")],
            [(0, Claim("Vic", "dentist", "Dr Hill"))],
        ),
        # an explicit correction that fits no one claim withdraws them all
        ([("Sam", "I live in Leeds and I work at Acme"), ("Sam", "I meant Apex")], []),
        # "sorry" before no bare value corrects nothing
        ([("Ana", "I moved to Leeds"), ("Ana", "sorry, Leeds is great")], [(0, Claim("Ana", "lives in", "Leeds"))]),
        # another speaker's words are not corrected
        ([("Ana", "I moved to Leeds"), ("Ben", "sorry, I meant York")], [(0, Claim("Ana", "lives in", "Leeds"))]),
    ],
)
def test_a_correction_replaces_what_it_corrects(
    window: list[tuple[str, str]], expected: list[tuple[int, Claim]]
) -> None:
    assert window_claims(window) == expected


def test_a_retraction_takes_back_the_speakers_words_just_before() -> None:
    assert window_claims([("Sam", "I work at Acme"), ("Sam", "jk")]) == []
    assert window_claims([("Sam", "I live in Leeds. Ok I don't, but I wish I did")]) == []
    asked = [("Sam", "I work at Acme"), ("Jo", "do you like it?"), ("Sam", "I don't")]
    assert window_claims(asked) == [(0, Claim("Sam", "works at", "Acme"))]  # an answer, not a retraction


@pytest.mark.parametrize(
    "window",
    [
        [("Kai", "do you still live in Paris?"), ("Lin", "yeah right, on my salary?")],
        [("A", "are you vegan now?"), ("B", "yes! well, mostly")],
        [("A", "where do you live now?"), ("C", "Slack is down again")],
        [("A", "where are you from?"), ("B", "Tom keeps asking me that")],
        [("A", "do you have any pets?"), ("B", "we don't have a dog, Tom has one called Rex")],
        [("A", "so Tom's brother is staying with us"), ("B", "how long for"), ("A", "he's from Glasgow")],
    ],
)
def test_no_reading_across_turns_that_is_not_plain(window: list[tuple[str, str]]) -> None:
    assert window_claims(window) == []


def test_who_owns_a_thing_is_answered_with_the_thing_cut_at_its_qualifier() -> None:
    """'Who is taking the Peel account now Ravi has gone?' / 'me, I took it over': the thing is the account."""
    found = window_claims([("Ola", "Who is taking the Peel account now Ravi has gone?"), ("Bea", "me, I took it over")])
    assert [claim for _, claim in found] == [Claim("Bea", "owns", "the Peel account")]


@pytest.mark.parametrize("who", ["Grandad", "the kids", "the dog", "Mum"])
def test_who_looks_after_a_person_or_a_pet_owns_nothing(who: str) -> None:
    """'Who's looking after Grandad then?' / 'Dr Oyelaran, same surgery' is no 'Dr Oyelaran owns Grandad'."""
    asked = f"Who's looking after {who} then?"
    found = window_claims([("Ife", asked), ("Tayo", "Dr Oyelaran, same surgery, he's new.")])
    assert [claim for _, claim in found if claim.property == "owns"] == []
