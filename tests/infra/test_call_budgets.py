"""R8: a Bedrock or OpenSearch brownout must end in a degraded answer, not in the function's timeout (a 502
at the gateway). Each function's clients get timeouts and retries whose worst case fits its timeout."""

from __future__ import annotations

import pytest

from infra.mneme_infra.specs import SPECS, call_budget
from mneme.bootstrap import build_embedder, build_index
from mneme.settings import BedrockEmbedderSettings, OpenSearchIndex, Settings
from tests.infra.synth import Synth


def test_every_search_or_embedding_function_gets_bounded_clients(default: Synth) -> None:
    for name, spec in SPECS.items():
        env = default.function(name)["Environment"]["Variables"]
        if not spec.uses & {"embedder", "index_read", "index_write"}:
            continue
        budget = call_budget(spec)
        assert env["MNEME_EMBEDDER__TIMEOUT_SECONDS"] == str(budget.bedrock_read_seconds), name
        assert env["MNEME_EMBEDDER__MAX_ATTEMPTS"] == str(budget.bedrock_attempts), name
        assert env["MNEME_INDEX__TIMEOUT_SECONDS"] == str(budget.search_timeout_seconds), name
        assert env["MNEME_INDEX__MAX_RETRIES"] == str(budget.search_retries), name
        # the request's critical path in the worst case (each client exhausting its retries) fits the timeout
        assert budget.worst_case_seconds(spec) < spec.timeout_seconds, (name, budget)


def test_recall_and_remember_worst_cases(default: Synth) -> None:
    """recall: embed the query (2 x (1 + 2) s + 1 s backoff) then the vector search (2 x 2 s) = 11 s < 15 s;
    the text search runs meanwhile. remember: embed (2 x (1 + 3) + 1 = 9 s), the lookup of older copies
    (2 x 2 = 4 s), the bulk write (7.5 s waiting for a new index, then one timed-out call: 2 x 2 s) = 24.5 s < 25 s."""
    assert call_budget(SPECS["recall"]).worst_case_seconds(SPECS["recall"]) == 11
    assert call_budget(SPECS["remember"]).worst_case_seconds(SPECS["remember"]) == 24.5


def test_settings_read_the_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"MNEME_EMBEDDER__KIND": "bedrock", "MNEME_EMBEDDER__TIMEOUT_SECONDS": "2",
           "MNEME_EMBEDDER__MAX_ATTEMPTS": "2", "MNEME_INDEX__KIND": "opensearch", "MNEME_INDEX__ENDPOINT": "x",
           "MNEME_INDEX__TIMEOUT_SECONDS": "2", "MNEME_INDEX__MAX_RETRIES": "1"}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert isinstance(settings.embedder, BedrockEmbedderSettings) and isinstance(settings.index, OpenSearchIndex)
    assert (settings.embedder.timeout_seconds, settings.embedder.max_attempts) == (2, 2)
    assert (settings.index.timeout_seconds, settings.index.max_retries) == (2, 1)
    embedder = build_embedder(settings)
    assert (embedder.read_timeout, embedder.max_attempts) == (2, 2)  # type: ignore[attr-defined]
    index = build_index(settings, 1024)
    connection = index.client.transport.connection_pool.connections[0]  # type: ignore[attr-defined]
    assert connection.timeout == 2 and index.client.transport.max_retries == 1  # type: ignore[attr-defined]
