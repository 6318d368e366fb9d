"""The recall context pack: tiered disclosure cut to a token budget, never mid-body (Engram).

Layout (every structural line starts at column 0 and is written only here):

    # recall: <query> (scope <path>, loaded N / M total related)
    already loaded: <ids>                                   (session delta only)
    ### <id> [<kind>, <scope>, <date or key>(, pending)(, earlier, since changed: see <id>, <date>)]
                                                            one per expanded body
    requires: <ids>                                         (a memory with depends_on)
    ````                                                    the body, fenced
    ...
    ````
    - <id> [<kind>, <scope>(, pending)(, earlier, …)] <summary>( (stale))  one card per other item
    fetch: ids=<ids>                                        every item not shown as a body

Stored text is fenced so it can never end its block or imitate a header, a card or a `fetch:` line:
a body sits in a code fence made of more backticks than any run of backticks in it (so no line of
the body can close it), and a card's summary is collapsed onto its card line. Frontmatter and the
`## Context`, `## Example` and `## Origin` sections are never rendered (Engram).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

HIDDEN_SECTIONS = frozenset({"context", "example", "origin"})
FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
BACKTICKS = re.compile(r"`+")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class PackItem(BaseModel):
    id: str
    kind: str
    scope: str
    label: str  # date or key, shown in the header and card
    body: str
    summary: str
    requires: list[str] = []
    pending: bool = False  # the caller's own unapproved work
    stale: bool = False  # a fact whose sources changed
    earlier: str | None = None  # a later statement updates it: "since changed: see <id>, <date>"


def estimate_tokens(text: str) -> int:
    """~4 characters per token: a conservative, model-free estimate."""
    return math.ceil(len(text) / 4)


def one_line(text: str) -> str:
    return " ".join(text.split())


def agent_view(body: str) -> str:
    """The body as an agent sees it: no frontmatter, no `## Context`, `## Example` or `## Origin`
    section (each runs to the next heading of level 2 or higher)."""
    text = FRONTMATTER.sub("", body, count=1)
    out: list[str] = []
    hidden = False
    fence: str | None = None
    for line in text.splitlines():
        opener = FENCE.match(line)
        if opener:  # headings inside a code block are not sections
            mark = opener.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
        elif fence is None and (heading := HEADING.match(line)) and len(heading.group(1)) <= 2:
            hidden = len(heading.group(1)) == 2 and heading.group(2).strip().lower() in HIDDEN_SECTIONS
        if not hidden:
            out.append(line)
    return "\n".join(out).strip()


def fenced(body: str) -> str:
    """The body inside a backtick fence longer than any backtick run it contains."""
    longest = max((len(run) for run in BACKTICKS.findall(body)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}\n{body}\n{mark}"


def _tags(item: PackItem, *parts: str) -> str:
    marks = [*(["pending"] if item.pending else []), *([f"earlier, {item.earlier}"] if item.earlier else [])]
    return ", ".join([*(one_line(p) for p in parts), *(one_line(m) for m in marks)])


def body_block(item: PackItem) -> str:
    header = f"### {item.id} [{_tags(item, item.kind, item.scope, item.label)}]"
    requires = f"\nrequires: {', '.join(item.requires)}" if item.requires else ""
    return f"{header}{requires}\n{fenced(agent_view(item.body))}\n"


def card_line(item: PackItem) -> str:
    summary = one_line(agent_view(item.summary))
    if len(summary) > 160:
        summary = summary[:157].rstrip() + "…"
    stale = " (stale)" if item.stale else ""
    return f"- {item.id} [{_tags(item, item.kind, item.scope)}] {summary}{stale}"


@dataclass
class Pack:
    markdown: str
    expanded: list[str]
    cards: list[str]
    related: list[str]
    dropped: list[str]
    tokens: int


def build_pack(
    title: str | Callable[[int], str],
    items: list[PackItem],
    expand_top: int,
    budget_tokens: int | None,
    already_loaded: list[str] | None = None,
    related: list[PackItem] | None = None,
) -> Pack:
    """Top `expand_top` as bodies, the rest as cards, then up to 5 related (omitted) candidates as
    cards, then a `fetch:` line.

    Over budget: demote bodies to cards from the lowest-ranked up, then drop the lowest-ranked
    cards (related cards first), then the lowest-ranked ids of the `fetch:` line. Bodies are never cut.
    A dropped card's id stays on the `fetch:` line while it fits, and a `title` given as a function is
    written with the number of `items` the pack still shows.
    """
    every = [*items, *(related or [])]
    expanded = [item.id for item in items[:expand_top]]
    kept = [item.id for item in every]
    dropped: list[str] = []
    unlisted = 0  # the lowest-ranked dropped ids left off the fetch line too, when even it is over budget

    def render() -> str:
        shown = sum(item.id in kept for item in items)
        lines = [one_line(title(shown) if callable(title) else title), ""]
        if already_loaded:
            lines += [f"already loaded: {', '.join(already_loaded)}", ""]
        lines += [body_block(item) for item in items if item.id in expanded]
        cards = [card_line(item) for item in every if item.id in kept and item.id not in expanded]
        if cards:
            lines += [*cards, ""]
        fetchable = [*(i for i in kept if i not in expanded), *dropped]
        fetchable = fetchable[: len(fetchable) - unlisted]
        if fetchable:
            lines.append(f"fetch: ids={','.join(fetchable)}")
        return "\n".join(lines).rstrip() + "\n"

    markdown = render()
    while budget_tokens is not None and estimate_tokens(markdown) > budget_tokens:
        if expanded:
            expanded.pop()
        elif kept:
            dropped.insert(0, kept.pop())
        elif unlisted < len(dropped):
            unlisted += 1
        else:
            break
        markdown = render()
    related_ids = {item.id for item in related or []}
    cards = [i for i in kept if i not in expanded and i not in related_ids]
    return Pack(
        markdown=markdown,
        expanded=expanded,
        cards=cards,
        related=[i for i in kept if i in related_ids],
        dropped=dropped,
        tokens=estimate_tokens(markdown),
    )
