"""For a question about the present, a statement that updates one of the best answers is admitted even when the
question's words do not reach it ("The grant application is due on 14 March" … "pushed back two weeks: ours is
28 March" … "Extended again, we now have until 4 April": the last shares no word with "When must the grant
application be in?" and its cosine is under the admission floor).

The admit stage drops a candidate that matches no term of the query and is not near enough to it by vector; an
update of an answer rarely repeats the question's words. Among the candidates it would drop, an episode said after
one of the REACH best admitted answers that `changes.update_reason` reads as an update of it is kept (trace
`admit.updates`: its id and the answer it updates). The time stage then ranks it as it ranks any update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mneme.language import changes, questions
from mneme.language.text import meaningful_words
from mneme.models import Episode
from mneme.records import Fact
from mneme.services.recall.run import pair_cosine, stored_vectors
from mneme.services.recall.time import position, truth_mode

if TYPE_CHECKING:
    from mneme.services.recall.run import Candidate, Run

REACH = 3  # the best admitted answers whose updates are looked for among the candidates not admitted
NEWS = 20  # ... among the best-scored of those said after one of them


def updating(run: Run, passed: list[Candidate], rejected: list[Candidate]) -> dict[str, str]:
    """Of `rejected`, the episodes that update one of the REACH best of `passed`: id -> the id it updates."""
    if not rejected or truth_mode(run) != "present":
        return {}
    best = [c for c in sorted(passed, key=_rank) if _statement(c)][:REACH]
    if not best:
        return {}
    since = min(position(c.record) for c in best)  # type: ignore[arg-type]
    after = sorted((c for c in rejected if isinstance(c.record, Episode) and position(c.record) > since), key=_rank)
    told = [(c, changes.said(c.record)) for c in after[:NEWS]]  # type: ignore[arg-type]
    news = [(c, said) for c, said in told if changes.may_update(said, present=True)]
    if not news:
        return {}
    query = run.request.query or ""
    about, asked, words = questions.people(query), questions.question_slots(query), frozenset(meaningful_words(query))
    vectors = stored_vectors(run, best + [c for c, _ in news])
    found: dict[str, str] = {}
    for answer in best:
        first = changes.said(answer.record)  # type: ignore[arg-type]
        if not changes.may_be_updated(first):
            continue
        for later, then in news:
            if later.id in found or position(later.record) <= position(answer.record):  # type: ignore[arg-type]
                continue
            similarity = pair_cosine(vectors, answer, later)
            reason = changes.update_reason(first, then, similarity, present=True, asked=asked, about=about, words=words)
            if reason is not None:
                found[later.id] = answer.id
    return found


def _rank(candidate: Candidate) -> tuple[float, str]:
    return (-candidate.score, candidate.id)


def _statement(candidate: Candidate) -> bool:
    record = candidate.record
    return isinstance(record, Episode) or (isinstance(record, Fact) and record.tier == "raw")
