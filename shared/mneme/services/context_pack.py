"""The recall context pack: tiered disclosure cut to a token budget, never mid-body (Engram)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel


class PackItem(BaseModel):
    id: str
    kind: str
    scope: str
    label: str  # date or key, shown in the header and card
    body: str
    summary: str
    requires: list[str] = []


def estimate_tokens(text: str) -> int:
    """~4 characters per token: a conservative, model-free estimate."""
    return math.ceil(len(text) / 4)


def body_block(item: PackItem) -> str:
    header = f"### {item.id} [{item.kind}, {item.scope}, {item.label}]"
    requires = f"\nrequires: {', '.join(item.requires)}" if item.requires else ""
    return f"{header}{requires}\n{item.body.strip()}\n"


def card_line(item: PackItem) -> str:
    summary = " ".join(item.summary.split())
    if len(summary) > 160:
        summary = summary[:157].rstrip() + "…"
    return f"- {item.id} [{item.kind}, {item.scope}] {summary}"


@dataclass
class Pack:
    markdown: str
    expanded: list[str]
    cards: list[str]
    dropped: list[str]
    tokens: int


def build_pack(
    title: str,
    items: list[PackItem],
    expand_top: int,
    budget_tokens: int | None,
    already_loaded: list[str] | None = None,
) -> Pack:
    """Top `expand_top` as bodies, the rest as cards, then a `fetch:` line.

    Over budget: demote bodies to cards from the lowest-ranked up, then drop the lowest-ranked
    cards. Bodies are never cut.
    """
    expanded = [item.id for item in items[:expand_top]]
    kept = [item.id for item in items]
    dropped: list[str] = []

    def render() -> str:
        lines = [title, ""]
        if already_loaded:
            lines += [f"already loaded: {', '.join(already_loaded)}", ""]
        lines += [body_block(item) for item in items if item.id in expanded]
        cards = [card_line(item) for item in items if item.id in kept and item.id not in expanded]
        if cards:
            lines += [*cards, ""]
        fetchable = [i for i in kept if i not in expanded]
        if fetchable:
            lines.append(f"fetch: ids={','.join(fetchable)}")
        return "\n".join(lines).rstrip() + "\n"

    markdown = render()
    while budget_tokens is not None and estimate_tokens(markdown) > budget_tokens:
        if expanded:
            expanded.pop()
        elif kept:
            dropped.insert(0, kept.pop())
        else:
            break
        markdown = render()
    cards = [i for i in kept if i not in expanded]
    return Pack(markdown=markdown, expanded=expanded, cards=cards, dropped=dropped, tokens=estimate_tokens(markdown))
