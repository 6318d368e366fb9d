"""What agents do: remember, recall, retrieve."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mneme.cli.command import Context, command
from mneme.cli.output import Progress, emit_json, err
from mneme.errors import InvalidInput
from mneme.models import TIERS
from mneme_sdk.errors import MnemeError

if TYPE_CHECKING:
    from mneme_sdk.models import Remembered, Result


MAX_BATCH = 100


def read_text(value: str | None, file: str | None, what: str) -> str:
    """Text from an argument, a file, or stdin (`-`, or no argument with piped input)."""
    if value is not None and file is not None:
        raise InvalidInput(f"give the {what} as an argument or with --file, not both")
    if file is not None:
        return sys.stdin.read() if file == "-" else _read_file(file)
    if value == "-" or (value is None and not sys.stdin.isatty()):
        return sys.stdin.read()
    if value is None:
        raise InvalidInput(f"give the {what} as an argument, with --file, or on stdin")
    return value


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}", code="invalid_file") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text", code="invalid_file") from None


# -- remember ---------------------------------------------------------------------------------------


def _defaults(args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {"scope": args.scope}
    if args.create_scope:
        fields["create_scope"] = True
    for name in ("session_id", "tier", "idempotency_key", "occurred_at", "format"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    if args.metadata is not None:
        try:
            fields["metadata"] = json.loads(args.metadata)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"--metadata is not JSON: {e.msg}") from None
    return fields


def _jsonl_items(source: str, defaults: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, item) for each non-blank line. Flags fill fields a line leaves out; a line without
    an idempotency_key gets one derived from its content, so re-running an import writes nothing twice."""
    shared = {k: v for k, v in defaults.items() if k != "idempotency_key"}
    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")  # noqa: SIM115
    try:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidInput(f"line {number}: not JSON ({e.msg})", details={"line": number}) from None
            if not isinstance(item, dict):
                raise InvalidInput(f"line {number}: expected a JSON object", details={"line": number})
            merged = {**shared, **item}
            if "idempotency_key" not in merged:
                merged["idempotency_key"] = _content_key(merged)
            yield number, merged
    finally:
        if stream is not sys.stdin:
            stream.close()


def _content_key(item: dict[str, Any]) -> str:
    """An idempotency key from what the observation is (not from how to store it, e.g. create_scope)."""
    identity = {k: v for k, v in item.items() if k not in ("create_scope", "idempotency_key")}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return "jsonl:" + hashlib.sha256(canonical.encode()).hexdigest()[:40]


def _count_lines(source: str) -> int | None:
    if source == "-":
        return None
    with open(source, "rb") as f:
        return sum(1 for line in f if line.strip())


def _remember_jsonl(ctx: Context) -> int:
    from pydantic import ValidationError

    from mneme_sdk import invalid_input
    from mneme_sdk.models import RememberItem

    args = ctx.args
    client = ctx.client(principal="cli", roles=("admin",))
    try:
        total = _count_lines(args.jsonl)
    except OSError as e:
        raise InvalidInput(f"cannot read {args.jsonl}: {e.strerror}", code="invalid_file") from None
    progress = Progress("remember", total=total, quiet=ctx.quiet)
    results: list[Remembered] = []
    batch: list[RememberItem] = []
    lines: list[int] = []

    def flush() -> None:
        try:
            done = client.remember_batch(batch)
        except MnemeError as e:  # name the line, not the position in the batch
            where = e.details.get("item") if isinstance(e.details, dict) else None
            if isinstance(where, int) and 0 <= where < len(lines):
                e.message = f"line {lines[where]}: {e.message}"
            raise
        results.extend(done)
        progress.advance(len(done))
        batch.clear()
        lines.clear()

    try:
        for number, raw in _jsonl_items(args.jsonl, _defaults(args)):
            try:
                batch.append(RememberItem.model_validate(raw))
            except ValidationError as e:
                error = invalid_input(e)
                error.message = f"line {number}: {error.message}"
                error.details = {"line": number, "errors": error.details}
                raise error from None
            lines.append(number)
            if len(batch) == args.batch_size:
                flush()
        if batch:
            flush()
    except KeyboardInterrupt:
        progress.interrupted()
        err(
            f"interrupted after {len(results):,} stored items; run the same command again: "
            "stored lines are skipped (each line has an idempotency key)"
        )
        return 130
    except Exception:
        progress.interrupted()
        if results:
            err(f"{len(results):,} items before the failing batch are stored; re-running skips them")
        raise
    progress.done()
    return _print_remembered(ctx, results, single=False)


