"""curate: scopes, layers, curated memories and API keys."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from mneme import bootstrap
from mneme.http import console
from mneme.http.api import build_resolver, caller, json_response
from mneme.http.lambda_entry import lambda_handler
from mneme.http.schemas import (
    MAX_PAGE,
    CreateKeyRequest,
    CreateMemoryRequest,
    CreateScopeRequest,
    DecisionRequest,
    DraftRequest,
    EditMemoryRequest,
    LayersRequest,
    MemoryView,
    NoBody,
    PublishRequest,
    QueryLimit,
    RejectRequest,
    RenameScopeRequest,
)
from mneme.models import Memory, Revision, Role
from mneme.services.curation.memories import tag_label
from mneme.structure_models import Draft, Preview


def _scope_view(path: str, scope_id: str, depth: int) -> dict[str, Any]:
    return {"path": path, "scope_id": scope_id, "depth": depth}


def _memory_view(services: bootstrap.Services, memory: Memory, target: str | None = None) -> dict[str, Any]:
    """The memory as the API shows it; `target` is its scope's path when the caller has it already."""
    if target is None and memory.kind == "scoped":
        assert memory.scope_id is not None
        target = services.scopes.chain_of(memory.tenant, memory.scope_id).path
    view = memory.model_dump(mode="json", exclude={"tenant", "scope_id", "layer", "value"})
    return {**view, "target": target or tag_label(memory)}


def _record_view(
    services: bootstrap.Services, memory: Memory, target: str, revision: Revision | None
) -> dict[str, Any]:
    """A scoped memory in its scope `target`, with the caller's open edit of it (`pending_revision`) if any."""
    view = _memory_view(services, memory, target)
    return (
        view if revision is None else {**view, "pending_revision": revision.model_dump(mode="json", exclude={"tenant"})}
    )


def build_app(services: bootstrap.Provide) -> APIGatewayRestResolver:
    """The routes over the services the composition root gives (`bootstrap.current` in Lambda)."""
    app = build_resolver()
    _caller_routes(app)
    _scope_routes(app, services)
    _memory_routes(app, services)
    _draft_routes(app, services)
    _key_routes(app, services)
    _console_routes(app)
    return app


def _caller_routes(app: APIGatewayRestResolver) -> None:
    @app.get("/v1/me")
    def me() -> dict[str, Any]:
        """The caller as its key names it: what the console shows and which actions it offers."""
        who = caller(app)
        return {"tenant": who.tenant, "principal": who.principal, "roles": [r.value for r in Role if r in who.roles]}


def _scope_routes(app: APIGatewayRestResolver, services: bootstrap.Provide) -> None:
    @app.get("/v1/scopes")
    def list_scopes(
        path: Annotated[str, Query(max_length=600)] = "root", aliases: Annotated[bool, Query()] = False
    ) -> dict[str, Any]:
        """The subtree under `path`; with `aliases=true` each scope also lists the old paths that resolve to it."""
        scopes, tenant = services().scopes, caller(app).tenant
        tree = scopes.subtree(tenant, path)
        if not aliases:
            return {"scopes": [_scope_view(p, s.scope_id, s.depth) for p, s in tree]}
        old = scopes.aliases(tenant, tree)
        return {
            "scopes": [{**_scope_view(p, s.scope_id, s.depth), "aliases": old.get(s.scope_id, [])} for p, s in tree]
        }

    @app.post("/v1/scopes")
    def create_scope(request: Annotated[CreateScopeRequest, Body()]) -> Response[Any]:
        created = services().scopes.create(caller(app).tenant, request.path, parents=request.parents)
        return json_response(201, _scope_view(created.path, created.scope.scope_id, created.scope.depth))

    @app.delete("/v1/scopes")
    def erase_scope(
        path: Annotated[str, Query(min_length=4, max_length=600)], dry_run: Annotated[bool, Query()] = True
    ) -> dict[str, Any]:
        """Right to erasure: a dry run (the default) counts; `dry_run=false` deletes the subtree for good."""
        return services().portability.erase(caller(app).tenant, path, dry_run=dry_run)

    @app.post("/v1/scopes/rename")
    def rename_scope(request: Annotated[RenameScopeRequest, Body()]) -> dict[str, Any]:
        """Rename a scope's last segment; `dry_run` answers with the preview a structure draft would show."""
        structure = services().structure
        answer = structure.rename_without_draft(caller(app), request.path, request.new_path, dry_run=request.dry_run)
        if isinstance(answer, Preview):
            return {"dry_run": True, "preview": answer.model_dump(mode="json")}
        renamed, old_path = answer
        return {**_scope_view(renamed.path, renamed.scope.scope_id, renamed.scope.depth), "alias": old_path}

    @app.get("/v1/layers")
    def get_layers() -> dict[str, Any]:
        return {"layers": services().scopes.layers(caller(app).tenant)}

    @app.put("/v1/layers")
    def put_layers(request: Annotated[LayersRequest, Body()]) -> dict[str, Any]:
        return {"layers": services().structure.layers_without_draft(caller(app), request.layers)}


