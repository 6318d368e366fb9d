#!/usr/bin/env bash
# Synthesize the CDK app offline, lint the templates and check the Lambda packages. Needs .venv and `npm ci` (the pinned CDK CLI).
# Assets are bundled without Docker (infra/layer_bundling.py); pip fetches the locked, hashed packages of the
# dependency layer (infra/layer-requirements.txt) from PyPI. No AWS call.
# Extra arguments go to `cdk synth`, e.g. infra/synth.sh -c mneme:stage=alice
set -euo pipefail
cd "$(dirname "$0")"

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20  # Node 20 is end-of-life; jsii says so on every start
export CDK_DISABLE_CLI_TELEMETRY=true                     # no network calls beyond PyPI

rm -rf cdk.out  # assets are hashed by content, so nothing is reused; lint only this run
npx --no-install cdk synth --quiet --no-notices "$@"

# W3005 ("dependency already enforced by a GetAtt"): CDK makes each Lambda function DependsOn its role
# (and role policy) so the policy exists before the function; the role half is redundant with the
# function's Role GetAtt, which cfn-lint flags; harmless. Nothing else is ignored: any other finding fails.
../.venv/bin/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json
# Unzipped size of every function with its layers (Lambda's limit: 250 MB); no torch, onnxruntime or CDK.
../.venv/bin/python package_report.py cdk.out
echo "synth + cfn-lint + package report OK: $(ls cdk.out/*.template.json | tr '\n' ' ')"