def cmd_remember(ctx: Context) -> int:
    args = ctx.args
    if args.jsonl is not None:
        if args.text is not None or args.file:
            raise InvalidInput("--jsonl reads items from a file or stdin: give no text and no --file with it")
        return _remember_jsonl(ctx)
    client = ctx.client(principal="cli", roles=("admin",))
    defaults = _defaults(args)
    if args.file:
        if args.text is not None:
            raise InvalidInput("give the content as an argument or with --file, not both")
        items = [{**defaults, "content": _read_file(path)} for path in args.file]
        if len(items) > 1 and "idempotency_key" in defaults:
            raise InvalidInput("--idempotency-key names one item; drop it with several --file")
        results = client.remember_many(items, batch_size=args.batch_size)
        return _print_remembered(ctx, results, single=len(items) == 1)
    content = read_text(args.text, None, "content")
    result = client.remember(**{**defaults, "content": content})
    return _print_remembered(ctx, [result], single=True)


def _print_remembered(ctx: Context, results: list[Remembered], *, single: bool) -> int:
    if ctx.args.json:
        emit_json(results[0] if single else results)
        return 0
    if single:
        r = results[0]
        note = "" if r.created else " (already stored: this was a retry)"
        if "embedding_deferred" in r.warnings:
            note += " (found by its words; by meaning once embedded: `mneme reindex --pending`)"
        elif not r.indexed:
            note += " (not searchable yet: `mneme reindex --pending`)"
        print(f"{r.episode_id}{note}")
        return 0
    new = sum(1 for r in results if r.created)
    deferred = sum(1 for r in results if "embedding_deferred" in r.warnings)
    unindexed = sum(1 for r in results if not r.indexed) - deferred
    line = f"remembered {len(results):,} items: {new:,} new, {len(results) - new:,} already stored"
    if deferred:
        line += f", {deferred:,} found by their words until embedded (`mneme reindex --pending`)"
    if unindexed:
        line += f", {unindexed:,} not searchable yet (`mneme reindex --pending`)"
    print(line)
    return 0


# -- recall ------------------------------------------------------------------------------------------


def cmd_recall(ctx: Context) -> int:
    args = ctx.args
    fields: dict[str, Any] = {"scope": args.scope, "limit": args.limit, "explain": args.explain}
    if args.query is not None:
        fields["query"] = args.query
    for name in ("kinds", "tiers", "since", "until", "session_id", "ids", "as_of"):
        value = getattr(args, name)
        if value:
            fields[name] = value
    scoring = {k: v for k, v in (("strictness", args.strictness), ("fallback", args.fallback)) if v is not None}
    if scoring:
        fields["scoring"] = scoring
    disclosure = {
        k: v for k, v in (("expand_top", args.expand_top), ("budget_tokens", args.budget_tokens)) if v is not None
    }
    if disclosure:
        fields["disclosure"] = disclosure
    if args.where:
        from mneme.cli.records import metadata_filter

        fields["metadata"] = metadata_filter(args.where)
    if args.query is None and not args.ids:
        raise InvalidInput("give a query (or --ids to fetch full bodies)")
    response = ctx.client(principal="cli", roles=("admin",)).recall(**fields)
    if args.json:
        emit_json(response)
        return 0
    if "scope_not_found" in response.warnings:
        print(f"warning: nothing is remembered under {args.scope} yet (no one has written there)", file=sys.stderr)
    if args.context:
        print(response.context)
    else:
        _print_results(response.results, args.scope, response.retrieval_path)
    if args.explain and response.explain is not None:
        print("\nexplain:")
        print(json.dumps(response.explain, indent=2, default=str))
    return 0


def _print_results(results: list[Result], scope: str, path: str) -> None:
    if not results:
        print(f"nothing found under {scope} ({path})")
        return
    print(f"{len(results)} result{'s' if len(results) != 1 else ''} under {scope} ({path})\n")
    width = len(str(len(results)))
    for rank, r in enumerate(results, start=1):
        when = r.occurred_at.strftime("%Y-%m-%d")
        label = r.key or r.id
        extra = f" | {r.status}" if r.status and r.status != "published" else ""
        print(f"{rank:>{width}}. {r.score:.3f}  {r.kind:<7} {r.scope}  {when}  {label}{extra}")
        indent = " " * (width + 2)
        if r.fact:
            triple = " / ".join(str(r.fact.get(k)) for k in ("entity", "property", "value") if r.fact.get(k))
            if triple:
                print(f"{indent}fact: {triple}")
        body = " ".join(r.content.split())
        for line in textwrap.wrap(textwrap.shorten(body, 400, placeholder=" …"), 96):
            print(f"{indent}{line}")
        if r.metadata:
            print(f"{indent}metadata: {json.dumps(r.metadata, ensure_ascii=False)[:200]}")
        print()


