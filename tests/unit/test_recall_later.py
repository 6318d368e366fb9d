"""recall's wordless rule (`services/recall/truth/later.py`): for a question about the present, a person's later
statement of the same kind ranks above their earlier one among the best answers, without words of change; not
another person's, not a maybe, not a "still", not a reply to someone else's news, not for a question about the past."""

from __future__ import annotations

from typing import Any

import pytest

from mneme.bootstrap import Services
from mneme.language import changes
from mneme.services.recall.run import Candidate
from mneme.services.recall.truth import later
from mneme.services.remember import RememberItem
from tests.unit.test_changes import turn
from tests.unit.test_recall_ranking import ALICE, DAY, recall, say

JANUARY, MAY = DAY.replace(year=2024, month=1), DAY.replace(year=2024, month=5)
QUESTION = "Where does Kofi do his weekly shop?"


def time_trace(services: Services, question: str) -> dict[str, Any]:
    response = recall(services, question, explain=True)
    assert response.explain is not None
    return next(s for s in response.explain["stages"] if s["stage"] == "time")


def first_shop(services: Services) -> str:
    """Kofi's first statement, and a turn of someone else's in the same conversation."""
    said = say(services, "Kofi", "I do the weekly shop at the Aldi on Mill Road, it's cheap and quick.",
               occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Efua", "The queues there on Saturdays though.", occurred_at=JANUARY.replace(minute=1),
        session_id="s1")  # fmt: skip
    return said


def months_apart(services: Services, first: tuple[str, str], then: tuple[str, str]) -> tuple[str, str]:
    """Two turns, `(speaker, text)`, in January's and May's conversations: their ids."""
    return (
        say(services, *first, occurred_at=JANUARY, session_id="s1"),
        say(services, *then, occurred_at=MAY, session_id="s2"),
    )


def raised_over(services: Services, question: str, new: str, old: str) -> None:
    """Asked `question`, the later statement ranks first, just above the earlier one, by this rule."""
    assert [r.id for r in recall(services, question).results[:2]] == [new, old]
    assert time_trace(services, question)["later"]["over"] == old


def kept_first(services: Services, question: str, old: str) -> None:
    """Asked `question`, the earlier statement stays first: this rule raised nothing."""
    assert recall(services, question).results[0].id == old
    assert time_trace(services, question)["later"] is None


def raised_or_kept(services: Services, question: str, new: str, old: str, raised: bool) -> None:
    """`raised_over` when `raised`, else `kept_first`."""
    if raised:
        raised_over(services, question, new, old)
    else:
        kept_first(services, question, old)


LATER = (
    "Lidl by the retail park for the weekly shop, empty on Saturday mornings and a lovely bakery, cheaper than"
    " expected, parking too."
)


def test_a_later_statement_of_the_same_kind_by_the_same_person_ranks_first_for_the_present(
    services: Services,
) -> None:
    old = first_shop(services)
    new = say(services, "Kofi", LATER, occurred_at=MAY, session_id="s2")
    response = recall(services, QUESTION, explain=True)
    assert [r.id for r in response.results[:2]] == [new, old]
    assert response.results[1].since_changed is None  # reordered, not marked as changed: both may be true
    assert time_trace(services, QUESTION)["later"]["over"] == old


@pytest.mark.parametrize(
    ("speaker", "text"),
    [
        ("Efua", LATER),  # another person's
        ("Kofi", f"I might try the {LATER}"),  # a maybe
        ("Kofi", f"Still the Aldi. {LATER}"),  # the first holds
        ("Kofi", f"{LATER} Still the Aldi's loyalty card in my wallet though."),  # ... and here
        ("Kofi", f"Is it the {LATER}?"),  # a question
    ],
)
def test_another_persons_statement_a_maybe_a_still_or_a_question_leaves_the_first_first(
    services: Services, speaker: str, text: str
) -> None:
    old = first_shop(services)
    say(services, speaker, text, occurred_at=MAY, session_id="s2")
    kept_first(services, QUESTION, old)


def test_a_still_of_what_has_not_happened_yet_does_not_keep_the_first(services: Services) -> None:
    """ "The loyalty card still hasn't turned up" says nothing of the first holding: the later statement is raised."""
    old = first_shop(services)
    new = say(services, "Kofi", f"{LATER} Their loyalty card still hasn't turned up.", occurred_at=MAY,
              session_id="s2")  # fmt: skip
    raised_over(services, QUESTION, new, old)


