"""The API Gateway Lambda authorizer: Bearer API key → tenant, principal and roles.

The policy allows every method of the API (results are cached per key); role checks are made by
each function against the route table. It builds only the key lookup (`bootstrap.current_authenticator`),
not the services: no numpy, consolidation or OpenSearch client in its cold start
(tests/unit/test_authorizer_imports.py). An Allow names the tenant's throttle bucket (`usageIdentifierKey`,
mneme.auth.UsageKeys) when the stack configured them.
"""

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from mneme import bootstrap
from mneme.auth import UsageKeys, authorize
from mneme.observability import logger
from mneme.services.keys import Authenticator

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def authorizer(keys: Callable[[], Authenticator], buckets: Callable[[], UsageKeys | None]) -> Handler:
    """The authorizer over the key lookup and the throttle buckets the composition root gives."""

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return authorize(event, keys(), buckets())

    return handler


handler = authorizer(bootstrap.current_authenticator, bootstrap.current_usage_keys)
