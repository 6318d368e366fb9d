"""`mneme episodes` and `mneme facts`: list, show and forget what agents wrote; correct a fact."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from mneme.cli.command import Context, command, group
from mneme.cli.output import emit_json
from mneme.errors import InvalidInput


def metadata_filter(pairs: list[str] | None) -> dict[str, Any] | None:
    """`KEY=VALUE` pairs as a metadata filter: a key given twice accepts either value; a value that reads as a
    JSON number or boolean is that (`--where vip=true`), else the text."""
    if not pairs:
        return None
    accepted: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--where takes KEY=VALUE, not {pair!r}", code="invalid_filter")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        accepted.setdefault(key, []).append(value if isinstance(value, bool | int | float) else text)
    return {key: values[0] if len(values) == 1 else values for key, values in accepted.items()}


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    names = ("session_id", "since", "until", "cursor", "limit")
    found = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    if (where := metadata_filter(args.where)) is not None:
        found["metadata"] = where
    return found


def cmd_episodes_list(ctx: Context) -> int:
    page = ctx.client(roles=("admin",)).list_episodes(ctx.args.scope, **_filters(ctx.args))
    if ctx.args.json:
        emit_json(page)
        return 0
    for episode in page.episodes:
        when = episode.occurred_at.strftime("%Y-%m-%d %H:%M")
        session = f"  session {episode.session_id}" if episode.session_id else ""
        print(f"{episode.id}  {episode.scope}  {when}{session}")
        print(textwrap.indent(textwrap.shorten(" ".join(episode.content.split()), 300, placeholder=" …"), "    "))
        if episode.metadata:
            print(f"    metadata: {json.dumps(episode.metadata, ensure_ascii=False)[:200]}")
    _more(page.episodes, page.next_cursor, "episodes")
    return 0


def cmd_facts_list(ctx: Context) -> int:
    page = ctx.client(roles=("admin",)).list_facts(ctx.args.scope, **_filters(ctx.args))
    if ctx.args.json:
        emit_json(page)
        return 0
    for fact in page.facts:
        triple = " / ".join(part for part in (fact.entity, fact.property, fact.value) if part)
        state = fact.status + (", stale" if fact.stale else "")
        print(f"{fact.id}  {fact.scope}  {fact.tier}  {state}  v{fact.version}  {triple}")
        print(textwrap.indent(textwrap.shorten(fact.summary, 300, placeholder=" …"), "    "))
    _more(page.facts, page.next_cursor, "facts")
    return 0


def _more(items: list[Any], cursor: str | None, what: str) -> None:
    if not items:
        print(f"no {what}")
    if cursor:
        print(f"\nmore: --cursor {cursor}")


def cmd_episode_show(ctx: Context) -> int:
    emit_json(ctx.client(roles=("admin",)).get_episode(ctx.args.id))
    return 0


def cmd_fact_show(ctx: Context) -> int:
    emit_json(ctx.client(roles=("admin",)).get_fact(ctx.args.id))
    return 0


def cmd_episode_forget(ctx: Context) -> int:
    forgot = ctx.client(roles=("admin",)).forget_episode(ctx.args.id, reason=ctx.args.reason)
    return _forgot(ctx, forgot)


def cmd_fact_forget(ctx: Context) -> int:
    return _forgot(ctx, ctx.client(roles=("admin",)).forget_fact(ctx.args.id, reason=ctx.args.reason))


def _forgot(ctx: Context, forgot: Any) -> int:
    if ctx.args.json:
        emit_json(forgot)
        return 0
    print(f"forgot {forgot.kind} {forgot.id}")
    for settled in forgot.settled:
        print(f"  fact {settled.id}: {settled.action}")
    return 0


def cmd_fact_correct(ctx: Context) -> int:
    args = ctx.args
    changes = {name: getattr(args, name) for name in ("summary", "entity", "property", "value", "confidence")}
    changes = {name: value for name, value in changes.items() if value is not None}
    fact = ctx.client(roles=("admin",)).correct_fact(args.id, args.version, reason=args.reason, **changes)
    emit_json(fact)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    for kind, lister, shower, forgetter in (
        ("episodes", cmd_episodes_list, cmd_episode_show, cmd_episode_forget),
        ("facts", cmd_facts_list, cmd_fact_show, cmd_fact_forget),
    ):
        one = kind[:-1]
        actions = group(
            sub,
            kind,
            f"list, show and forget {kind} (what agents wrote{'' if one == 'episode' else ' and consolidation drew'})",
            f"""
mneme {kind} list --scope root.acme --where user=alice --limit 20
mneme {kind} show {"ep" if one == "episode" else "fa"}_1c2…
mneme {kind} forget {"ep" if one == "episode" else "fa"}_1c2… --reason "the user asked"
""",
        )
        example = f"mneme {kind} list --scope root.acme --since 2026-03-01T00:00:00Z --json"
        listing = command(actions, "list", lister, common, help=f"{kind} under a scope, newest first", examples=example)
        listing.add_argument("--scope", default="root", help="this subtree (default root)")
        if one == "episode":
            listing.add_argument("--session-id")
        listing.add_argument("--since", metavar="ISO8601")
        listing.add_argument("--until", metavar="ISO8601")
        listing.add_argument("--where", action="append", metavar="KEY=VALUE", help="metadata (repeat a key: any)")
        listing.add_argument("--cursor", help="the `more:` cursor of the previous page")
        listing.add_argument("--limit", type=int, help="1..200 (default 50)")
        listing.add_argument("--json", action="store_true")
        show = command(actions, "show", shower, common, help=f"one {one} (JSON)", examples=f"mneme {kind} show ID")
        show.add_argument("id")
        forget = command(actions, "forget", forgetter, common, help=f"forget one {one} for good",
                         examples=f'mneme {kind} forget ID --reason "asked to"')  # fmt: skip
        forget.add_argument("id")
        forget.add_argument("--reason", help="kept with who forgot it and when")
        forget.add_argument("--json", action="store_true")
    correct = command(
        actions,
        "correct",
        cmd_fact_correct,
        common,
        help="correct a fact at its version (the history keeps each correction)",
        examples='mneme facts correct fa_1c2… --version 1 --value Premium --reason "upgraded by phone"',
    )
    correct.add_argument("id")
    correct.add_argument("--version", type=int, required=True, help="the version you read (`facts show`)")
    for name in ("summary", "entity", "property", "value"):
        correct.add_argument(f"--{name}")
    correct.add_argument("--confidence", type=float, help="0..1")
    correct.add_argument("--reason", help="kept in the history")
