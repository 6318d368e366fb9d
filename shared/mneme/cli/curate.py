"""Curation and administration: scopes, layers, memories, keys."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from mneme.cli.command import Context, command, group
from mneme.cli.memory import read_text
from mneme.cli.output import emit_json, err
from mneme.errors import InvalidInput

if TYPE_CHECKING:
    from mneme_sdk.models import MemoryView


# -- scopes ------------------------------------------------------------------------------------------


def cmd_scopes(ctx: Context) -> int:
    args = ctx.args
    client = ctx.client()
    if args.action == "list":
        scopes = client.list_scopes(args.path)
        if args.json:
            emit_json(scopes)
            return 0
        base = scopes[0].depth if scopes else 0
        for scope in scopes:
            print("  " * (scope.depth - base) + scope.path)
        return 0
    if args.action == "create":
        created = client.create_scope(args.path, parents=args.parents)
        if args.json:
            emit_json(created)
        else:
            print(f"created {created.path} (scope_id {created.scope_id})")
        return 0
    renamed = client.rename_scope(args.path, args.new_path)
    if args.json:
        emit_json(renamed)
    else:
        print(f"renamed {renamed.alias} → {renamed.path}; the old path keeps resolving as an alias")
    return 0


# -- layers ------------------------------------------------------------------------------------------


def _layer(text: str) -> tuple[int, str]:
    depth, sep, name = text.partition("=")
    if not sep or not depth.isdigit() or not name:
        raise argparse.ArgumentTypeError(f"write DEPTH=NAME, e.g. 1=clients (got {text!r})")
    return int(depth), name


def cmd_layers(ctx: Context) -> int:
    client = ctx.client()
    layers = client.get_layers() if ctx.args.action == "get" else client.put_layers(dict(ctx.args.layers))
    if ctx.args.json:
        emit_json({str(depth): name for depth, name in sorted(layers.items())})
    elif not layers:
        print("no layers named (mneme layers set 1=clients 2=services)")
    else:
        for depth, name in sorted(layers.items()):
            print(f"{depth}  {name}")
    return 0


# -- memories ----------------------------------------------------------------------------------------


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in ("summary", "confidence", "valid_until", "review_due"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    for name in ("tags", "triggers", "depends_on"):
        value = _split(getattr(args, name))
        if value is not None:
            fields[name] = value
    return fields


def cmd_memories(ctx: Context) -> int:
    args = ctx.args
    client = ctx.client()
    memory: MemoryView  # archive answers without the body
    if args.action == "create":
        if (args.scope is None) == (args.tag is None):
            raise InvalidInput("give exactly one of --scope PATH or --tag LAYER=VALUE (or LAYER=*)")
        body = read_text(args.body, args.file, "body")
        memory = client.create_memory(args.key, body, scope=args.scope, tag=args.tag, **_fields(args))
        verb = "created"
    elif args.action == "edit":
        changes = _fields(args)
        if args.body is not None or args.file is not None:
            changes["body"] = read_text(args.body, args.file, "body")
        if not changes:
            raise InvalidInput("nothing to change: give --body, --file or a field option")
        memory = client.edit_memory(args.memory_id, version=args.version, **changes)
        verb = "edited"
    else:
        memory = client.archive_memory(args.memory_id)
        verb = "archived"
    if args.json:
        emit_json(memory)
        return 0
    print(f"{verb} {memory.key} → {memory.target}: {memory.status}, version {memory.version}")
    print(memory.memory_id)
    if memory.status == "pending" and verb != "archived":
        err("pending: visible only to you until an approver publishes it")
    return 0


def _memory_fields(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", metavar="PATH", help="read the body from a file ('-': stdin)")
    parser.add_argument("--summary", help="one line shown when the memory is a card")
    parser.add_argument("--tags", metavar="A,B", help="comma-separated")
    parser.add_argument("--triggers", metavar="A,B", help="comma-separated")
    parser.add_argument("--confidence", type=float, help="0..1")
    parser.add_argument("--valid-until", metavar="ISO8601", help="left out of bundles after this time")
    parser.add_argument("--review-due", metavar="ISO8601")
    parser.add_argument("--depends-on", metavar="KEY,KEY", help="keys of memories this one relies on")
    parser.add_argument("--json", action="store_true")


# -- keys --------------------------------------------------------------------------------------------


def cmd_keys(ctx: Context) -> int:
    args = ctx.args
    if ctx.config.remote and "tenant" in ctx.config.sources:
        err("note: in remote mode the tenant is the API key's; --tenant is ignored")
    client = ctx.client()
    if args.action == "create":
        created = client.create_key(args.principal, _split(args.roles) or [])
        if args.json:
            emit_json(created)
            return 0
        print(
            f"key_id {created.key_id} tenant {created.tenant} principal {created.principal} "
            f"roles {','.join(created.roles)}",
            file=sys.stderr,
        )
        print(created.api_key)
        print("store this key now: it is not shown again", file=sys.stderr)
    elif args.action == "list":
        keys = client.list_keys()
        if args.json:
            emit_json(keys)
            return 0
        for key in keys:
            state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "active"
            print(f"{key.key_id}  {key.principal:<24} {','.join(key.roles):<28} {state}")
    else:
        client.revoke_key(args.key_id)
        print(f"revoked {args.key_id}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    scopes = group(
        sub,
        "scopes",
        "list, create and rename scopes",
        "mneme scopes list\nmneme scopes create root.acme.vat --parents\nmneme scopes rename root.acme root.acme-ltd",
    )
    listing = command(
        scopes,
        "list",
        cmd_scopes,
        common,
        help="list a scope and its descendants",
        examples="mneme scopes list\nmneme scopes list root.acme --json",
    )
    listing.add_argument("path", nargs="?", default="root")
    listing.add_argument("--json", action="store_true")
    create = command(
        scopes,
        "create",
        cmd_scopes,
        common,
        help="create a scope (admin)",
        examples="mneme scopes create root.acme\nmneme scopes create root.acme.vat --parents",
    )
    create.add_argument("path")
    create.add_argument("--parents", action="store_true", help="create missing ancestors too")
    create.add_argument("--json", action="store_true")
    rename = command(
        scopes,
        "rename",
        cmd_scopes,
        common,
        help="rename a scope's last segment; the old path stays as an alias (admin)",
        examples="mneme scopes rename root.acme root.acme-ltd",
    )
    rename.add_argument("path")
    rename.add_argument("new_path")
    rename.add_argument("--json", action="store_true")

    layers = group(
        sub, "layers", "name the depths of the scope tree", "mneme layers set 1=clients 2=services\nmneme layers get"
    )
    get = command(layers, "get", cmd_layers, common, help="show the layer names", examples="mneme layers get")
    get.add_argument("--json", action="store_true")
    put = command(
        layers,
        "set",
        cmd_layers,
        common,
        help="replace the layer names (admin)",
        examples="mneme layers set 1=clients 2=services",
    )
    put.add_argument("layers", nargs="+", type=_layer, metavar="DEPTH=NAME")
    put.add_argument("--json", action="store_true")

    memories = group(
        sub,
        "memories",
        "create, edit and archive curated memories",
        'mneme memories create --key tone --scope root "Be brief."\n'
        "mneme memories edit 6f1c… --file tone.md --version 1\nmneme memories archive 6f1c…",
    )
    mcreate = command(
        memories,
        "create",
        cmd_memories,
        common,
        help="create a scoped or tagged memory (a writer's is pending until approved)",
        examples="""