def test_a_reply_to_someone_elses_news_leaves_the_first_first(services: Services) -> None:
    old = first_shop(services)
    say(services, "Efua", "I've switched to the Lidl by the retail park, the bakery is lovely.", occurred_at=MAY,
        session_id="s2")  # fmt: skip
    say(services, "Kofi", "Oh nice, Lidl for the weekly shop! Parking at the retail park is easy too.",
        occurred_at=MAY.replace(minute=1), session_id="s2")  # fmt: skip
    assert recall(services, QUESTION).results[0].id == old


def test_a_question_about_the_past_is_left_alone(services: Services) -> None:
    first_shop(services)
    say(services, "Kofi", LATER, occurred_at=MAY, session_id="s2")
    assert time_trace(services, "Where did Kofi do his weekly shop before?")["later"] is None


def test_a_later_statement_naming_the_first_value_again_keeps_it(services: Services) -> None:
    first_shop(services)
    later = say(services, "Kofi", LATER, occurred_at=MAY, session_id="s2")
    say(services, "Kofi", "Aldi on Mill Road it is, cheap and quick beats a nice bakery.",
        occurred_at=MAY.replace(month=6), session_id="s3")  # fmt: skip
    assert recall(services, QUESTION).results[0].id != later
    assert time_trace(services, QUESTION)["later"] is None


def test_news_in_another_partition_is_not_read(services: Services) -> None:
    """The turns before a statement are read for news only as the caller's metadata filter lets it see them."""

    def said(speaker: str, text: str, user: str, **fields: Any) -> str:
        metadata = {"speaker": speaker, "user": user}
        item = RememberItem.model_validate(
            {"scope": "root.chat", "content": text, "create_scope": True, "metadata": metadata, **fields}
        )
        return services.remember.remember(ALICE, [item])[0].episode_id

    said("Kofi", "I do the weekly shop at the Aldi on Mill Road, it's cheap and quick.", "a", occurred_at=JANUARY,
         session_id="s1")  # fmt: skip
    said("Efua", "I've switched to the Lidl by the retail park, the bakery is lovely.", "b", occurred_at=MAY,
         session_id="s2")  # fmt: skip
    reply = said("Kofi", "Oh nice, Lidl for the weekly shop! Parking at the retail park is easy too.", "a",
                 occurred_at=MAY.replace(minute=1), session_id="s2")  # fmt: skip
    mine = recall(services, QUESTION, metadata={"user": "a"}, explain=True)
    assert mine.explain is not None
    assert next(s for s in mine.explain["stages"] if s["stage"] == "time")["later"]["id"] == reply
    assert time_trace(services, QUESTION)["later"] is None  # with Efua's news in sight, Kofi's turn answers it


def test_asked_about_before_the_earlier_statement_of_the_same_kind_ranks_first(services: Services) -> None:
    """The mirror for a question about the past (`later.earlier_first`): the person's earlier statement ranks
    just above the later one the question's words find best; not for the present."""
    first = first_shop(services)
    later = say(services, "Kofi", LATER, occurred_at=MAY, session_id="s2")
    question = "Where did Kofi originally get cheaper weekly shopping with parking too?"
    trace = time_trace(services, question)
    assert trace["truth"] == "past" and (trace["earlier"]["id"], trace["earlier"]["over"]) == (first, later)
    assert recall(services, question).results[0].id == first
    assert time_trace(services, "Where does Kofi get cheaper weekly shopping with parking too?")["earlier"] is None


def test_a_question_about_the_past_that_finds_nothing_or_one_answer_returns_what_it_found(services: Services) -> None:
    """The past mirror reads the best answers only when there are two: none or one is an answer, not an error."""
    first = first_shop(services)
    nothing = recall(services, "What zzqx did Qwyrt originally use?", scoring={"strictness": "precision"})
    assert nothing.results == []
    response = recall(services, "Where did Kofi originally do his weekly shop?", scoring={"strictness": "precision"})
    assert [r.id for r in response.results][:1] == [first]


