"""One call per route through the client openapi-python-client generates from docs/openapi.json.

Not collected by pytest and not part of the repository's mypy run: `test_generated_client.py` generates
the `mneme_api` package into a temporary folder, type-checks this module against it with mypy (so every
call, body and result type here is checked against the spec), then runs `drive` against the local server.
"""

from __future__ import annotations

from typing import Any, TypeVar

from mneme_api.api.default import (
    approve_memory_v1_memories_memory_id_approve_post as approve,
)
from mneme_api.api.default import (
    archive_memory_v1_memories_memory_id_archive_post as archive,
)
from mneme_api.api.default import (
    changes_v1_changes_get as changes,
)
from mneme_api.api.default import (
    consolidate_v1_consolidate_post as consolidate,
)
from mneme_api.api.default import (
    correct_fact_v1_facts_fact_id_patch as correct_fact,
)
from mneme_api.api.default import (
    create_draft_v1_structure_drafts_post as create_draft,
)
from mneme_api.api.default import (
    create_key_v1_keys_post as create_key,
)
from mneme_api.api.default import (
    create_memory_v1_memories_post as create_memory,
)
from mneme_api.api.default import (
    create_scope_v1_scopes_post as create_scope,
)
from mneme_api.api.default import (
    discard_draft_v1_structure_drafts_draft_id_discard_post as discard_draft,
)
from mneme_api.api.default import (
    edit_memory_v1_memories_memory_id_patch as edit_memory,
)
from mneme_api.api.default import (
    erase_scope_v1_scopes_delete as erase_scope,
)
from mneme_api.api.default import (
    find_memory_v1_memories_get as find_memory,
)
from mneme_api.api.default import (
    forget_episode_v1_episodes_episode_id_delete as forget_episode,
)
from mneme_api.api.default import (
    forget_fact_v1_facts_fact_id_delete as forget_fact,
)
from mneme_api.api.default import (
    get_draft_v1_structure_drafts_draft_id_get as get_draft,
)
from mneme_api.api.default import (
    get_episode_v1_episodes_episode_id_get as get_episode,
)
from mneme_api.api.default import (
    get_fact_v1_facts_fact_id_get as get_fact,
)
from mneme_api.api.default import (
    get_layers_v1_layers_get as get_layers,
)
from mneme_api.api.default import (
    get_run_v1_consolidations_run_id_get as get_run,
)
from mneme_api.api.default import (
    health_v1_health_get as health,
)
from mneme_api.api.default import (
    list_episodes_v1_episodes_get as list_episodes,
)
from mneme_api.api.default import (
    list_facts_v1_facts_get as list_facts,
)
from mneme_api.api.default import (
    list_keys_v1_keys_get as list_keys,
)
from mneme_api.api.default import (
    list_runs_v1_consolidations_get as list_runs,
)
from mneme_api.api.default import (
    list_scope_memories_v1_scopes_memories_get as list_scope_memories,
)
from mneme_api.api.default import (
    list_scopes_v1_scopes_get as list_scopes,
)
from mneme_api.api.default import (
    me_v1_me_get as me,
)
from mneme_api.api.default import (
    memory_history_v1_memories_memory_id_history_get as history,
)
from mneme_api.api.default import (
    publish_draft_v1_structure_drafts_draft_id_publish_post as publish_draft,
)
from mneme_api.api.default import (
    put_layers_v1_layers_put as put_layers,
)
from mneme_api.api.default import (
    recall_v1_recall_post as recall,
)
from mneme_api.api.default import (
    reject_memory_v1_memories_memory_id_reject_post as reject,
)
from mneme_api.api.default import (
    remember_v1_remember_post as remember,
)
from mneme_api.api.default import (
    rename_scope_v1_scopes_rename_post as rename_scope,
)
from mneme_api.api.default import (
    retrieve_v1_retrieve_post as retrieve,
)
from mneme_api.api.default import (
    reviews_v1_reviews_get as reviews,
)
from mneme_api.api.default import (
    revoke_key_v1_keys_key_id_revoke_post as revoke_key,
)
from mneme_api.api.default import (
    validate_sttp_v1_sttp_validate_post as validate_sttp,
)
from mneme_api.client import AuthenticatedClient, Client
from mneme_api.models import (
    Bundle,
    Caller,
    ChangesPage,
    ConsolidateRequest,
    CorrectFactRequest,
    CreatedKey,
    CreateKeyRequest,
    CreateMemoryRequest,
    CreateScopeRequest,
    DecisionRequest,
    DraftRequest,
    DraftView,
    EditMemoryRequest,
    EpisodePage,
    EpisodeRecord,
    Erasure,
    ErrorBody,
    FactPage,
    Forgot,
    Health,
    KeyList,
    LayerNames,
    LayersRequest,
    MemoryHistory,
    MemoryPage,
    MemoryRecord,
    MemoryView,
    NoBody,
    PublishRequest,
    RecallRequest,
    RecallResponse,
    RejectRequest,
    RememberBatch,
    Remembered,
    RememberedBatch,
    RememberItem,
    RenameScopeRequest,
    RetrieveRequest,
    Reviews,
    Revoked,
    RunList,
    RunStarted,
    RunView,
    ScopeList,
    ScopeView,
    SttpValidation,
    ValidateRequest,
)
from mneme_api.types import Response

