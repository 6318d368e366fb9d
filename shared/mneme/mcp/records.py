"""The MCP tools over episodes and facts as records: `list`, `forget` and `correct_fact` (added by
`mneme.mcp.server.build_server`; errors are the API's, as for every tool there)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from mneme.http.schemas import CorrectFactRequest, ForgetQuery, ListingQuery
from mneme.mcp.params import Param, extra, given, takes
from mneme.search_models import MetadataFilter
from mneme.services.recall.records import FACT_PREFIXES
from mneme_sdk import Client
from mneme_sdk.errors import InvalidInput
from mneme_sdk.models import EpisodePage, EpisodeRecord, FactPage, FactRecord, Forgot

Id = Annotated[str, Field(min_length=4, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")]
# The listing's `metadata.<key>=<value>` query parameters, as one object (`http.schemas.query_metadata`).
METADATA = extra(
    "metadata",
    Annotated[
        MetadataFilter | None,
        Field(description='only records with these top-level metadata values, e.g. {"user": "alice"}; a list'
              ' means any of them: {"user": ["alice", "bob"]}'),
    ],
    None,
)  # fmt: skip
KIND = extra("kind", Annotated[Literal["episodes", "facts"], Field(description="What to list")], "episodes")


class RecordsOutput(BaseModel):
    """A page of `list`: `episodes` or `facts`, and the cursor of the next page (null: the end)."""

    episodes: list[EpisodeRecord] | None = None
    facts: list[FactRecord] | None = None
    next_cursor: str | None = None
    has_more: bool


def _page(page: EpisodePage | FactPage) -> tuple[BaseModel, str]:
    return RecordsOutput.model_validate(page.model_dump()), _page_text(page)


def _page_text(page: EpisodePage | FactPage) -> str:
    lines: list[str] = []
    if isinstance(page, EpisodePage):
        for e in page.episodes:
            meta = f" {json.dumps(e.metadata, ensure_ascii=False)}" if e.metadata else ""
            lines.append(
                f"{e.id} [{e.scope} {e.occurred_at:%Y-%m-%d %H:%M}]{meta}: {' '.join(e.content.split())[:300]}"
            )
    else:
        for f in page.facts:
            state = f.status + (", stale" if f.stale else "")
            lines.append(f"{f.id} [{f.scope} {f.tier}, {state}, version {f.version}]: {f.summary[:300]}")
    if not lines:
        lines.append("Nothing listed: no such records under this scope (with these filters).")
    if page.next_cursor:
        lines.append(f"More: call list again with cursor={page.next_cursor}")
    return "\n".join(lines)


def _forgot_text(forgot: Forgot) -> str:
    text = f"Forgot {forgot.kind} {forgot.id} for good: it no longer appears in recall or list."
    for settled in forgot.settled:
        meaning = {
            "retracted": "retracted (nothing it rested on is left, or it stated what was forgotten)",
            "regrounded": "kept, on its other source episodes (it still states the same: forget it too if it must go)",
            "stale": "marked stale (its other sources do not state it; it still appears, ranked lower: forget it "
            "too if it must go)",
            "rebuilt": "rebuilt from what is left",
        }[settled.action]
        text += f"\nfact {settled.id}: {meaning}"
    return text


def add_record_tools(server: MCPServer, client: Client, *, scope: str, call: Callable[..., CallToolResult]) -> None:
    """`call(work, render)` is the server's way to run a client call and turn errors into tool errors."""

    @server.tool(
        name="list",
        title="List episodes or facts",
        description=(
            "List what is remembered under a scope (its whole subtree), newest first: `episodes` (the observations "
            "remembered) or `facts` (what consolidation drew from them). Filter by session_id (episodes), time "
            "(since/until) and metadata. Use it to find the id of a record to forget or correct, or to review what "
            "was remembered; use `recall` to search by meaning. Returns ids, times, metadata and text; pass "
            "`cursor` from the answer for the next page."
        ),
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    )
    # an agent's page is smaller than the API's 50: each line costs it tokens
    @takes(ListingQuery, KIND, Param("scope", default=scope), "session_id", "since", "until", METADATA, "cursor",
           Param("limit", default=20))  # fmt: skip
    def list_records(**arguments: Any) -> Annotated[CallToolResult, RecordsOutput]:
        filters = given(arguments, "kind", "scope", "session_id")
        where, session_id = arguments["scope"], arguments["session_id"]
        if arguments["kind"] == "episodes":
            if session_id is not None:
                filters["session_id"] = session_id
            return call(lambda: client.list_episodes(where, **filters), _page)
        if session_id is not None:
            return call(_refuse("facts have no session: list episodes by session_id"), lambda _: (_, ""))
        return call(lambda: client.list_facts(where, **filters), _page)

    @server.tool(
        name="forget",
        title="Forget an episode or a fact",
        description=(
            "Forget one remembered episode (id ep_...) or fact (id fa_... or ro_...) for good, when the user asks "
            "you to forget something or a record is wrong and must go. Find the id first with `recall` or `list`. "
            "It disappears from recall and list at once and cannot be restored; pass the user's reason. Forgetting "
            "an episode also settles the facts drawn from it; the answer lists them, and a fact still stating the "
            "forgotten knowledge (kept or stale) must be forgotten too if the user wants it gone. Forgetting a fact "
            "needs the approver role (error forbidden otherwise): then tell the user an approver must do it."
        ),
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=False),
    )
    @takes(ForgetQuery, extra("id", Annotated[Id, Field(description="The episode's or fact's id")]), "reason")
    def forget(**arguments: Any) -> Annotated[CallToolResult, Forgot]:
        id, reason = arguments["id"], arguments["reason"]
        if id.startswith(FACT_PREFIXES):
            return call(lambda: client.forget_fact(id, reason=reason), lambda f: (f, _forgot_text(f)))
        if id.startswith("ep_"):
            return call(lambda: client.forget_episode(id, reason=reason), lambda f: (f, _forgot_text(f)))
        return call(_refuse(f"{id} is not an episode (ep_...) or a fact (fa_..., ro_...)"), lambda _: (_, ""))

    @server.tool(
        name="correct_fact",
        title="Correct a fact",
        description=(
            "Correct a fact consolidation drew (id fa_...): its value, entity, property or summary, when the user "
            "says it is wrong. Pass the `version` shown by `list` (kind facts); if the fact changed since, the "
            "answer is error stale_version: list it again and retry. The fact's history keeps the correction, who "
            "made it and the reason. Needs the approver role (error forbidden otherwise). To correct what an "
            "episode said, remember a new observation instead (episodes never change)."
        ),
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False, open_world_hint=False),
    )
    @takes(CorrectFactRequest, extra("id", Annotated[Id, Field(description="The fact's id")]), "version", "value",
           "summary", "entity", "property", "reason")  # fmt: skip
    def correct_fact(**arguments: Any) -> Annotated[CallToolResult, FactRecord]:
        changes = given(arguments, "id", "version", "reason")
        id, version, reason = arguments["id"], arguments["version"], arguments["reason"]

        def render(fact: FactRecord) -> tuple[BaseModel, str]:
            triple = " / ".join(p for p in (fact.entity, fact.property, fact.value) if p)
            return fact, f"Corrected fact {fact.id} (now version {fact.version}): {triple or fact.summary}"

        return call(lambda: client.correct_fact(id, version, reason=reason, **changes), render)


def _refuse(message: str) -> Any:
    def work() -> Any:
        raise InvalidInput(message, code="invalid_input")

    return work
