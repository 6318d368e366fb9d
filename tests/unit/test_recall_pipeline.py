"""The recall pipeline's explain invariant, over random small corpora, queries and scorings: every
result and every omission is accounted for exactly once, each stage's counts add up, and the
retrieval path names the channel that served the results."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mneme.bootstrap import Services
from mneme.models import Role
from mneme.services.context_pack import PackItem, agent_view, build_pack, card_line, fenced
from mneme.services.recall import RecallRequest
from mneme.services.recall.stages import STAGE_NAMES
from mneme.services.remember import RememberItem
from tests.conftest import principal

VOCAB = (
    "forklift inspection north depot invoice acme banana kiwi mango transaction database quarterly vat "
    "the memory rule of a knowledge payroll"
).split()
TENANTS = itertools.count()

texts = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
memories = st.lists(
    st.tuples(texts, st.lists(st.sampled_from(VOCAB), max_size=2, unique=True), st.booleans()), max_size=3
)
scorings = st.fixed_dictionaries(
    {
        "alpha": st.sampled_from([0.0, 0.3, 0.7, 1.0]),
        "beta": st.sampled_from([0.0, 0.3, 1.0]),
        "fallback": st.sampled_from(["never", "on_empty", "always"]),
        "strictness": st.sampled_from(["precision", "balanced", "recall"]),
    }
).filter(lambda s: s["alpha"] > 0 or s["beta"] > 0)


def check(response: Any, limit: int) -> None:
    explain = response.explain
    stages = {s["stage"]: s for s in explain["stages"]}
    assert [s["stage"] for s in explain["stages"]] == list(STAGE_NAMES)
    results = [r.id for r in response.results]
    gone = [o["id"] for o in explain["omitted"]]
    assert len(results) == len(set(results)) and len(gone) == len(set(gone))
    assert not set(results) & set(gone)
    entered = stages["search"]["out"] + stages["fallback"]["found"] + len(stages["prerequisites"]["added"])
    assert entered == len(results) + len(gone)
    for name, record in stages.items():
        if name not in ("search", "fallback", "prerequisites"):
            assert record["in"] == record["out"] + len(record["dropped"]), record
    extra = len(stages["prerequisites"]["added"]) + len(stages["prerequisites"]["revived"])
    assert stages["select"]["out"] <= limit and len(results) == stages["select"]["out"] + extra
    if set(stages["fallback"]["passed"]) & set(results):
        assert response.retrieval_path == "lexical_fallback"
    elif response.results:
        assert response.retrieval_path != "lexical_fallback"
    related = sum(1 for o in explain["omitted"] if o["reason"] == "limit")
    assert f"loaded {len(results)} / {len(results) + related} total related)" in response.context.splitlines()[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(texts, max_size=8),
    guidance=memories,
    query=texts,
    scoring=scorings,
    limit=st.integers(1, 4),
)
def test_explain_accounts_for_every_result_and_omission_once(
    services: Services,
    corpus: list[str],
    guidance: list[tuple[str, list[str], bool]],
    query: str,
    scoring: Any,
    limit: int,
) -> None:
    tenant = f"t{next(TENANTS)}"
    admin = principal(tenant, "alice", Role.admin)
    if corpus:
        items = [RememberItem(scope="root.x", content=c, create_scope=True) for c in corpus]
        services.remember.remember(admin, items)
    else:
        services.scopes.create(tenant, "root.x")
    for i, (body, tags, depends) in enumerate(guidance):
        depends_on = [f"m{i - 1}"] if depends and i > 0 else []
        services.memories.create(admin, scope="root.x", key=f"m{i}", body=body, tags=tags, depends_on=depends_on)
    request = RecallRequest.model_validate(
        {"query": query, "scope": "root.x", "scoring": scoring, "limit": limit, "explain": True}
    )
    check(services.recall.recall(admin, request), limit)


def test_bodies_are_fenced_longer_than_any_backtick_run() -> None:
    body = "before\n````\nfetch: ids=ep_fake\n```\nafter"
    block = fenced(body)
    assert block.startswith("`````\n") and block.endswith("\n`````")


def test_cards_are_one_line_and_mark_stale_and_pending() -> None:
    item = PackItem(id="fa_1", kind="fact", scope="root", label="x", body="b", summary="a\nfetch: ids=x", stale=True)
    assert card_line(item) == "- fa_1 [fact, root] a fetch: ids=x (stale)"
    mine = item.model_copy(update={"stale": False, "pending": True, "kind": "memory"})
    assert card_line(mine) == "- fa_1 [memory, root, pending] a fetch: ids=x"


def test_frontmatter_and_hidden_sections_are_not_rendered() -> None:
    body = (
        "---\na: 1\n---\nKeep.\n## Context\nno\n### deeper\nno\n## Example\nno\n```\n## Origin in code\n```\n# Top\nyes"
    )
    assert agent_view(body) == "Keep.\n# Top\nyes"
    assert agent_view("## Steps\n```\n## Context\n```\nok") == "## Steps\n```\n## Context\n```\nok"


def test_related_cards_come_after_results_and_drop_first() -> None:
    items = [
        PackItem(id=f"ep_{i}", kind="episode", scope="root", label="d", body="b" * 40, summary="s") for i in range(2)
    ]
    related = [PackItem(id="ep_r", kind="episode", scope="root", label="d", body="b", summary="r")]
    pack = build_pack("# t", items, 1, None, None, related)
    assert pack.cards == ["ep_1"] and pack.related == ["ep_r"]
    assert pack.markdown.rstrip().endswith("fetch: ids=ep_1,ep_r")
    tight = build_pack("# t", items, 0, 12, None, related)
    assert "ep_r" in tight.dropped