mneme memories create --key vat-policy --scope root.acme.vat "Acme uses the flat-rate VAT scheme."
mneme memories create --key etiquette --tag clients=* --file etiquette.md
mneme memories create --key flat-rate --tag services=vat --summary "Check eligibility in April" < rule.md
""",
    )
    mcreate.add_argument("body", nargs="?", help="Markdown body ('-' or piped input: stdin)")
    mcreate.add_argument("--key", required=True, help="stable key, unique per target")
    mcreate.add_argument("--scope", help="attach to this scope path")
    mcreate.add_argument("--tag", help="attach to a layer: LAYER=VALUE or LAYER=*")
    _memory_fields(mcreate)
    edit = command(
        memories,
        "edit",
        cmd_memories,
        common,
        help="change a memory's body or fields",
        examples="""
mneme memories edit 6f1c… --body "Acme left the flat-rate scheme in 2026." --version 1
mneme memories edit 6f1c… --tags vat,scheme --review-due 2027-04-01T00:00:00Z
""",
    )
    edit.add_argument("memory_id")
    edit.add_argument("--body", help="the new Markdown body")
    edit.add_argument("--version", type=int, help="fail with 409 unless the memory is at this version")
    _memory_fields(edit)
    archive = command(
        memories,
        "archive",
        cmd_memories,
        common,
        help="archive a memory (it leaves bundles and recall)",
        examples="mneme memories archive 6f1c…",
    )
    archive.add_argument("memory_id")
    archive.add_argument("--json", action="store_true")

    keys = group(
        sub,
        "keys",
        "create, list and revoke API keys (admin)",
        "mneme keys create --principal bot --roles reader,writer\nmneme keys list\nmneme keys revoke 3f9a0c1b2d4e5f60",
    )
    kcreate = command(
        keys,
        "create",
        cmd_keys,
        common,
        help="create a key and print it once",
        examples="""
mneme keys create --principal bot --roles reader,writer
mneme keys create --tenant acme --principal ci --roles admin
""",
    )
    kcreate.add_argument("--principal", required=True, help="who the key acts as")
    kcreate.add_argument("--roles", required=True, help="comma-separated: reader,writer,approver,admin")
    kcreate.add_argument("--json", action="store_true")
    klist = command(
        keys, "list", cmd_keys, common, help="list a tenant's keys (never the secrets)", examples="mneme keys list"
    )
    klist.add_argument("--json", action="store_true")
    revoke = command(
        keys, "revoke", cmd_keys, common, help="revoke a key by id", examples="mneme keys revoke 3f9a0c1b2d4e5f60"
    )
    revoke.add_argument("key_id")
