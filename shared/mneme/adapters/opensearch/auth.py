"""The signed connection to an OpenSearch endpoint: SigV4 (`es` or `aoss`), TLS for https, pooled."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import requests
from opensearchpy import OpenSearch, RequestsAWSV4SignerAuth, RequestsHttpConnection

from mneme.errors import StoreUnavailable

if TYPE_CHECKING:
    from mneme.settings import OpenSearchIndex as OpenSearchSettings


def signed_client(settings: OpenSearchSettings) -> OpenSearch:
    """A SigV4-signed client for `settings.endpoint` (TLS for https); credentials are looked up lazily."""
    endpoint = settings.endpoint if "://" in settings.endpoint else f"https://{settings.endpoint}"
    return OpenSearch(
        hosts=[endpoint],
        http_auth=LazySigV4Auth(settings.region, settings.service),
        use_ssl=endpoint.startswith("https://"),
        verify_certs=True,
        connection_class=RequestsHttpConnection,
        timeout=settings.timeout_seconds,
        max_retries=settings.max_retries,
        retry_on_timeout=True,
        pool_maxsize=16,
    )


class LazySigV4Auth(requests.auth.AuthBase):
    """SigV4 signing whose credentials (and default region) are looked up on the first request."""

    def __init__(self, region: str | None, service: str) -> None:
        self.region = region
        self.service = service
        self._signer: RequestsAWSV4SignerAuth | None = None
        self._lock = threading.Lock()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        return self.signer()(request)  # type: ignore[no-any-return]

    def signer(self) -> RequestsAWSV4SignerAuth:
        with self._lock:
            if self._signer is None:
                import boto3

                session = boto3.Session()
                credentials = session.get_credentials()
                region = self.region or session.region_name
                if credentials is None:
                    raise StoreUnavailable("no AWS credentials to sign search index requests")
                if not region:
                    raise StoreUnavailable("no AWS region to sign search index requests")
                self._signer = RequestsAWSV4SignerAuth(credentials, region, self.service)
            return self._signer
