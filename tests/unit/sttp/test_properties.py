"""Hypothesis round trips: random canonical AST -> render -> strict parse -> the same AST."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from mneme.sttp import Node, episode_to_node, node_to_episode_fields, parse, render

from .strategies import nodes
from .support import both_profiles

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(nodes())
def test_render_then_strict_parse_gives_the_same_ast(node: Node) -> None:
    text = render(node)
    result = parse(text, "strict")
    assert result.diagnostics == []
    assert result.ok and result.strict_valid
    assert result.node == node
    assert render(result.node) == text


@SETTINGS
@given(nodes())
def test_tolerant_agrees_with_strict_on_canonical_text(node: Node) -> None:
    strict, tolerant = both_profiles(render(node))
    assert tolerant.node == strict.node == node and tolerant.strict_valid


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes())
def test_episode_fields_round_trip(node: Node) -> None:
    fields = node_to_episode_fields(node)
    assert isinstance(fields["text"], str)
    assert episode_to_node(**fields) == node