@pytest.fixture
def unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The change rules read no change of any pair, as with wording they do not know."""
    monkeypatch.setattr(changes, "update_reason", lambda *args, **kwargs: None)


@pytest.mark.usefixtures("unread")
def test_a_later_statement_with_change_words_the_change_rules_left_alone_ranks_first(services: Services) -> None:
    """Words of change in a later statement whose change the rules did not read do not keep it out of this rule."""
    old = first_shop(services)
    new = say(services, "Kofi", "Sorry I'm late! Since I moved my shopping over to the Lidl by the retail park I lose"
              " track of time in that bakery.", occurred_at=MAY, session_id="s2")  # fmt: skip
    raised_over(services, QUESTION, new, old)


@pytest.mark.usefixtures("unread")
def test_a_change_of_one_of_the_things_the_first_names_leaves_the_first_first(services: Services) -> None:
    """The first names several things; the later one changes one of them and says so: the rest stands."""
    old = say(services, "Bea", "I pay for Deezer and Netflix and that's my limit.", occurred_at=JANUARY,
              session_id="s1")  # fmt: skip
    say(services, "Bea", "Cancelled Netflix, nothing on it. Got Disney+ for the kids instead, my limit.",
        occurred_at=MAY, session_id="s2")  # fmt: skip
    question = "Which streaming service does Bea pay for?"
    kept_first(services, question, old)


def test_a_yes_no_question_is_answered_otherwise_only_by_a_statement_that_names_what_it_asks(
    services: Services,
) -> None:
    """ "Is Kofi vegetarian?" asks whether what it names holds: a later statement of his that names other things
    does not say otherwise, however alike its vector."""
    old = say(services, "Kofi", "Confession time. I'm not vegetarian any more, the butcher on Mill Road won me over.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Kofi", "Sad news though: the butcher on Mill Road is closing, Pepper the shop cat too.",
        occurred_at=MAY, session_id="s2")  # fmt: skip
    question = "Is Kofi vegetarian?"
    kept_first(services, question, old)


@pytest.mark.usefixtures("unread")
@pytest.mark.parametrize(
    ("first", "then", "question"),
    [
        pytest.param(  # in Kofi's own turn, "she's doubled it" (his GP) is of his dose
            ("Kofi", "Saw Dr Osei today. She's started me on sertraline, 50 mg each morning."),
            ("Kofi", "She thinks it's helping but not enough, so she's doubled it: 100 mg each morning."),
            "What dose of sertraline does Kofi take?",
            id="he or she in their own turn",
        ),
        pytest.param(  # a number both name ("5") is no other thing the first names that stays: it all changed
            ("Kofi", "I work the early shift at the bakery, 5 till 1, Tuesday to Saturday."),
            ("Kofi", "Can you recommend a blackout blind? The bakery moved me onto nights from this week, 9pm till 5."),
            "What shift does Kofi work at the bakery?",
            id="a number both name",
        ),
        pytest.param(  # "the on-call phone for the billing service" is the billing service's: anyone may say it changed
            ("Hamid", "On-call phone for the billing service this quarter: Odile Ferrand."),
            ("Yara", "Billing service rota from April: Kasia Brandt carries it."),
            "Who has the on-call phone for the billing service?",
            id="the thing read to the end of its words",
        ),
        pytest.param(  # an assistant's recap is of the user's things, whatever else it names
            ("assistant", "Noted: your broadband plan is Lumenet Heron from March, Lumenet engineers installed it."),
            ("user", "Kids swallowed that too, so we're on Lumenet Osprey: gigabit, Lumenet engineers installed it."),
            "Which broadband plan is the user on?",
            id="the user's word after the assistant's recap",
        ),
        pytest.param(  # "he" in Delphine's turn is of Théo, whom her first statement named
            ("Delphine", "Our eldest, Théo, goes to École des Tilleuls, the school past the market square."),
            ("Delphine", "He loves the lab at Collège Anne-Sylvestre, his school since September."),
            "Which school does Théo go to?",
            id="he of the person the first statement named",
        ),
        pytest.param(  # "will" in a question after the news is no plan of it
            ("Kofi", "My salary is £38,000 as a dispatcher at Brennan Freight. Is that fair for Bristol?"),
            ("Kofi", "The pay review came through: same role, but it's £41,250 from June. How much will that add?"),
            "What is Kofi's salary?",
            id="a question after it",
        ),
    ],
)
def test_a_later_statement_ranks_first(
    services: Services, first: tuple[str, str], then: tuple[str, str], question: str
) -> None:
    old, new = months_apart(services, first, then)
    raised_over(services, question, new, old)


@pytest.mark.usefixtures("unread")
def test_of_a_thing_anyone_in_the_scope_may_say_it_changed(services: Services) -> None:
    """A question about a thing ("the Verity Freight audit pack"), not a person: a later statement naming it ranks
    first whoever says it; asked about a person's thing, only that person's own later word counts."""
    old, new = months_apart(
        services,
        ("Hamid", "Kickoff with Verity Freight went well. Their audit pack is due 12 September."),
        ("Yara", "Verity's controller emailed: they need the audit pack by 29 August, board meeting."),
    )
    raised_over(services, "When is the Verity Freight audit pack due?", new, old)
    assert time_trace(services, "When is Hamid's Verity Freight audit pack due?")["later"] is None


@pytest.mark.usefixtures("unread")
def test_only_a_count_for_a_name_leaves_the_first_first(services: Services) -> None:
    """Asked which software, a later statement naming only a number ("ten minutes") names no other software."""
    old = say(services, "Rachel", "We've moved the books to FreeAgent, the accountant recommended it.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Rachel", "Ha, long gone. The books take ten minutes with the accountant.", occurred_at=MAY,
        session_id="s2")  # fmt: skip
    question = "Which software does Rachel keep the books in?"
    kept_first(services, question, old)


@pytest.mark.usefixtures("unread")
@pytest.mark.parametrize(
    ("then", "raised"),
    [
        ("Pointed my personal email domain at Proton Mail and cancelled the old account.", True),
        ("Since they shut the old servers I've been going to Proton Mail for my domain.", True),
        ("Pointed my personal email domain at Proton Mail and the old lady next door helped.", False),
        ("By then I pointed my personal email domain at Proton Mail and cancelled the account.", False),
    ],
)
def test_the_old_one_ended_tells_the_change_and_the_old_one_held_or_by_then_tell_the_past(
    services: Services, then: str, raised: bool
) -> None:
    """ "cancelled the old account", "shut the old servers" say the change ("I've been going to" is no plan); "the
    old …" otherwise, or "by then", of the past."""
    old, new = months_apart(services, ("Iris", "My personal email is with Fastmail, on my own domain."), ("Iris", then))
    question = "Which provider is Iris's personal email with?"
    raised_or_kept(services, question, new, old, raised)


