"""The search index on a managed OpenSearch Service domain (`-c mneme:search=domain`): one small node for a
small tenant, instead of the Serverless collection (search.py). The adapter speaks to it as `service=es`
(`bootstrap.build_opensearch_index`: writes wait for the refresh, so there is no fresh window).

- one data node (`search_domain_instance_type`, t3.small.search by default, the smallest current
  generation type: https://docs.aws.amazon.com/opensearch-service/latest/developerguide/supported-instance-types.html),
  one Availability Zone, no dedicated master, gp3 EBS 10 GiB. One node holds no replica: losing it loses
  the index until `mneme reindex` rebuilds it from the table (the index is derived data, DESIGN §3).
- encryption at rest (AWS-owned key) and node-to-node; HTTPS only, TLS 1.2 at least.
- no VPC, like the Serverless collection: the endpoint is public, and every request must be SigV4-signed
  by a principal the domain's access policy names: the functions' roles (readers: search; writers: also
  create the index and write documents) and the operators in `search_operator_arns`, each on this index
  only. No fine-grained access control: the resource policy is the only gate, and it names roles, never `*`.
  The roles' own IAM policies grant the same `es:ESHttp*` actions on the same paths.

The access policy is set on the L1 resource (`AccessPolicies`) rather than through `Domain.add_access_policies`,
which installs a custom resource (a Lambda function calling UpdateDomainConfig) to do the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from infra.mneme_infra.config import InfraConfig

# The newest OpenSearch engine aws-cdk-lib 2.275 names (EngineVersion); k-NN is built into every
# OpenSearch version (https://docs.aws.amazon.com/opensearch-service/latest/developerguide/knn.html).
ENGINE = opensearch.EngineVersion.OPENSEARCH_3_7
VOLUME_GIB = 10
# Search and count are POSTs with a body (GET with a body is also allowed); the index check a HEAD.
READ = ("es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost")
WRITE = (*READ, "es:ESHttpPut")  # PUT creates the index and adds mapping fields; _bulk is a POST
# Paths under the index (adapters/opensearch/index.py and lifecycle.py), listed so no grant needs a wildcard.
READ_PATHS = ("", "/_search", "/_count", "/_mapping")
WRITE_PATHS = (*READ_PATHS, "/_bulk", "/_delete_by_query")
_ACKNOWLEDGMENTS = (
    Acknowledgment(
        id="AwsSolutions-OS1",
        reason="No VPC, as for the Serverless collection: every request is SigV4-signed and the domain's "
        "access policy names only the functions' roles and the operators.",
    ),
    Acknowledgment(
        id="AwsSolutions-OS3",
        reason="Access is restricted by IAM principals (the access policy names roles), not by IP: Lambda "
        "outside a VPC has no fixed address.",
    ),
    Acknowledgment(
        id="AwsSolutions-OS4",
        reason="One data node for a small tenant: a dedicated master would triple the idle cost; the index "
        "is derived data that `mneme reindex` rebuilds.",
    ),
    Acknowledgment(
        id="AwsSolutions-OS7",
        reason="One node in one zone by choice (docs/deploy.md compares it with Serverless): zone awareness "
        "needs two nodes.",
    ),
    *(
        Acknowledgment(
            id=f"AwsSolutions-OS9[LogExport::{log}]",
            reason="Slow logs need a CloudWatch Logs resource policy (a custom resource) and bill per GB; "
            "the functions already log each search's latency and outcome.",
        )
        for log in ("SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS")
    ),
)


class SearchDomain(Construct):
    service = "es"

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.index_name = config.search_index_name
        self.domain_name = f"mneme-{config.stage}"
        self.domain = opensearch.Domain(
            self,
            "Domain",
            domain_name=self.domain_name,
            version=ENGINE,
            capacity=opensearch.CapacityConfig(
                data_nodes=1,
                data_node_instance_type=config.search_domain_instance_type,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(volume_size=VOLUME_GIB, volume_type=ec2.EbsDeviceVolumeType.GP3),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=False),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            # Derived data (DESIGN §3) that bills instance-hours while it exists: deleted with the stack.
            removal_policy=RemovalPolicy.DESTROY,
        )
        Validations.of(self.domain).acknowledge(*_ACKNOWLEDGMENTS)

    @property
    def endpoint(self) -> str:
        return f"https://{self.domain.domain_endpoint}"

    def _arn(self, path: str) -> str:
        """An ARN under this domain, built from its name (the domain's own policy cannot reference its ARN)."""
        return Stack.of(self).format_arn(service="es", resource="domain", resource_name=f"{self.domain_name}{path}")

    def allow(self, *, readers: Sequence[iam.IRole], writers: Sequence[iam.IRole]) -> None:
        """The domain's access policy and the roles' IAM grants; call once, with every role that needs the index."""
        index = f"/{self.index_name}"
        read_paths = [self._arn(index + path) for path in READ_PATHS]
        write_paths = [self._arn(index + path) for path in WRITE_PATHS]
        operators = list(self.config.search_operator_arns)
        no_one: list[str] = []
        grants: tuple[tuple[str, Sequence[iam.IRole], list[str], tuple[str, ...], list[str]], ...] = (
            ("SearchDomainRead", readers, no_one, READ, read_paths),
            ("SearchDomainWrite", writers, operators, WRITE, write_paths),
        )
        statements: list[dict[str, object]] = []
        for sid, roles, others, actions, resources in grants:
            for role in roles:
                role.add_to_principal_policy(iam.PolicyStatement(sid=sid, actions=list(actions), resources=resources))
            if principals := [*(role.role_arn for role in roles), *others]:
                statements.append(
                    {
                        "Sid": sid,
                        "Effect": "Allow",
                        "Principal": {"AWS": principals},
                        "Action": list(actions),
                        "Resource": resources,
                    }
                )
        cfn = self.domain.node.default_child
        assert isinstance(cfn, opensearch.CfnDomain)
        cfn.access_policies = {"Version": "2012-10-17", "Statement": statements}
