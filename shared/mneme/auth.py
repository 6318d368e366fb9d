"""Turn an authorizer event into an IAM policy with the caller in its context.

A missing, unknown or revoked key is a Deny policy whose context carries the reason (`unauthorized`,
`key_revoked`); the stack maps API Gateway's ACCESS_DENIED response to 401 with that reason as the error
code (infra/mneme_infra/api.py), and the local server answers the same. The authorizer never raises for a
bad key: API Gateway's other way to a 401, `raise Exception("Unauthorized")`, is a Lambda error, which
the authorizer-errors alarm pages on.

Per-tenant throttling (AWS): an Allow names the tenant's throttle bucket as `usageIdentifierKey`, an API
Gateway API key of the stage's usage plans (`UsageKeys`; infra/mneme_infra/api.py): a pinned tenant's own
key, or one of a fixed number of shared bucket keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mneme.errors import Forbidden, Unauthorized
from mneme.identity import Principal

if TYPE_CHECKING:  # the port is a type only: the authorizer's cold start loads no more than it uses
    from mneme.ports import KeyAuthenticator


def bearer_token(event: dict[str, Any]) -> str | None:
    raw = event.get("authorizationToken")
    if raw is None:
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        raw = headers.get("authorization")
    if not raw:
        return None
    scheme, _, token = raw.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _api_arn(method_arn: str) -> str:
    """arn:...:api-id/stage/VERB/path → arn:...:api-id/stage/*/* (the whole API, cacheable)."""
    parts = method_arn.split("/")
    return "/".join([*parts[:2], "*", "*"]) if len(parts) >= 2 else method_arn


def policy(principal_id: str, effect: str, method_arn: str, context: dict[str, str]) -> dict[str, Any]:
    return {
        "principalId": principal_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": _api_arn(method_arn)}],
        },
        "context": context,
    }


PINNED_DIGEST_CHARS = 24  # of a pinned tenant's name's SHA-256, in hex: the key and the authorizer agree on it


def pinned_digest(tenant: str) -> str:
    """How the stack and the authorizer name a pinned tenant: a digest, so the function's configuration and
    the key values do not carry tenant names."""
    return hashlib.sha256(tenant.encode()).hexdigest()[:PINNED_DIGEST_CHARS]


@dataclass(frozen=True)
class UsageKeys:
    """The stage's throttle buckets: API Gateway API keys whose values derive from the deployment's `seed`.

    `seed` is unique to a deployment (the stack creates it from its own stack id: infra/mneme_infra/api.py),
    and a tenant's shared bucket is a hash of the seed and its name (not Python's salted `hash`): every
    authorizer instance of a deployment agrees, and two tenants that share a bucket in one deployment
    most likely do not in another. A tenant in `pinned` (digests, `pinned_digest`) has a key of its own,
    which no other tenant shares. The values are not credentials: with the API's key source set to
    AUTHORIZER, API Gateway reads the key from the authorizer only, never from a client's header.
    """

    seed: str
    buckets: int
    pinned: frozenset[str] = frozenset()

    def bucket(self, tenant: str) -> int:
        """The tenant's shared bucket (a pinned tenant has one too, unused while it is pinned)."""
        digest = hashlib.sha256(f"{self.seed}/{tenant}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.buckets

    def value(self, bucket: int) -> str:
        """A shared bucket's key value. API Gateway wants 20 to 128 alphanumeric characters; the stack
        joins the same parts (infra/mneme_infra/api.py)."""
        return f"mneme{self.seed}b{bucket:02d}"

    def pinned_value(self, tenant: str) -> str:
        return f"mneme{self.seed}p{pinned_digest(tenant)}"

    def of(self, tenant: str) -> str:
        if pinned_digest(tenant) in self.pinned:
            return self.pinned_value(tenant)
        return self.value(self.bucket(tenant))


def authorize(event: dict[str, Any], keys: KeyAuthenticator, usage: UsageKeys | None = None) -> dict[str, Any]:
    method_arn = event.get("methodArn", "*")
    try:
        caller = keys.authenticate(bearer_token(event))
    except (Unauthorized, Forbidden) as e:
        return policy("refused", "Deny", method_arn, {"reason": e.code})
    allowed = policy(principal_id(caller), "Allow", method_arn, context_of(caller))
    if usage is not None:
        allowed["usageIdentifierKey"] = usage.of(caller.tenant)
    return allowed


def principal_id(caller: Principal) -> str:
    return f"{caller.tenant}/{caller.principal}"


def context_of(caller: Principal) -> dict[str, str]:
    """The authorizer context API Gateway hands each function (`http.admission.principal_from_event` reads it)."""
    return {
        "tenant": caller.tenant,
        "principal": caller.principal,
        "roles": ",".join(sorted(role.value for role in caller.roles)),
    }