@pytest.mark.parametrize(
    ("told", "past"),
    [
        ("closed the last account at the old bank on friday, everything's with tidewater mutual", False),
        ("since they shut the old office i've been going to the stellbridge site", False),
        ("my old team was better", True),
        ("i closed it, and my old team was better", True),
    ],
)
def test_an_end_told_before_the_old_thing_is_of_the_change_not_the_past(told: str, past: bool) -> None:
    """The old thing an end is told of ("closed … at the old bank") is the change; "my old team" alone is the past."""
    assert bool(later.BEFORE.search(later.OLD_ENDED.sub(" ", told))) is past


@pytest.mark.usefixtures("unread")
@pytest.mark.parametrize(
    ("first", "asked", "then", "question"),
    [
        (  # Delphine's answer names no one, and is of Théo
            ("Delphine", "Our eldest, Théo, goes to École des Tilleuls, the school past the market."),
            ("Farid", "How is Théo finding the big move up?"),
            ("Delphine", "Collège Anne-Sylvestre, the school past the station, has a proper lab."),
            "Which school does Théo go to?",
        ),
        (  # who Ayo's partner is, Ayo says; a friend's question before it is no news Ayo's turn answers
            ("Ayo", "My partner Daniel and I are throwing his parents' party on the 27th."),
            ("Femi", "How's Daniel? Haven't seen him in ages."),
            ("Ayo", "We called it a day. I have been seeing Rowan since the party on the 27th."),
            "Who is Ayo's partner?",
        ),
    ],
)
def test_an_answer_to_someones_question_about_the_person_asked_about_is_of_them(
    services: Services, first: tuple[str, str], asked: tuple[str, str], then: tuple[str, str], question: str
) -> None:
    old = say(services, *first, occurred_at=JANUARY, session_id="s1")
    say(services, *asked, occurred_at=MAY, session_id="s2")
    new = say(services, *then, occurred_at=MAY.replace(minute=1), session_id="s2")
    raised_over(services, question, new, old)


@pytest.mark.usefixtures("unread")
def test_a_forgotten_question_makes_no_answer(services: Services) -> None:
    """The question a turn answers is read as the store holds it: forgotten, it says nothing of whom."""
    say(services, "Delphine", "Our eldest, Théo, goes to École des Tilleuls, the school past the market.",
        occurred_at=JANUARY, session_id="s1")  # fmt: skip
    asking = say(services, "Farid", "How is Théo finding the big move up?", occurred_at=MAY, session_id="s2")
    say(services, "Delphine", "Collège Anne-Sylvestre, the school past the station, has a proper lab.",
        occurred_at=MAY.replace(minute=1), session_id="s2")  # fmt: skip
    services.forgetting.forget_episode(ALICE, asking)
    assert time_trace(services, "Which school does Théo go to?")["later"] is None


@pytest.mark.usefixtures("unread")
def test_a_later_statement_naming_the_person_asked_about_does_not_restate_the_first(services: Services) -> None:
    """ "Miso bit the nurse" names the cat the question asks about, not the vets the first statement named."""
    old, new = months_apart(
        services,
        ("Soraya", "Our cat Miso goes to Harrowgate Vets on Cliff Road, the vets are lovely."),
        ("Soraya", "He goes to Linden Paws Vets since the move, the vets are closer and his records went across."),
    )
    say(services, "Soraya", "Miso bit the vets nurse at his booster, naturally.", occurred_at=MAY.replace(month=7),
        session_id="s3")  # fmt: skip
    raised_over(services, "Which vets does Miso go to?", new, old)


