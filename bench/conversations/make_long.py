"""Writes bench/conversations/long/*.txt: conversations of another shape than bench/conversations/set.

Long sessions (15-25 turns), several sessions a week, sometimes two a day, over about five months;
most turns small talk drawn from a shared pool (so many days look alike), the facts a handful of turns
among them, some of which change later (a new job, a move, a new phone). Questions of the four kinds
with their evidence turns. Deterministic (a fixed seed): rerunning writes the same files.

This set is the held-out check of `bench/conversations.py --consolidate`: it was written once, for
that check, and nothing in the product is tuned on it.

    .venv/bin/python bench/conversations/make_long.py
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent / "long"

SMALL_TALK = [
    "Morning! How did you sleep?",
    "Not bad, the neighbours were quiet for once.",
    "Haha nice.",
    "It's pouring again here.",
    "Same here, I got soaked on the way to the shop.",
    "Ugh, typical.",
    "What are you having for dinner?",
    "Probably pasta, I can't be bothered to cook anything fancy.",
    "Did you watch the match last night?",
    "Only the second half, it was a mess.",
    "Yeah the defence fell apart.",
    "I'm so tired today.",
    "Coffee number three is on its way.",
    "Same, this week is dragging.",
    "Any plans for the weekend?",
    "Nothing much, maybe a walk if the weather holds.",
    "Sounds lovely.",
    "I finally finished that series everyone kept talking about.",
    "And? Worth it?",
    "The ending was a bit rushed but I liked it.",
    "I keep meaning to start it.",
    "My back is killing me after the gym.",
    "Stretch! You always forget to stretch.",
    "I know, I know.",
    "The bus was late again this morning.",
    "They really need more buses on that line.",
    "Did you see the news about the bridge closure?",
    "Yeah, traffic is going to be horrible for weeks.",
    "I tried a new bakery near the station.",
    "Any good?",
    "The cinnamon buns were amazing.",
    "I need to do laundry but I'm avoiding it.",
    "Ha, the eternal struggle.",
    "My phone battery dies by lunchtime now.",
    "Time for a new battery maybe.",
    "I had the weirdest dream last night.",
    "Go on then.",
    "I can't even explain it, something about a boat.",
    "Work is quiet this week.",
    "Enjoy it while it lasts.",
    "Exactly my thinking.",
    "I'm thinking of repainting the living room.",
    "What colour?",
    "Something green, not sure yet.",
    "Have you eaten yet?",
    "Just had a sandwich at my desk.",
    "Sad desk lunch again.",
    "Ok I have to run, talk later!",
    "Talk later!",
    "Bye!",
    "Night night.",
    "Good night!",
    "Lol.",
    "Haha yes.",
    "True.",
    "Fair enough.",
    "Oh no.",
    "Wow.",
    "Really?",
    "Seriously.",
    "Right?",
    "How's your mum doing?",
    "She's fine, busy with the garden as always.",
    "Say hi from me.",
    "I booked the dentist finally.",
    "Brave. I've been putting mine off for a year.",
    "The supermarket was out of oat milk again.",
    "Panic buying oat milk, the new trend.",
    "I cleaned out the fridge today, found something from March.",
    "Gross, haha.",
    "The heating in the office is broken.",
    "Wear two jumpers.",
    "Already wearing two.",
    "Are you coming to the quiz on Thursday?",
    "Maybe, depends on work.",
    "We need you for the music round.",
    "I started reading a thriller on the train.",
    "Any good so far?",
    "Too early to say, but the first chapter was tense.",
]


@dataclass
class Fact:
    """A turn that states something, the questions it answers, and where it goes (session index)."""

    session: int
    speaker: str  # "A" or "B"
    text: str
    qids: list[str]


@dataclass
class Spec:
    name: str
    a: str
    b: str
    start: datetime
    facts: list[Fact]
    questions: list[tuple[str, str, str]]  # (qid, kind, text)


def _spec_one() -> Spec:
    a, b = "Rosalind", "Kwame"
    facts = [
        Fact(1, "A", "I started at Harrowgate Analytics on Monday, they put me on the pricing team.", ["q1", "q8"]),
        Fact(2, "B", "We adopted a greyhound from the rescue centre, her name is Pepper.", ["q2"]),
        Fact(4, "A", "I'm allergic to cats, so visiting Jo's flat is always a sneezing marathon.", ["q3"]),
        Fact(6, "B", "I've signed up for Portuguese lessons on Wednesday evenings, the teacher is from Porto.", ["q4"]),
        Fact(9, "A", "Just back from Ljubljana, the old town was gorgeous and the castle views were unreal.", ["q5"]),
        Fact(12, "B", "My sister Efua is getting married in Accra in August, I'm the one giving the speech.", ["q6"]),
        Fact(15, "A", "We moved into the new flat in Walthamstow this weekend, boxes everywhere.", ["q7", "q12"]),
        Fact(22, "A", "I handed in my notice at Harrowgate, I'm joining Brightline Energy as a data lead.", ["q8"]),
        Fact(24, "B", "Pepper has learned to open the back door by herself, we had to put a latch on it.", ["q9"]),
        Fact(27, "B", "I passed my driving test on the second attempt!", ["q10"]),
        Fact(30, "A", "My new phone is a Pixel, I finally gave up on the old iPhone.", ["q11"]),
        Fact(
            33,
            "A",
            "Walthamstow was too far from the office, so we've moved again, to a place in Hackney.",
            ["q12", "q13"],
        ),
        Fact(36, "B", "The Portuguese teacher says I'm ready for the intermediate class now.", ["q14"]),
        Fact(40, "A", "Back from the Lake District, we walked up Helvellyn in the fog.", ["q15"]),
        Fact(44, "B", "I've started cycling to work, it's forty minutes along the canal.", ["q16"]),
    ]
    questions = [
        ("q1", "single", "Where did Rosalind start working first?"),
        ("q2", "single", "What is the name of Kwame's dog?"),
        ("q3", "single", "What is Rosalind allergic to?"),
        ("q4", "single", "Which language is Kwame learning?"),
        ("q5", "temporal", "When did Rosalind get back from Ljubljana?"),
        ("q6", "single", "Who is getting married in Accra?"),
        ("q7", "temporal", "When did Rosalind move to Walthamstow?"),
        ("q8", "multi", "Which companies has Rosalind worked for?"),
        ("q9", "single", "What trick did Pepper learn?"),
        ("q10", "single", "How many attempts did Kwame need to pass his driving test?"),
        ("q11", "single", "What phone does Rosalind use now?"),
        ("q12", "multi", "Which neighbourhoods has Rosalind lived in?"),
        ("q13", "update", "Where does Rosalind live now?"),
        ("q14", "update", "Which Portuguese class is Kwame in now?"),
        ("q15", "temporal", "When did Rosalind climb Helvellyn?"),
        ("q16", "single", "How does Kwame get to work?"),
    ]
    return Spec("rosalind-kwame", a, b, datetime(2025, 1, 6, 19, 0), facts, questions)


def _spec_two() -> Spec:
    a, b = "Teodor", "Amelie"
    facts = [
        Fact(1, "B", "I've been made head of the chemistry department at Fairfield School.", ["q1", "q9"]),
        Fact(3, "A", "My band finally has a name: we're calling ourselves The Low Tides.", ["q2"]),
        Fact(5, "B", "We're growing tomatoes and courgettes on the allotment this year.", ["q3"]),
        Fact(7, "A", "I bought a second-hand Yamaha keyboard for the band, it cost me 300 pounds.", ["q4"]),
        Fact(10, "B", "Flew back from Montreal last night, the conference on science teaching was great.", ["q5"]),
        Fact(13, "A", "My landlord is selling the house, so I have to find somewhere new by June.", ["q6"]),
        Fact(16, "A", "I've found a place in Bristol, near the harbourside, moving on the first.", ["q7", "q8"]),
        Fact(19, "B", "The school asked me to run the after-school robotics club as well.", ["q9"]),
        Fact(23, "A", "The Low Tides played our first gig at the Fleece, about sixty people came.", ["q10"]),
        Fact(26, "B", "I've started training for the Bath half marathon in October.", ["q11"]),
        Fact(29, "A", "I switched from the keyboard to a Nord Stage, the Yamaha went to my nephew.", ["q12"]),
        Fact(32, "B", "My mum moved in with us for a few months while her hip heals.", ["q13"]),
        Fact(35, "A", "Bristol rents went up so I moved out to Bath, a small flat by the river.", ["q8", "q14"]),
        Fact(38, "B", "I ran twenty kilometres on Sunday without stopping, a personal best.", ["q15"]),
        Fact(42, "A", "We recorded a four-song EP at a studio in Stroud over the weekend.", ["q16"]),
    ]
    questions = [
        ("q1", "single", "What is Amelie's role at Fairfield School?"),
        ("q2", "single", "What is the name of Teodor's band?"),
        ("q3", "single", "What is Amelie growing on the allotment?"),
        ("q4", "single", "How much did Teodor pay for the Yamaha keyboard?"),
        ("q5", "temporal", "When did Amelie fly back from Montreal?"),
        ("q6", "single", "Why did Teodor have to move out?"),
        ("q7", "temporal", "When did Teodor find a place in Bristol?"),
        ("q8", "multi", "Which cities has Teodor lived in since his landlord sold the house?"),
        ("q9", "multi", "What responsibilities does Amelie have at her school?"),
        ("q10", "single", "How many people came to the first gig of The Low Tides?"),
        ("q11", "single", "Which race is Amelie training for?"),
        ("q12", "update", "What keyboard does Teodor play now?"),
        ("q13", "single", "Why did Amelie's mum move in?"),
        ("q14", "update", "Where does Teodor live now?"),
        ("q15", "temporal", "When did Amelie run twenty kilometres without stopping?"),
        ("q16", "single", "Where did Teodor's band record their EP?"),
    ]
    return Spec("teodor-amelie", a, b, datetime(2025, 2, 3, 18, 30), facts, questions)


def render(spec: Spec, sessions: int, seed: int) -> str:
    rng = random.Random(seed)
    names = {"A": spec.a, "B": spec.b}
    lines = [
        f"# conversation {spec.name}",
        f"# speakers: {spec.a}, {spec.b}",
        "# Generated by bench/conversations/make_long.py (long sessions, several a week); held out: not tuned on.",
        "",
    ]
    when = spec.start
    by_session: dict[int, list[Fact]] = {}
    for fact in spec.facts:
        by_session.setdefault(fact.session, []).append(fact)
    for n in range(sessions):
        lines.append(f"## {when:%Y-%m-%d %H:%M}")
        length = rng.randint(15, 25)
        turns = [rng.choice(SMALL_TALK) for _ in range(length)]
        facts = by_session.get(n, [])
        slots = sorted(rng.sample(range(2, length), len(facts)))
        who = rng.choice("AB")
        for i, text in enumerate(turns):
            fact = next((f for f, slot in zip(facts, slots, strict=True) if slot == i), None)
            if fact is not None:
                who = fact.speaker
                tags = f" [{' '.join(fact.qids)}]"
                lines.append(f"{names[who]}: {fact.text}{tags}")
            else:
                lines.append(f"{names[who]}: {text}")
            who = "B" if who == "A" else "A"
        lines.append("")
        # several sessions a week, now and then two the same day
        when = when + (
            timedelta(hours=rng.choice([3, 4])) if rng.random() < 0.15 else timedelta(days=rng.choice([1, 2, 2, 3]))
        )
        when = when.replace(hour=when.hour if when.hour < 22 else 19)
    lines += [f"? {qid} {kind} | {text}" for qid, kind, text in spec.questions]
    return "\n".join(lines) + "\n"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for i, (spec, seed) in enumerate(((_spec_one(), 11), (_spec_two(), 23)), 1):
        (OUT / f"{i:02d}-{spec.name}.txt").write_text(render(spec, 48, seed))


if __name__ == "__main__":
    main()
