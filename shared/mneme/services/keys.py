"""API keys: random, shown once, stored as a SHA-256 hash; each names tenant, principal and roles."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mneme.errors import Conflict, InvalidInput, NotFound, Unauthorized
from mneme.identity import ApiKey, Principal, Role

if TYPE_CHECKING:  # the authorizer imports this module: keep the ports (and numpy) out of its cold start
    from mneme.ports import ApiKeyStore, Clock, ScopeStore

    class KeyStore(ApiKeyStore, ScopeStore, Protocol):
        """The record store's roles keys use: keys, and the tenant's root scope a first key creates."""


KEY_PREFIX = "mnk_"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _name(value: str, field: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise InvalidInput(f"invalid {field} {value!r}: 1-128 of A-Z a-z 0-9 . _ @ -", code=f"invalid_{field}")
    return value


class ApiKeyReader(Protocol):
    """The one read authentication needs (every ApiKeyStore has it)."""

    def get_api_key(self, key_hash: str) -> ApiKey | None: ...


@dataclass(frozen=True)
class Authenticator:
    """Bearer secret → caller; what the authorizer holds (bootstrap.build_authenticator)."""

    keys: ApiKeyReader

    def authenticate(self, secret: str | None) -> Principal:
        """Unauthorized for a missing, unknown or revoked key (code `key_revoked`)."""
        if not secret:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        record = self.keys.get_api_key(hash_key(secret))
        if record is None:
            raise Unauthorized("unknown API key")
        if record.revoked_at is not None:
            raise Unauthorized("this API key was revoked", code="key_revoked")
        return Principal(tenant=record.tenant, principal=record.principal, roles=frozenset(record.roles))


@dataclass
class KeyService:
    store: KeyStore
    clock: Clock

    def create(self, tenant: str, principal: str, roles: list[Role] | list[str]) -> tuple[str, ApiKey]:
        """Returns (secret, record). The secret is never stored and cannot be shown again."""
        if not roles:
            raise InvalidInput("a key needs at least one role", code="invalid_roles")
        try:
            parsed = sorted({Role(role) for role in roles}, key=list(Role).index)
        except ValueError as e:
            raise InvalidInput(f"roles must be among {[r.value for r in Role]}", code="invalid_roles") from e
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        record = ApiKey(
            key_hash=hash_key(secret),
            key_id=secrets.token_hex(8),
            tenant=_name(tenant, "tenant"),
            principal=_name(principal, "principal"),
            roles=parsed,
            created_at=self.clock.now(),
        )
        from mneme.services.scopes import ScopeService  # here: the authorizer imports this module

        # A tenant's root exists before its first key works, so a first call that only reads (retrieve,
        # recall: roles that may not write) finds it; creating it is idempotent.
        ScopeService(self.store, self.clock).root(record.tenant)
        self.store.put_api_key(record)
        return secret, record

    def authenticate(self, secret: str | None) -> Principal:
        return Authenticator(self.store).authenticate(secret)

    def list(self, tenant: str) -> list[ApiKey]:
        return self.store.list_api_keys(tenant)

    def revoke(self, tenant: str, key_id: str) -> None:
        """Revoke a key; never a tenant's last live admin key (409 `last_admin_key`), which would leave no
        one to manage its keys and scopes but the host. Two admins revoking each other's keys at the very same
        moment can still both succeed: the check and the write are not one transaction."""
        keys = {key.key_id: key for key in self.store.list_api_keys(tenant)}
        target = keys.get(key_id)
        if target is None:
            raise NotFound(f"key {key_id} does not exist", code="key_not_found")
        admins = [k for k in keys.values() if Role.admin in k.roles and k.revoked_at is None]
        if admins == [target]:
            raise Conflict(
                f"key {key_id} is the tenant's last admin key: create another admin key first (POST /v1/keys), "
                "then revoke this one",
                code="last_admin_key",
            )
        if not self.store.revoke_api_key(tenant, key_id, self.clock.now()):
            raise NotFound(f"key {key_id} does not exist", code="key_not_found")
