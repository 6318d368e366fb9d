"""Who is calling: roles, the principal a credential resolves to, and the stored API key. Apart from the
records (`mneme.models`, which re-exports these) so that the authorizer, which needs only these, does not
build every record model at its cold start."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Role(StrEnum):
    reader = "reader"
    writer = "writer"
    approver = "approver"
    admin = "admin"


ROLE_RANK = {Role.reader: 0, Role.writer: 1, Role.approver: 2, Role.admin: 3}


class Principal(BaseModel):
    """Who is calling: resolved from the credential, never from a request body."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    principal: str
    roles: frozenset[Role]

    def has(self, role: Role) -> bool:
        """Roles are cumulative: admin implies approver implies writer implies reader."""
        return any(ROLE_RANK[held] >= ROLE_RANK[role] for held in self.roles)


class ApiKey(BaseModel):
    key_hash: str
    key_id: str
    tenant: str
    principal: str
    roles: list[Role]
    created_at: datetime
    revoked_at: datetime | None = None
