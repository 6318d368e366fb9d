"""CDK entry point, run by the CDK CLI from infra/ (see cdk.json): `npx cdk synth`, or infra/synth.sh."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, so `infra` is a package

from infra.mneme_infra.stack import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
