"""IAM statements that CDK has no `grant_*` for: Bedrock models by id, and recall's one kind of table write.

Bedrock: `bedrock:InvokeModel` (which also covers the Converse API) on exactly the configured models.
A plain model id is a foundation model in the stack's region. An id with a geographic prefix
(`us.anthropic...`) is a cross-region inference profile: the role needs the profile in its own region and
the underlying foundation model in every region the profile may route to, which AWS does not list in
advance (hence the `*` region on that one model id). An ARN is granted as it names: a foundation model's
as is; a system inference profile's with its model in any region, like its id; an application inference
profile's with any foundation model in any region *only through that profile* (condition key
`bedrock:InferenceProfileArn`): the model behind it was chosen when it was created and is not in its ARN
("Prerequisites for inference profiles", Amazon Bedrock user guide).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

# Prefixes of Bedrock's cross-region inference profiles (system-defined profile ids).
INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "ca.", "global.")


def is_inference_profile(model_id: str) -> bool:
    return model_id.startswith(INFERENCE_PROFILE_PREFIXES)


def arn_kind(model_id: str) -> str | None:
    """`foundation-model`, `inference-profile` or `application-inference-profile` for an ARN; None for an id."""
    if not model_id.startswith("arn:"):
        return None
    return model_id.split(":", 5)[5].split("/", 1)[0]


def profile_id(model_id: str) -> str | None:
    """The system inference profile a model id or a profile ARN names, None for anything else."""
    if arn_kind(model_id) == "inference-profile":
        return model_id.split("/", 1)[1]
    return model_id if arn_kind(model_id) is None and is_inference_profile(model_id) else None


def bedrock_model_arns(scope: Construct, model_id: str) -> list[str]:
    """The resources `bedrock:InvokeModel` must allow for `model_id` without a condition (module docstring)."""
    stack = Stack.of(scope)
    kind, profile = arn_kind(model_id), profile_id(model_id)
    if kind in ("foundation-model", "application-inference-profile"):
        return [model_id]
    if profile is None:
        return [stack.format_arn(service="bedrock", account="", resource="foundation-model", resource_name=model_id)]
    if kind is None:  # a profile id: the profile in the stack's own region
        model_id = stack.format_arn(service="bedrock", resource="inference-profile", resource_name=model_id)
    return [model_id, base_model_arn(profile)]


def base_model_arn(model_id: str) -> str:
    return f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{model_id.split('.', 1)[1]}"


ANY_FOUNDATION_MODEL = f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/*"


def through_application_profiles_statement(model_ids: list[str]) -> iam.PolicyStatement | None:
    """Any foundation model, in any region, but only when called through one of these application profiles."""
    profiles = [m for m in dict.fromkeys(model_ids) if arn_kind(m) == "application-inference-profile"]
    if not profiles:
        return None
    return iam.PolicyStatement(
        sid="InvokeModelsThroughApplicationProfilesOnly",
        actions=["bedrock:InvokeModel"],
        resources=[ANY_FOUNDATION_MODEL],
        conditions={"StringEquals": {"bedrock:InferenceProfileArn": profiles}},
    )


def nag_resource(arn: str) -> str:
    return arn.replace(Aws.PARTITION, "<AWS::Partition>")


def model_acknowledgments(model_ids: list[str]) -> list[Acknowledgment]:
    """cdk-nag flags the any-region models an inference profile reaches; say why each is needed."""
    acknowledgments = [
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_resource(base_model_arn(profile))}]",
            reason=f"Inference profile {profile} routes requests to this one model in regions AWS chooses, "
            "so the model is allowed in any region; no other model is.",
        )
        for profile in dict.fromkeys(filter(None, map(profile_id, model_ids)))
    ]
    if through_application_profiles_statement(model_ids) is not None:
        acknowledgments.append(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_resource(ANY_FOUNDATION_MODEL)}]",
                reason="An application inference profile's ARN does not say which model it routes to: any model, "
                "but only through the configured profile (condition bedrock:InferenceProfileArn).",
            )
        )
    return acknowledgments


def invoke_models_statement(scope: Construct, model_ids: list[str]) -> iam.PolicyStatement:
    resources = [arn for model_id in dict.fromkeys(model_ids) for arn in bedrock_model_arns(scope, model_id)]
    return iam.PolicyStatement(sid="InvokeConfiguredModels", actions=["bedrock:InvokeModel"], resources=resources)


# The table actions the adapter calls (measured by tests/cloud: every DynamoDB call each function makes).
# Narrower than CDK's grant_read_data/grant_read_write_data, which add Scan, DescribeTable and the stream
# actions (GetRecords, GetShardIterator): the adapter never scans, reads no stream (the table has none) and
# never describes the table. Writers need ConditionCheckItem: a draft memory's transaction checks that its
# key's published slot does not exist (`dynamo_codec.check`).
TABLE_READ_ACTIONS = ("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query")
TABLE_WRITE_ACTIONS = (
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)


# `mneme.adapters.dynamo_codec.delivered_pk`: T#<tenant>#DELIVERED#<principal>#<session>. No other key
# builder writes a DELIVERED segment, and escaped parts (tenant, principal) cannot contain '#'.
DELIVERED_PARTITIONS = "T#*#DELIVERED#*"


def delivered_writes_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """recall records which memories it delivered in a session (`add_delivered`, a BatchWriteItem of puts);
    the condition limits every written item to those partitions, so recall cannot write records."""
    return iam.PolicyStatement(
        sid="WriteDeliveredSessionMarkersOnly",
        actions=["dynamodb:BatchWriteItem", "dynamodb:PutItem"],
        resources=[table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [DELIVERED_PARTITIONS]}},
    )


# `mneme.adapters.dynamo_codec.episode_key`: PK T#<tenant>#EPISODES; no other record lives in such a partition.
EPISODE_PARTITIONS = "T#*#EPISODES"


def indexed_marks_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """The index repair marks swept episodes indexed (`mark_indexed`, an UpdateItem per episode); the
    condition limits its writes to episode partitions, so it cannot write any other record."""
    return iam.PolicyStatement(
        sid="MarkEpisodesIndexedOnly",
        actions=["dynamodb:UpdateItem"],
        resources=[table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [EPISODE_PARTITIONS]}},
    )


# `mneme.adapters.dynamo_codec.apikey_key`: APIKEY#<sha256 of the key>. The authorizer reads nothing else.
API_KEY_PARTITIONS = "APIKEY#*"


def api_key_reads_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """The authorizer's one call (`DynamoApiKeys.get_api_key`, a GetItem), on API-key items only: a leaked
    authorizer role cannot read tenants' records."""
    return iam.PolicyStatement(
        sid="ReadApiKeysOnly",
        actions=["dynamodb:GetItem"],
        resources=[table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [API_KEY_PARTITIONS]}},
    )


# `mneme.adapters.dynamo_codec.tenant_apikey_key`: T#<tenant>#APIKEYS, each tenant's copy of its keys.
TENANT_API_KEY_PARTITIONS = "T#*#APIKEYS"


def no_api_key_writes_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """Every writer but the one serving /v1/keys: no write that touches an API-key item (any of the
    written partitions, also inside a batch or a transaction, which IAM judges per item). So a leaked
    writer role cannot mint a key for any tenant. An explicit Deny wins over the table grant."""
    return iam.PolicyStatement(
        sid="NeverWriteApiKeys",
        effect=iam.Effect.DENY,
        actions=list(TABLE_WRITE_ACTIONS),
        resources=[table.table_arn],
        conditions={
            "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": [API_KEY_PARTITIONS, TENANT_API_KEY_PARTITIONS]}
        },
    )