# -- retrieve ----------------------------------------------------------------------------------------


def cmd_retrieve(ctx: Context) -> int:
    client = ctx.client(principal="cli", roles=("admin",))
    if ctx.args.json:
        emit_json(client.retrieve_json(ctx.args.path))
    else:
        sys.stdout.write(client.retrieve(ctx.args.path))
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    remember = command(
        sub,
        "remember",
        cmd_remember,
        common,
        help="store observations (episodes): text, files, stdin or JSONL batches",
        examples="""
mneme remember "Acme moved its year end to 31 March." --scope root.acme --create-scope
echo "Call notes…" | mneme remember --scope root.acme --session-id call-42
mneme remember --file notes/2026-03-01.md --file notes/2026-03-02.md --scope root.acme
mneme remember --jsonl episodes.jsonl --scope root.acme        # one JSON object per line
#   {"content": "…", "scope": "root.acme.vat", "occurred_at": "2026-03-01T10:00:00Z", "metadata": {…}}
""",
    )
    remember.add_argument("text", nargs="?", help="the observation ('-' or piped input: read stdin)")
    remember.add_argument("--scope", default="root", help="scope path (default root; a JSONL line may set its own)")
    remember.add_argument("--file", action="append", metavar="PATH", help="one episode per file (repeatable)")
    remember.add_argument("--jsonl", metavar="PATH", help="RememberItem objects, one per line ('-': stdin)")
    remember.add_argument("--create-scope", action="store_true", help="create the scope (and parents) if missing")
    remember.add_argument("--session-id")
    remember.add_argument("--tier", choices=TIERS)
    remember.add_argument("--occurred-at", metavar="ISO8601", help="when it happened, with a timezone (e.g. …Z)")
    remember.add_argument("--metadata", metavar="JSON", help="a JSON object returned with every recall of it")
    remember.add_argument("--idempotency-key", help="a retry with the same key writes nothing twice")
    remember.add_argument("--format", choices=["text", "sttp"])
    remember.add_argument("--batch-size", type=int, default=MAX_BATCH, choices=range(1, MAX_BATCH + 1), metavar="N")
    remember.add_argument("--json", action="store_true", help="print the results as JSON")

    recall = command(
        sub,
        "recall",
        cmd_recall,
        common,
        help="search facts, episodes and memories under a scope, ranked",
        examples="""
mneme recall "when is Acme's year end?" --scope root.acme
mneme recall "VAT scheme" --kind fact --limit 5 --json
mneme recall "diet" --where user=alice --where user=bob   # only what holds this metadata
mneme recall "payroll" --context --budget-tokens 800      # the Markdown context pack an agent reads
mneme recall --ids fa_1c2… ep_9d8…                         # full bodies of cards from an earlier pack
""",
    )
    recall.add_argument("query", nargs="?")
    recall.add_argument("--scope", default="root", help="search this subtree (default root)")
    recall.add_argument("--limit", type=int, default=10, help="1..200 (default 10)")
    recall.add_argument("--kind", dest="kinds", action="append", choices=["fact", "episode", "memory"])
    recall.add_argument("--tier", dest="tiers", action="append", type=str.lower, choices=TIERS)
    recall.add_argument("--since", metavar="ISO8601")
    recall.add_argument("--until", metavar="ISO8601")
    recall.add_argument("--as-of", metavar="ISO8601", help="facts as they were valid then")
    recall.add_argument("--session-id")
    recall.add_argument("--where", action="append", metavar="KEY=VALUE", help="metadata (repeat a key: any of)")
    recall.add_argument("--strictness", choices=["precision", "balanced", "recall"])
    recall.add_argument("--fallback", choices=["never", "on_empty", "always"])
    recall.add_argument("--expand-top", type=int, help="bodies in full in the context pack, 0..50 (default 3)")
    recall.add_argument("--budget-tokens", type=int, help="cut the context pack to about this many tokens, 32..200000")
    recall.add_argument("--ids", nargs="+", metavar="ID", help="fetch these items' full bodies")
    recall.add_argument("--explain", action="store_true", help="show how the ranking was made")
    recall.add_argument("--context", action="store_true", help="print the Markdown context pack")
    recall.add_argument("--json", action="store_true", help="the whole response as JSON")

    retrieve = command(
        sub,
        "retrieve",
        cmd_retrieve,
        common,
        help="print the Markdown bundle of a scope's curated guidance",
        examples="mneme retrieve root.acme.vat\nmneme retrieve root.acme --json",
    )
    retrieve.add_argument("path")
    retrieve.add_argument("--json", action="store_true", help="blocks and Markdown as JSON")
