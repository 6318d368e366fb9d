"""The search index's home: an OpenSearch Serverless VECTORSEARCH collection and its three policies.

The collection's name carries its create-only settings (`InfraConfig.collection_name`) and it has no
tags, so a change of standby replicas, key or app tags replaces it (new name, policies named after it)
instead of failing the update. A replacement starts empty: `mneme reindex` rebuilds it from the table.

- encryption: AWS-owned key by default, or a customer-managed KMS key (`search_encryption`).
- network: the collection's endpoint is public (no VPC to run in yet); every request still needs SigV4
  and a principal named in the data access policy. A VPC endpoint variant can replace this policy later.
- data access: only the roles handed to `allow` (readers: search; writers: also create the index and
  write documents), on this collection's one index. Granted together with IAM `aoss:APIAccessAll`.
  Operators named in `search_operator_arns` get the writers' access (for `mneme reindex`); their own IAM
  policy must allow `aoss:APIAccessAll` on the collection (docs/deploy.md).

There is no `AWS::OpenSearchServerless::Index`: its CloudFormation schema has no `date` field type (the
mapping's `occurred_at`) and no `dynamic: strict`, so the application creates the index itself on first
write (`OpenSearchIndex.ensure_index`, mapping `index_body(MNEME_EMBEDDER__DIMENSIONS)`), which is why
writers hold `aoss:CreateIndex`. One mapping source, the adapter's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_opensearchserverless as aoss
from constructs import Construct

from infra.mneme_infra.config import InfraConfig

COLLECTION_TYPE = aoss.CfnCollection.CFN_RESOURCE_TYPE_NAME
READ = ("aoss:DescribeIndex", "aoss:ReadDocument")
WRITE = (*READ, "aoss:CreateIndex", "aoss:WriteDocument")


class Search(Construct):
    service = "aoss"

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        name = config.collection_name
        collection_rule = {"ResourceType": "collection", "Resource": [f"collection/{name}"]}
        self.key: kms.Key | None = None
        key_choice: dict[str, object] = {"AWSOwnedKey": True}
        if config.search_encryption == "customer_managed":
            self.key = kms.Key(self, "Key", description=f"Mneme search collection {name}", enable_key_rotation=True,
                               removal_policy=config.removal, pending_window=Duration.days(30))  # fmt: skip
            key_choice = {"AWSOwnedKey": False, "KmsARN": self.key.key_arn}
        encryption = aoss.CfnSecurityPolicy(
            self,
            "Encryption",
            name=f"{name}-enc",
            type="encryption",
            policy=Stack.of(self).to_json_string({"Rules": [collection_rule], **key_choice}),
        )
        network = aoss.CfnSecurityPolicy(
            self,
            "Network",
            name=f"{name}-net",
            type="network",
            policy=json.dumps([{"Rules": [collection_rule], "AllowFromPublic": True}]),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=name,
            type="VECTORSEARCH",
            description=f"Mneme search index ({config.stage}): derived from the table, rebuildable",
            standby_replicas="ENABLED" if config.search_standby_replicas else "DISABLED",
        )
        self.collection.node.add_dependency(encryption, network)  # a collection needs its policies first
        # Derived data (DESIGN §3: rebuilt from the table by `reindex`) that bills OCUs while it exists:
        # deleted with the stack whatever `removal_policy` says, so a teardown leaves nothing billing.
        self.collection.apply_removal_policy(RemovalPolicy.DESTROY)
        self.index_name = config.search_index_name

    @property
    def endpoint(self) -> str:
        return self.collection.attr_collection_endpoint

    def allow(self, *, readers: Sequence[iam.IRole], writers: Sequence[iam.IRole]) -> aoss.CfnAccessPolicy:
        """The data access policy and the matching IAM grant; call once, with every role that needs the index."""
        index = [f"index/{self.config.collection_name}/{self.index_name}"]
        statements = [
            {
                "Description": f"Mneme functions that {verb} the index",
                "Rules": [{"ResourceType": "index", "Resource": index, "Permission": list(permissions)}],
                "Principal": [role.role_arn for role in roles],
            }
            for verb, roles, permissions in (("read", readers, READ), ("write", writers, WRITE))
            if roles
        ]
        if self.config.search_operator_arns:
            statements.append(
                {
                    "Description": "Operators who rebuild the index (mneme reindex)",
                    "Rules": [{"ResourceType": "index", "Resource": index, "Permission": list(WRITE)}],
                    "Principal": list(self.config.search_operator_arns),
                }
            )
        for role in [*readers, *writers]:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="SearchCollectionApi", actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn]
                )
            )
        return aoss.CfnAccessPolicy(
            self,
            "DataAccess",
            name=f"{self.config.collection_name}-data",
            type="data",
            policy=Stack.of(self).to_json_string(statements),
        )