def read_only(monkeypatch: pytest.MonkeyPatch, earlier: str, later: str) -> None:
    """The change rules read one change, of `earlier` by `later` (texts' beginnings), and no other."""

    def reason(one: Any, then: Any, *args: Any, **kwargs: Any) -> str | None:
        texts = (changes.said(one).text, changes.said(then).text)
        return "read" if texts[0].startswith(earlier) and texts[1].startswith(later) else None

    monkeypatch.setattr(changes, "update_reason", reason)


@pytest.mark.parametrize(
    ("then", "raised"),
    [
        ("They finally hired: Rustam Beketov started Monday, my one-to-ones with the squad go through him.", True),
        ("Finance asked why Graham left the payments squad, so I wrote them a note with Rustam Beketov.", False),
    ],
)
def test_the_latest_of_a_change_read_may_change_again_but_not_by_what_it_superseded(
    services: Services, monkeypatch: pytest.MonkeyPatch, then: str, raised: bool
) -> None:
    """A change the rules read (Graham → Wendeline) is the best answer; a later change of hers ranks above it, a
    later statement naming what it superseded ("why Graham left") does not."""
    read_only(monkeypatch, "My manager is Graham", "My manager is Wendeline")
    say(services, "Priya", "My manager is Graham Oduya, he runs the payments squad.", occurred_at=JANUARY,
        session_id="s1")  # fmt: skip
    head = say(services, "Priya", "My manager is Wendeline Achterberg from this week, she leads the squad.",
               occurred_at=MAY, session_id="s2")  # fmt: skip
    new = say(services, "Priya", then, occurred_at=MAY.replace(month=9), session_id="s3")
    question = "Who is Priya's manager?"
    raised_or_kept(services, question, new, head, raised)


def test_who_a_person_is_to_someone_that_someone_says() -> None:
    """ "Who is Ayo's partner?" asks about Ayo's partner, and who it is Ayo says; "Where does Maya's sister live?"
    asks about the sister, whose home Maya's own news does not tell."""
    assert later._Asked.of("Who is Ayo's partner?", None).about == {"ayo's partner", "ayo"}
    assert later._Asked.of("Where does Maya's sister live?", None).about == {"maya's sister"}


@pytest.mark.usefixtures("unread")
def test_a_note_after_someones_news_is_no_reply_to_it(services: Services) -> None:
    """An agent's note about the thing asked about, written after someone's news in the same conversation, answers
    no one: it ranks first as any later statement naming the thing does."""
    old = say(services, "Imran", "The payments squad is led by Odile Ferrand, ask her about refunds.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Imran", "Big news: Odile quit, she's joined the risk team.", occurred_at=MAY,
        session_id="s2")  # fmt: skip
    new = say(services, "assistant", "Payments squad led by Kasia Brandt from 3 June; refunds go to her.",
              occurred_at=MAY.replace(minute=1), session_id="s2")  # fmt: skip
    raised_over(services, "Who leads the payments squad?", new, old)


@pytest.mark.parametrize(
    ("drafted_by", "to", "raised"),
    [("assistant", "Rosalind", True), ("Priya", "Rosalind", True), ("Priya", "all", False)],
)
def test_a_change_read_over_another_speakers_words_may_change_the_best_answer_too(
    services: Services, monkeypatch: pytest.MonkeyPatch, drafted_by: str, to: str, raised: bool
) -> None:
    """Priya's news was read as changing the assistant's draft ("Hi Rosalind, …"): it is still her latest word on
    her manager, and ranks above her first statement. A change read over her own words is used up by it, unless
    it ended a value her first statement names (`_same_said`: "Hi Rosalind" → "to Graham")."""
    read_only(monkeypatch, "Here's a draft", "Same leave email please")
    old = say(services, "Priya", "My manager is Rosalind Achebe, she runs the data team and approves leave.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, drafted_by, f"Here's a draft: 'Hi {to}, could I take Friday off? My work is on track.'",
        occurred_at=JANUARY.replace(minute=1), session_id="s1")  # fmt: skip
    new = say(services, "Priya", "Same leave email please, but to Graham Oduya: he took over the data team and"
              " approves leave for all of us.", occurred_at=MAY, session_id="s2")  # fmt: skip
    question = "Who is Priya's manager?"
    raised_or_kept(services, question, new, old, raised)