T = TypeVar("T")


def ok(response: Response[T | ErrorBody] | Response[ErrorBody | T], kind: type[T]) -> T:
    parsed: Any = response.parsed
    assert isinstance(parsed, kind), (response.status_code, response.content[:300])
    return parsed


def not_found(response: Response[Any]) -> ErrorBody:
    """A declared 404 answer: the error body."""
    assert response.status_code == 404 and isinstance(response.parsed, ErrorBody), response.content[:300]
    return response.parsed


def drive(base_url: str, admin_key: str) -> list[str]:
    """Every route once, in an order that gives each the state it needs; returns the operations called."""
    json = {"Accept": "application/json"}
    admin = AuthenticatedClient(base_url=base_url, token=admin_key, headers=json)
    called: list[str] = []

    def did(name: str) -> None:
        called.append(name)

    ok(health.sync_detailed(client=Client(base_url=base_url)), Health)
    did("GET /v1/health")
    ok(me.sync_detailed(client=admin), Caller)
    did("GET /v1/me")
    layers = LayersRequest.from_dict({"layers": {"1": "clients", "2": "services"}})
    ok(put_layers.sync_detailed(client=admin, body=layers), LayerNames)
    did("PUT /v1/layers")
    ok(get_layers.sync_detailed(client=admin), LayerNames)
    did("GET /v1/layers")
    scope = CreateScopeRequest.from_dict({"path": "root.acme.vat", "parents": True})
    ok(create_scope.sync_detailed(client=admin, body=scope), ScopeView)
    did("POST /v1/scopes")
    ok(list_scopes.sync_detailed(client=admin, path="root", aliases=True), ScopeList)
    did("GET /v1/scopes")
    renamed = RenameScopeRequest.from_dict({"path": "root.acme.vat", "new_path": "root.acme.tax"})
    answer = rename_scope.sync_detailed(client=admin, body=renamed)  # ScopeView, or RenamePreview for a dry run
    assert isinstance(answer.parsed, ScopeView), (answer.status_code, answer.content[:300])
    did("POST /v1/scopes/rename")

    note = CreateMemoryRequest.from_dict({"key": "year-end", "body": "Year end is 31 March.", "scope": "root.acme"})
    memory = ok(create_memory.sync_detailed(client=admin, body=note), MemoryRecord)
    did("POST /v1/memories")
    edit = EditMemoryRequest.from_dict({"body": "Year end is 31 March (confirmed)."})
    ok(edit_memory.sync_detailed(memory.memory_id, client=admin, body=edit), MemoryRecord)
    did("PATCH /v1/memories/{memory_id}")
    ok(history.sync_detailed(memory.memory_id, client=admin), MemoryHistory)
    did("GET /v1/memories/{memory_id}/history")
    found = ok(find_memory.sync_detailed(client=admin, scope="root.acme", key="year-end"), MemoryRecord)
    assert found.memory_id == memory.memory_id
    did("GET /v1/memories")
    listed = ok(list_scope_memories.sync_detailed(client=admin, path="root", limit=1), MemoryPage)
    assert [m.memory_id for m in listed.memories] == [memory.memory_id] and listed.has_more is False
    did("GET /v1/scopes/memories")

    new_key = CreateKeyRequest.from_dict({"principal": "writer-bot", "roles": ["writer"]})
    created = ok(create_key.sync_detailed(client=admin, body=new_key), CreatedKey)
    did("POST /v1/keys")
    writer = AuthenticatedClient(base_url=base_url, token=created.api_key, headers=json)
    pending = [
        ok(create_memory.sync_detailed(client=writer, body=CreateMemoryRequest.from_dict(
            {"key": f"draft-{n}", "body": f"Proposal {n}.", "scope": "root.acme"})), MemoryRecord)
        for n in (1, 2)
    ]  # fmt: skip
    ok(reviews.sync_detailed(client=admin), Reviews)
    did("GET /v1/reviews")
    # an optional body is sent explicitly: the generator serialises an absent one as UNSET (its defect)
    ok(approve.sync_detailed(pending[0].memory_id, client=admin, body=DecisionRequest.from_dict({})), MemoryRecord)
    did("POST /v1/memories/{memory_id}/approve")
    reason = RejectRequest.from_dict({"reason": "not needed"})
    ok(reject.sync_detailed(pending[1].memory_id, client=admin, body=reason), MemoryRecord)
    did("POST /v1/memories/{memory_id}/reject")
    ok(archive.sync_detailed(pending[0].memory_id, client=admin, body=NoBody.from_dict({})), MemoryView)
    did("POST /v1/memories/{memory_id}/archive")

    ok(retrieve.sync_detailed(client=admin, body=RetrieveRequest.from_dict({"path": "root.acme"})), Bundle)
    did("POST /v1/retrieve")
    item = RememberItem.from_dict({"scope": "root.acme", "content": "Acme's year end is 31 March."})
    one = remember.sync_detailed(client=admin, body=item)
    assert isinstance(one.parsed, Remembered), (one.status_code, one.content[:300])
    batch = RememberBatch.from_dict({"items": [{"scope": "root.acme", "content": "Acme files VAT quarterly."}]})
    many = remember.sync_detailed(client=admin, body=batch)
    assert isinstance(many.parsed, RememberedBatch), (many.status_code, many.content[:300])
    did("POST /v1/remember")
    ok(list_episodes.sync_detailed(client=admin, scope="root", limit=5), EpisodePage)
    did("GET /v1/episodes")
    ok(get_episode.sync_detailed(one.parsed.episode_id, client=admin), EpisodeRecord)
    did("GET /v1/episodes/{episode_id}")
    ok(forget_episode.sync_detailed(one.parsed.episode_id, client=admin, body=NoBody.from_dict({})), Forgot)
    did("DELETE /v1/episodes/{episode_id}")
    ok(list_facts.sync_detailed(client=admin, scope="root"), FactPage)
    did("GET /v1/facts")
    # no fact exists yet (consolidation runs later): each fact route answers its declared 404
    not_found(get_fact.sync_detailed("fa_none", client=admin))
    did("GET /v1/facts/{fact_id}")
    correction = CorrectFactRequest.from_dict({"version": 1, "value": "Basic"})
    not_found(correct_fact.sync_detailed("fa_none", client=admin, body=correction))
    did("PATCH /v1/facts/{fact_id}")
    not_found(forget_fact.sync_detailed("fa_none", client=admin, body=NoBody.from_dict({})))
    did("DELETE /v1/facts/{fact_id}")
    query = RecallRequest.from_dict({"query": "year end", "scope": "root.acme"})
    ok(recall.sync_detailed(client=admin, body=query), RecallResponse)
    did("POST /v1/recall")
    node = ValidateRequest.from_dict({"text": "not an STTP node", "profile": "tolerant"})
    ok(validate_sttp.sync_detailed(client=admin, body=node), SttpValidation)
    did("POST /v1/sttp/validate")
    ok(changes.sync_detailed(client=admin, limit=10), ChangesPage)
    did("GET /v1/changes")
    run = ok(consolidate.sync_detailed(client=admin, body=ConsolidateRequest.from_dict({})), RunStarted)
    did("POST /v1/consolidate")
    ok(get_run.sync_detailed(run.run_id, client=admin), RunView)
    did("GET /v1/consolidations/{run_id}")
    ok(list_runs.sync_detailed(client=admin, limit=5), RunList)
    did("GET /v1/consolidations")

    move = DraftRequest.from_dict({"operations": [{"op": "move", "path": "root.acme.tax", "new_parent": "root"}]})
    draft = ok(create_draft.sync_detailed(client=admin, body=move), DraftView)
    did("POST /v1/structure/drafts")
    ok(get_draft.sync_detailed(draft.draft_id, client=admin), DraftView)
    did("GET /v1/structure/drafts/{draft_id}")
    fingerprint = PublishRequest.from_dict({"fingerprint": draft.preview.fingerprint})
    ok(publish_draft.sync_detailed(draft.draft_id, client=admin, body=fingerprint), DraftView)
    did("POST /v1/structure/drafts/{draft_id}/publish")
    back = DraftRequest.from_dict({"operations": [{"op": "move", "path": "root.tax", "new_parent": "root.acme"}]})
    unwanted = ok(create_draft.sync_detailed(client=admin, body=back), DraftView)
    ok(discard_draft.sync_detailed(unwanted.draft_id, client=admin, body=NoBody.from_dict({})), DraftView)
    did("POST /v1/structure/drafts/{draft_id}/discard")
    ok(erase_scope.sync_detailed(client=admin, path="root.acme", dry_run=True), Erasure)
    did("DELETE /v1/scopes")
    ok(list_keys.sync_detailed(client=admin), KeyList)
    did("GET /v1/keys")
    ok(revoke_key.sync_detailed(created.key_id, client=admin, body=NoBody.from_dict({})), Revoked)
    did("POST /v1/keys/{key_id}/revoke")
    return called
