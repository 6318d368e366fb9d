"""Logger, tracer and metrics for every function, created once at the package root."""

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "mneme"
NAMESPACE = "Mneme"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