def test_of_several_later_statements_one_saying_a_change_comes_first_and_a_passing_one_far_below_does_not() -> None:
    """`_latest`: "Better since I moved to the sports clinic: Harriet Osei" over a later "She's given me glute
    exercises, next session Thursday"; "I got into Canton Chamber Singers" over a later "June, at St John's."
    scoring a tenth of it; with neither, the latest."""

    def said(text: str, month: int, score: float) -> Candidate:
        record = turn(text, "Ines").model_copy(update={"occurred_at": JANUARY.replace(month=month)})
        return Candidate(id=text, record=record, score=score)

    moved = said("Better since I moved to the sports clinic at the uni: Harriet Osei is brilliant.", 3, 0.24)
    exercises = said("She's given me glute exercises that hurt in a good way. Next session is Thursday.", 4, 0.4)
    assert later._latest([(moved, 0.35), (exercises, 0.43)])[0] is moved
    choir = said("I auditioned for Canton Chamber Singers in March and got in.", 3, 0.49)
    concert = said("June, at St John's.", 4, 0.04)
    assert later._latest([(choir, 0.43), (concert, 0.34)])[0] is choir
    assert later._latest([(choir, 0.43), (said("June, at St John's.", 4, 0.3), 0.34)])[0] is not choir
    invited = said("Not me, not at that hour since Easter. Join me after the school run instead?", 5, 0.5)
    assert later._latest([(moved, 0.35), (invited, 0.4)])[0] is moved  # "instead" only in what it asks


def test_asked_what_time_a_later_statement_naming_no_time_of_day_says_none() -> None:
    """After "the 6:15 lane session", "I haven't been in the water at that hour since Easter" names no time of day
    for "What time does Signe swim?"; "I go straight after drop-off, the 7:40 session" does."""
    asked = later._Asked.of("What time does Signe swim?", None)
    first = changes.said(turn("Every weekday, the 6:15 lane session at Vikingabadet. Out by seven.", "Signe"))
    since = changes.said(turn("Not me, I haven't been in the water at that hour since Easter.", "Signe"))
    sorted_out = changes.said(turn("Sorted the pool problem: I go after drop-off, the 7:40 session.", "Signe"))
    assert not later._tells_new(first, since, asked, None)
    assert later._tells_new(first, sorted_out, asked, None)
    assert later._tells_new(first, since, later._Asked.of("Where does Signe swim?", None), None)