def _memory_routes(app: APIGatewayRestResolver, services: bootstrap.Provide) -> None:
    def shown(memory: Memory) -> dict[str, Any]:
        return _memory_view(services(), memory)

    @app.post("/v1/memories")
    def create_memory(request: Annotated[CreateMemoryRequest, Body()]) -> Response[Any]:
        memory, _ = services().memories.create(caller(app), **request.model_dump(exclude_none=True))
        return json_response(201, shown(memory))

    @app.get("/v1/memories")
    def find_memory(
        scope: Annotated[str, Query(min_length=1, max_length=600, description="the scope's path")],
        key: Annotated[str, Query(min_length=1, max_length=128, description="the memory's key in that scope")],
    ) -> dict[str, Any]:
        """The memory keyed `key` in scope `scope`, as retrieve shows it to the caller: its own pending draft
        of the key first, else the published memory (with `pending_revision`, the caller's open edit of it);
        never an archived one or another author's draft. 404 `memory_not_found` when there is none."""
        memory, path, revision = services().memories.find(caller(app), scope, key)
        return _record_view(services(), memory, path, revision)

    @app.get("/v1/scopes/memories")
    def list_scope_memories(
        path: Annotated[
            str, Query(min_length=1, max_length=600, description="list this scope and every scope under it")
        ],
        cursor: Annotated[str | None, Query(max_length=512, description="the previous page's next_cursor")] = None,
        limit: Annotated[QueryLimit, Query(description=f"memories per page, at most {MAX_PAGE}")] = 100,
    ) -> dict[str, Any]:
        """The scoped memories of scope `path` and every scope under it, as retrieve shows them to the caller
        (published ones and its own drafts, each with `pending_revision` when it has an open edit of it; never
        an archived or expired one, nor another's draft), by scope path (`target`), key and id, a page at a time."""
        listed, next_cursor = services().memory_listing.page(caller(app), path, cursor, limit)
        return {
            "memories": [_record_view(services(), memory, target, revision) for memory, target, revision in listed],
            "next_cursor": next_cursor,
            "has_more": next_cursor is not None,
        }

    @app.patch("/v1/memories/<memory_id>")
    def edit_memory(memory_id: str, request: Annotated[EditMemoryRequest, Body()]) -> dict[str, Any]:
        changes = request.model_dump(exclude_unset=True)
        version = changes.pop("version", None)
        outcome = services().review.edit(caller(app), memory_id, version=version, **changes)
        revision = outcome["revision"]
        if revision is None:
            return shown(outcome["memory"])
        return {
            **shown(outcome["memory"]),
            "pending_revision": revision.model_dump(mode="json", exclude={"tenant"}),
        }

    @app.post("/v1/memories/<memory_id>/approve")
    def approve_memory(memory_id: str, request: Annotated[DecisionRequest | None, Body()] = None) -> dict[str, Any]:
        author, reason = (request.author, request.reason) if request else (None, None)
        return shown(services().review.approve(caller(app), memory_id, author, reason))

    @app.post("/v1/memories/<memory_id>/reject")
    def reject_memory(memory_id: str, request: Annotated[RejectRequest, Body()]) -> dict[str, Any]:
        outcome = services().review.reject(caller(app), memory_id, request.reason, request.author)
        revision = outcome["revision"]
        view = shown(outcome["memory"])
        return {**view, "rejected_revision": revision.model_dump(mode="json", exclude={"tenant"})} if revision else view

    @app.get("/v1/memories/<memory_id>/history")
    def memory_history(memory_id: str) -> dict[str, Any]:
        entries = services().review.history(caller(app), memory_id)
        return {"memory_id": memory_id, "history": [e.model_dump(mode="json", exclude={"tenant"}) for e in entries]}

    @app.get("/v1/reviews")
    def reviews(path: Annotated[str | None, Query(max_length=600)] = None, mine: bool = False) -> dict[str, Any]:
        """Approvers: the review queue. Everyone (or `mine=true`): their own revisions and decisions."""
        review, who = services().review, caller(app)
        if mine or not who.has(Role.approver):
            return {"mine": review.mine(who)}
        return {"queue": review.queue(who, path)}

    @app.post("/v1/memories/<memory_id>/archive")
    def archive_memory(memory_id: str, _: Annotated[NoBody | None, Body()] = None) -> dict[str, Any]:
        """Archive by id only: the answer names the memory but never carries its body."""
        view = shown(services().memories.archive(caller(app), memory_id))
        return {field: view[field] for field in MemoryView.model_fields}


