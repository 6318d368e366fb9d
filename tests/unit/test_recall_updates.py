"""recall's admit stage keeps an update of one of the best answers that the question's words do not reach
(`services/recall/truth/updates.py`), for a question about the present only."""

from __future__ import annotations

from typing import Any

from mneme.bootstrap import Services
from tests.unit.test_recall_ranking import DAY, recall, say

JANUARY, FEBRUARY, MARCH = (DAY.replace(year=2025, month=m) for m in (1, 2, 3))


def admit_trace(services: Services, question: str) -> dict[str, Any]:
    response = recall(services, question, explain=True)
    assert response.explain is not None
    return next(s for s in response.explain["stages"] if s["stage"] == "admit")


def deadlines(services: Services) -> tuple[str, str, str]:
    first = say(services, "Noor", "My heritage fund bid is due on 14 March, no exceptions.", occurred_at=JANUARY,
                session_id="s1")  # fmt: skip
    pushed = say(services, "Noor", "Their portal went down, so my bid deadline was pushed back two weeks: 28 March.",
                 occurred_at=FEBRUARY, session_id="s2")  # fmt: skip
    last = say(services, "Noor", "Another email from them today. They extended my deadline again, to 4 April.",
               occurred_at=MARCH, session_id="s3")  # fmt: skip
    return first, pushed, last


def test_an_update_the_questions_words_do_not_reach_is_admitted_and_ranks_first(services: Services) -> None:
    _, pushed, last = deadlines(services)
    question = "When is the heritage fund bid due?"
    assert admit_trace(services, question)["updates"] == {last: pushed}
    assert recall(services, question).results[0].id == last


def test_for_a_question_about_the_past_nothing_more_is_admitted(services: Services) -> None:
    *_, last = deadlines(services)
    trace = admit_trace(services, "Before any delay, when was the heritage fund bid due?")
    assert "updates" not in trace and last in [d["id"] for d in trace["dropped"]]