def test_a_later_statement_of_the_speaker_about_the_same_person_ranks_first(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's word on their daughter: "Ayla's first week at Kestrel Lane Primary" after "Ayla's nursery,
    Sunnybank" is the same speaker's later word on Ayla, when the change rules read no change."""
    read_only(monkeypatch, "nothing", "nothing")
    old, new = months_apart(
        services,
        ("user", "Ayla's nursery, Sunnybank, attended three days a week, wants junk modelling. Ideas with loo rolls?"),
        ("user", "Ayla's first week at Kestrel Lane Primary went well."),
    )
    raised_over(services, "Which school or nursery does Ayla attend?", new, old)


def test_a_later_word_of_the_person_a_relation_names_is_of_that_relation(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked where the user's brother lives, "My brother Rory lives in Melbourne" names him: Rory's later news is of
    the brother asked about. Not so for the user: "my husband Sam eats everything" beside the user's diet does not make
    Sam's later word the user's."""
    read_only(monkeypatch, "nothing", "nothing")
    old, new = months_apart(
        services,
        ("user", "My brother Rory lives in Melbourne and I want to ring him on his birthday at a sensible time."),
        ("user", "Rory's landed in Auckland, he starts at the harbour authority on Monday."),
    )
    raised_over(services, "Where does the user's brother live?", new, old)


def test_a_relation_named_beside_the_user_does_not_speak_for_the_user(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_only(monkeypatch, "nothing", "nothing")
    old, _ = months_apart(
        services,
        ("user", "Plan me a week of dinners. I'm vegetarian and my husband Sam eats everything."),
        ("user", "Sam watched one documentary and went fully vegan."),
    )
    kept_first(services, "What does the user eat?", old)


def team_ci(services: Services) -> tuple[str, str]:
    """Ines's word on the team's CI in January; Oskar's own chain of two changes of it (March, then May)."""
    old = say(services, "Ines", "Welcome aboard: every pull request builds on Harbor CI, and reviews wait for green.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Oskar", "Harbor's new pricing started, so from Monday the pipelines live on Tessel.",
        occurred_at=DAY.replace(year=2024, month=3), session_id="s2")  # fmt: skip
    new = say(services, "Oskar", "Tessel kept timing out, so we cut over to Quarry: green builds in half the time.",
              occurred_at=MAY, session_id="s3")  # fmt: skip
    return old, new


@pytest.mark.parametrize("chained", [False, True])
def test_asked_about_a_groups_thing_anyones_later_word_on_it_ranks_first(
    services: Services, monkeypatch: pytest.MonkeyPatch, chained: bool
) -> None:
    """A team's CI is anyone's in the team to change: Oskar's latest word on it ranks above Ines's earlier one,
    which no rule read a change of, also when it is the head of his own chain (his Tessel → Quarry read as a change
    within his words)."""
    read_only(monkeypatch, "Harbor's new pricing" if chained else "nothing", "Tessel kept")
    old, new = team_ci(services)
    assert time_trace(services, "Which CI service builds the team's pull requests?")["superseded"] or not chained
    raised_over(services, "Which CI service builds the team's pull requests?", new, old)
    assert later._Asked.of("What do our builds run on?", None).group
    assert not later._Asked.of("Which days is Ana in the office?", None).group


@pytest.mark.parametrize(
    ("first", "then", "question"),
    [
        (
            ("Ana", "I'm in the office on Tuesdays and Thursdays, mostly at the window desks."),
            ("Ben", "From next week I'm in the office on Mondays and Wednesdays, because of the school run."),
            "Which days is Ana in the office?",
        ),
        (  # asked about a relative, the speaker's own news is not theirs
            ("Hana", "My sister Mei lives in Osaka, near the castle, and teaches piano."),
            ("Hana", "I moved to Kyoto in May, the flat is tiny but the light is lovely."),
            "Where does Hana's sister live?",
        ),
    ],
)
def test_asked_about_one_person_another_persons_later_word_stays_theirs(
    services: Services, first: tuple[str, str], then: tuple[str, str], question: str
) -> None:
    old, _ = months_apart(services, first, then)
    kept_first(services, question, old)


@pytest.mark.usefixtures("unread")
@pytest.mark.parametrize(
    ("then", "raised"),
    [
        ("First week as a forklift instructor, new hi-vis and everything, and the role is days only.", True),
        ("Another week of forklift training, the role is days only and the depot is freezing.", False),  # no change
        ("First ride to the depot on the new bike, the canal path is freezing.", False),  # a change, not of the job
    ],
)
def test_a_change_of_what_is_asked_told_in_plain_words_ranks_first(services: Services, then: str, raised: bool) -> None:
    """A later statement that tells a change ("new") of the thing asked about (a job) in words no name or number
    says ("a forklift instructor") tells something new; without a change, or of something else, it does not."""
    first = "My job is picking orders on the night shift at the Brennan depot, and the job pays weekly."
    old, new = months_apart(services, ("Tomasz", first), ("Tomasz", then))
    question = "What is Tomasz's job?"
    raised_or_kept(services, question, new, old, raised)


@pytest.mark.usefixtures("unread")
def test_a_later_word_of_the_speaker_on_a_relative_asked_about_ranks_first(services: Services) -> None:
    """The best answer is about the speaker's relative ("My boyfriend Kenji…"): their later word naming someone else
    ranks first when the question asks about that relative, whatever word it uses for them."""
    old, new = months_apart(
        services,
        ("Hana", "My boyfriend Kenji is the best partner, he brings me coffee in bed every morning."),
        ("Hana", "I have been seeing Rafael since the spring; he cooks while I wash up, the kindest partner."),
    )
    raised_over(services, "Who is Hana's partner?", new, old)


def test_a_change_naming_the_value_it_ends_is_partial_only_beside_other_values() -> None:
    """A later statement that names the first's value as ended ("The Gazette went online only") and a new one tells
    something new when that value is all the first names (but numbers); beside another value ("and the Herald on
    Sundays") it changes one of two, which `current_truth` reads, not this rule."""
    asked = later._Asked.of("Which newspaper does Odile read?", None)
    then = changes.said(turn("The Gazette went online only, so I read the Courier instead, on paper.", "Odile"))
    alone = changes.said(turn("I read the Gazette every morning on the train, all 40 pages.", "Odile"))
    beside = changes.said(turn("I read the Gazette every morning on the train, and the Herald on Sundays.", "Odile"))
    assert later._tells_new(alone, then, asked, None)
    assert not later._tells_new(beside, then, asked, None)


DOSE = "I take 75 micrograms of levothyroxine every morning. Can I have coffee straight after?"
DOSE_ASKED = "How many micrograms of levothyroxine does the user take every morning?"


@pytest.mark.parametrize(
    ("note", "raised"),
    [
        ("GP increased user's levothyroxine to 100 micrograms every morning from 12 May.", True),
        ("GP increased Omar's levothyroxine to 100 micrograms every morning from 12 May.", False),  # someone else's
        ("user's pharmacy, Boots on Mill Road, delivers the levothyroxine every morning.", False),  # no change told
    ],
)
def test_a_note_naming_the_person_asked_about_is_their_later_word(services: Services, note: str, raised: bool) -> None:
    """An agent's note (spoken as the assistant) of the user's things is a later word on them, as their own is."""
    old = say(services, "user", DOSE, occurred_at=JANUARY, session_id="s1")
    say(services, "user", "Coffee is my morning ritual.", occurred_at=JANUARY.replace(minute=1), session_id="s1")
    new = say(services, "assistant", note, occurred_at=MAY, session_id="s2")
    raised_or_kept(services, DOSE_ASKED, new, old, raised)


def test_a_change_read_among_notes_of_what_the_best_answer_says_may_be_its_later_word(services: Services) -> None:
    """The assistant's recap of the user's dose, changed by a later note: that note is the later word on the
    user's own statement of the dose too (`_same_said`), not used up by the change read between the notes."""
    old = say(services, "user", DOSE, occurred_at=JANUARY, session_id="s1")
    say(services, "assistant", "user takes levothyroxine 75 micrograms each morning.",
        occurred_at=JANUARY.replace(minute=1), session_id="s1")  # fmt: skip
    new = say(services, "assistant", "GP increased user's levothyroxine to 100 micrograms every morning from 12 May.",
              occurred_at=MAY, session_id="s2")  # fmt: skip
    assert recall(services, DOSE_ASKED).results[0].id == new
    assert old in {r.id for r in recall(services, "How many micrograms of levothyroxine does the user take?").results}


ASKING = "Long time! Still at Calder Analytics, or where are you working these days?"


@pytest.mark.parametrize(
    ("asking", "raised"),
    [
        (ASKING, True),
        ("Long time! Still at Calder Analytics, and which football team do you support?", False),  # of another thing
    ],
)
def test_an_answer_is_of_the_kind_of_the_question_it_answers(services: Services, asking: str, raised: bool) -> None:
    """ "Brightline, since March." shares no word with "I work at Calder Analytics": it is a later word on where
    Priya works because it answers a question of where she works."""
    old, new, _ = answered(services, asking)
    raised_or_kept(services, "Where does Priya work?", new, old, raised)


def test_a_forgotten_question_gives_its_answer_no_kind(services: Services) -> None:
    """The question an answer follows is read as the store holds it: forgotten, it says nothing."""
    old, _, asking = answered(services, ASKING)
    services.forgetting.forget_episode(ALICE, asking)
    kept_first(services, "Where does Priya work?", old)


def answered(services: Services, asking: str) -> tuple[str, str, str]:
    """Priya's first statement, Olu's question months later and her answer: their ids."""
    old = say(services, "Priya", "I work at Calder Analytics on the pricing team, mostly forecasting models.",
              occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "Olu", "We should swap notes on forecasting sometime.", occurred_at=JANUARY.replace(minute=1),
        session_id="s1")  # fmt: skip
    question = say(services, "Olu", asking, occurred_at=MAY, session_id="s2")
    new = say(services, "Priya", "Brightline, since March. Smaller team, more interesting problems.",
              occurred_at=MAY.replace(minute=1), session_id="s2")  # fmt: skip
    return old, new, question


@pytest.mark.parametrize(
    ("then", "raised"),
    [
        ("Which day do the bins go out on Cragg Street?", True),  # a question restates nothing
        ("Cragg Street bins go out on Mondays, I miss it.", False),  # a statement naming the street again
        ("Post for Cragg Street still turns up even though I closed that lease in May.", True),  # its end
    ],
)
def test_a_question_naming_the_first_value_does_not_restate_it(
    services: Services, monkeypatch: pytest.MonkeyPatch, then: str, raised: bool
) -> None:
    """A statement naming the first one's street again after the move keeps it first (`_restated`); a question
    naming it restates nothing ("Which day do the bins go out on Cragg Street?")."""
    read_only(monkeypatch, "no change", "is read")
    old = say(services, "user", "I live on Cragg Street in Hebden Bridge, what's the nearest place to get rid of a"
              " mattress?", occurred_at=JANUARY, session_id="s1")  # fmt: skip
    say(services, "user", "I'll book the collection.", occurred_at=JANUARY.replace(minute=1), session_id="s1")
    new = say(services, "user", "The removal van dropped the last boxes at 14 Birchcliffe Road, no mattress to get rid"
              " of this time. Same town, just further up the hill.", occurred_at=MAY, session_id="s2")  # fmt: skip
    say(services, "user", then, occurred_at=MAY.replace(month=6), session_id="s3")
    raised_or_kept(services, "What street does the user live on?", new, old, raised)
