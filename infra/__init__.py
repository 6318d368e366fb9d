"""Mneme's AWS infrastructure: the CDK app (`app.py`), its constructs (`mneme_infra/`) and asset bundling."""
