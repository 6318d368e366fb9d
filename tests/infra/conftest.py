"""One synth of the default stage and one of the variant (every conditional branch), shared by the infra tests."""

from __future__ import annotations

import pytest

from tests.infra.synth import BROUGHT_BACK, DOMAIN, GSI_SCHEMA, VARIANT, Synth, synthesize


@pytest.fixture(scope="session")
def default(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A disposable stage with customer-managed keys, an inference-profile reasoner and a GSI."""
    return synthesize(tmp_path_factory.mktemp("variant"), VARIANT, GSI_SCHEMA)


@pytest.fixture(scope="session")
def domain(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`mneme:search=domain`: a managed OpenSearch domain instead of the Serverless collection."""
    return synthesize(tmp_path_factory.mktemp("domain"), DOMAIN)


@pytest.fixture(scope="session")
def brought_back(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A stage redeployed on its retained table and secret, with pinned tenants, a whole-API rate limit and an
    application inference profile as its reasoner."""
    return synthesize(tmp_path_factory.mktemp("brought-back"), BROUGHT_BACK)
