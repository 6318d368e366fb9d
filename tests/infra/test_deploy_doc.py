"""docs/deploy.md against the synthesized template: settings, default models and who invokes them."""

from __future__ import annotations

import re
from pathlib import Path

from infra.mneme_infra.config import InfraConfig
from tests.infra.synth import Synth, as_list

DOC = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()


def section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| ---")][1:]  # fmt: skip


def test_every_setting_is_documented_and_every_documented_setting_exists() -> None:
    documented = set(re.findall(r"`mneme:([a-z0-9_]+)`", section("Configuration")))
    documented = {name.removesuffix("_") for name in documented}  # `…_limit` / `_burst_limit` shorthand
    assert documented == set(InfraConfig.model_fields)


def test_the_documented_models_are_the_defaults_and_exactly_who_may_invoke_them(default: Synth) -> None:
    rows = table_rows(section("What a platform team must provide").split("**Quotas**")[0])
    config = InfraConfig()
    documented = {row[1].strip("`"): {f.strip() for f in row[2].split(",")} for row in rows}
    assert documented.keys() == {config.embedding_model_id, config.reasoner_model_id}
    for model_id, functions in documented.items():
        invokers = {
            name for name in default.function_ids()
            if any(model_id.removeprefix("global.") in str(s["Resource"]) for s in default.role_statements(name)
                   if "bedrock:InvokeModel" in as_list(s["Action"]))
        }  # fmt: skip
        assert invokers == functions, model_id


def test_the_documented_function_count_and_failures_queue_match_the_template(default: Synth) -> None:
    text = section("What a platform team must provide")
    counts = {"Nine": 9, "Ten": 10}
    (word,) = re.findall(r"(\w+) functions share the account's pool", text)
    assert counts[word] == len(default.function_ids())
    assert "ScheduledFailures" in text and any("ScheduledFailures" in lid for lid in default.of_type("AWS::SQS::Queue"))


def test_the_throttling_figures_are_what_the_limits_add_up_to() -> None:
    """docs/deploy.md sizes Bedrock and OpenSearch from these: each figure is `throttling.ceilings`'s."""
    from infra.mneme_infra.throttling import ceilings
    from mneme.http.routes import PAGES, ROUTES

    limits = ceilings(InfraConfig(), ROUTES + PAGES)
    text = section("Throttling")
    rows = {row[0]: row[1] for row in table_rows(text.split("### What the limits add up to")[1])}
    assert rows["any one method, every caller"] == f"{limits.per_method:g}"
    assert rows["every authenticated method together"] == f"{limits.authenticated:g}"
    assert rows["the public routes together"] == f"{limits.per_method * limits.public_methods:g}"
    methods = limits.keyed_methods + limits.public_methods
    flat = " ".join(text.split())
    assert f"the API's {methods} methods ({limits.keyed_methods} behind the authorizer" in flat
    assert f"{methods} × {limits.per_method:g} = {limits.methods_summed:,.0f}" in flat
    # the stage's limit is never called a bound on every caller together any more
    assert "every caller together" not in " ".join(DOC.split())