def _draft_routes(app: APIGatewayRestResolver, services: bootstrap.Provide) -> None:
    @app.post("/v1/structure/drafts")
    def create_draft(request: Annotated[DraftRequest, Body()]) -> Response[Any]:
        draft, preview = services().structure.create(caller(app), request.operations)
        return json_response(201, _draft_view(draft, preview))

    @app.get("/v1/structure/drafts/<draft_id>")
    def get_draft(draft_id: str) -> dict[str, Any]:
        return _draft_view(*services().structure.get(caller(app), draft_id))

    @app.post("/v1/structure/drafts/<draft_id>/publish")
    def publish_draft(draft_id: str, request: Annotated[PublishRequest, Body()]) -> dict[str, Any]:
        return _draft_view(*services().structure.publish(caller(app), draft_id, request.fingerprint))

    @app.post("/v1/structure/drafts/<draft_id>/discard")
    def discard_draft(draft_id: str, _: Annotated[NoBody | None, Body()] = None) -> dict[str, Any]:
        return _draft_view(*services().structure.discard(caller(app), draft_id))


def _draft_view(draft: Draft, preview: Preview) -> dict[str, Any]:
    return {**draft.model_dump(mode="json", exclude={"tenant"}), "preview": preview.model_dump(mode="json")}


def _key_routes(app: APIGatewayRestResolver, services: bootstrap.Provide) -> None:
    @app.post("/v1/keys")
    def create_key(request: Annotated[CreateKeyRequest, Body()]) -> Response[Any]:
        secret, record = services().keys.create(caller(app).tenant, request.principal, request.roles)
        view = record.model_dump(mode="json", exclude={"key_hash"})
        return json_response(201, {**view, "api_key": secret, "note": "store this key now: it is not shown again"})

    @app.get("/v1/keys")
    def list_keys() -> dict[str, Any]:
        keys = services().keys.list(caller(app).tenant)
        return {"keys": [key.model_dump(mode="json", exclude={"key_hash"}) for key in keys]}

    @app.post("/v1/keys/<key_id>/revoke")
    def revoke_key(key_id: str, _: Annotated[NoBody | None, Body()] = None) -> dict[str, Any]:
        services().keys.revoke(caller(app).tenant, key_id)
        return {"key_id": key_id, "revoked": True}


def _console_routes(app: APIGatewayRestResolver) -> None:
    @app.get("/console", include_in_schema=False)
    def console_page() -> Response[str]:
        return console.page()

    @app.head("/console", include_in_schema=False)
    def console_head() -> Response[str]:
        """The page's headers (a monitor's or a proxy's check); the server sends no body for a HEAD."""
        return console.page()

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response[str]:
        return console.icon()

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_document() -> Response[str]:
        """docs/openapi.json, as committed (package data: `make openapi` writes both)."""
        return console.contract()

    @app.get("/console/<asset>", include_in_schema=False)
    def console_asset(asset: str) -> Response[str]:
        return console.asset(asset)


app = build_app(bootstrap.current)
handler = lambda_handler(app)
