# Mneme: every command a developer or CI needs. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAYER_PINS := $(VENV)/layer-pins.txt
SERVE_STAMP := $(VENV)/.installed-serve
EXAMPLES_STAMP := $(VENV)/.installed-examples
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export POWERTOOLS_TRACE_DISABLED := true
export POWERTOOLS_METRICS_DISABLED := true

.PHONY: help install serve examples dist test unit contract integration infra cloud browser lint typecheck check synth fuzz openapi bench clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# The Lambda layer's pins (infra/layer-requirements.txt) constrain the local install too: what runs and is tested
# here is what deploys (tests/cloud/test_layer_only.py), whatever PyPI published since the lock. numpy's pin needs
# Lambda's Python 3.12; 3.11 here runs the 2.4 line (STAND_INS in tests/cloud/lambda_paths.py).
$(LAYER_PINS): infra/layer-requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\).*/\1/p' infra/layer-requirements.txt | grep -v '^numpy==' > $(LAYER_PINS)

$(SERVE_STAMP): pyproject.toml clients/python/pyproject.toml $(LAYER_PINS)  # what serving needs: the local engine and the MCP server
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(LAYER_PINS) -e clients/python  # the SDK first: Mneme depends on it and PyPI does not have it
	$(BIN)/pip install --quiet -c $(LAYER_PINS) -e '.[local,mcp]'
	touch $(SERVE_STAMP)

$(STAMP): $(SERVE_STAMP)  # and the dev, fuzzing and CDK toolchains for tests and checks
	$(BIN)/pip install --quiet -c $(LAYER_PINS) -e '.[local,dev,infra,mcp]'
	touch $(STAMP)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

TS_CLIENT := clients/typescript
$(TS_CLIENT)/node_modules/.installed: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json  # the TypeScript client's tools
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP)  ## create .venv with every dependency

$(EXAMPLES_STAMP): $(SERVE_STAMP) clients/python/pyproject.toml
	$(BIN)/pip install --quiet -e 'clients/python[examples]'
	touch $(EXAMPLES_STAMP)

examples: $(EXAMPLES_STAMP)  ## add to .venv what examples/ and docs/integrations.md run with (LangGraph, Strands Agents, OpenAI Agents SDK)

serve: $(SERVE_STAMP)  ## start Mneme locally on the embedded engine (http://127.0.0.1:8080; PORT=N for another port)
	$(BIN)/mneme serve $(if $(PORT),--port $(PORT))

# Coverage floor of `make test` (and so `make check`): the whole suite covered 93.9 % of `mneme` on a fresh
# clone on 2026-11-30 (`make test`). Raise it, never lower it.
COVERAGE_FLOOR := 90

test: $(STAMP) node_modules/.installed $(TS_CLIENT)/node_modules/.installed  ## run every test tier (unit, contract, integration, infra, cloud) with the coverage floor
	$(BIN)/pytest tests --cov=mneme --cov-report=term:skip-covered --cov-fail-under=$(COVERAGE_FLOOR)

unit: $(STAMP)  ## unit tests only (no network, no moto)
	$(BIN)/pytest tests/unit

contract: $(STAMP)  ## the port contract suites on every adapter that runs here
	$(BIN)/pytest tests/contract

integration: $(STAMP) $(TS_CLIENT)/node_modules/.installed  ## handlers, moto and the local server over loopback
	$(BIN)/pytest tests/integration

infra: $(STAMP) node_modules/.installed  ## CDK synth tests
	$(BIN)/pytest tests/infra

cloud: $(STAMP) node_modules/.installed  ## the synthesized app run as deployed (moto, osmem, Bedrock double); -s prints the IAM table
	$(BIN)/pytest tests/cloud

browser: $(STAMP)  ## the console in headless Chromium (needs /usr/bin/chromium); screenshots in .artifacts/console/
	$(BIN)/pytest tests/browser

lint: $(STAMP)  ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)  ## mypy --strict on shared/, the SDK, functions/ and infra/
	$(BIN)/mypy

check: lint typecheck test  ## everything CI runs

synth: $(STAMP) node_modules/.installed  ## synthesize the CDK app offline, then cfn-lint it
	bash infra/synth.sh

fuzz: $(STAMP)  ## API fuzzing; MNEME_FUZZ_EXAMPLES=200 or MNEME_FUZZ_SEED=N for a deeper run
	$(BIN)/pytest tests/integration/test_fuzz.py

openapi: $(SERVE_STAMP) $(TS_CLIENT)/node_modules/.installed  ## regenerate docs/openapi.json from the resolvers, and the TypeScript client's types
	$(BIN)/mneme openapi --output docs/openapi.json
	cp docs/openapi.json shared/mneme/assets/openapi.json  # what GET /openapi.json serves
	cd $(TS_CLIENT) && npm run --silent generate

bench: $(STAMP)  ## print the quick benchmarks' figures (all of them: docs/performance.md)
	$(BIN)/python bench/retrieve.py
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/recall.py --sizes 10000
	$(BIN)/python bench/load.py

# The release files (docs/deploy.md, Releases): Mneme's and the SDK's wheels and sdists, the TypeScript package's
# tarball, each checked as its registry would. DIST=path puts them elsewhere (tests/integration/test_dist.py).
DIST ?= dist
dist: $(STAMP) $(TS_CLIENT)/node_modules/.installed  ## build and check the release files in dist/ (wheels, sdists, the TypeScript tarball)
	rm -rf $(DIST) build && mkdir -p $(DIST)
	$(BIN)/python -m build --no-isolation --outdir $(DIST) clients/python
	$(BIN)/python -m build --no-isolation --outdir $(DIST) .
	cd $(TS_CLIENT) && npm pack --silent --pack-destination $(abspath $(DIST))
	$(BIN)/twine check --strict $(DIST)/*.whl $(DIST)/*.tar.gz
	@ls -l $(DIST)

clean:  ## remove local build output (not .mneme data)
	rm -rf cdk.out infra/cdk.out .pytest_cache .mypy_cache .ruff_cache clients/typescript/dist dist build
