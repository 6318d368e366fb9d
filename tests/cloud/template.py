"""The synthesized template, read as a deployment would read it: functions, roles, API, state machine, schedule.

Nothing here restates the stack: every handler, variable, policy, method and definition comes from the
template. CloudFormation references (`Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Select`, `Fn::Split`, `Fn::Sub`)
resolve to one consistent set of fake physical values (region us-east-1, account 123456789012), except the
few a test deployment decides (`overrides`: the collection endpoint is osmem's URL, the secret's ARN is
the one moto generated).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REGION, ACCOUNT, PARTITION = "us-east-1", "123456789012", "aws"
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Function:
    name: str  # the stack's name for it: its description without "Mneme "
    logical_id: str
    physical_name: str
    handler: str  # module.attribute, as Lambda reads it
    environment: dict[str, str]  # resolved
    role_id: str
    memory_mb: int
    properties: dict[str, Any]


@dataclass(frozen=True)
class Method:
    http_method: str
    path: str  # the resource path, e.g. /v1/memories/{memory_id}
    function: str | None  # the integrated function's name
    authorizer_id: str | None
    api_key_required: bool = False


@dataclass(frozen=True)
class UsagePlan:
    """A usage plan's throttle, the stages it covers and the values of its API keys."""

    rate_limit: float
    burst_limit: int
    stages: list[str]  # stage names
    keys: set[str]  # API key values


STACK_UUID = "51af3dc0-da77-11e4-872e-1234567db123"  # the last part of a stack id, made when it is created


@dataclass(frozen=True)
class RateRule:
    """An AWS WAF rate-based rule of the stage's web ACL that counts every request together (CONSTANT)."""

    limit: int  # requests in the window, past which requests are blocked
    window_seconds: int
    status: int
    body: str


class Template:
    def __init__(
        self,
        raw: dict[str, Any],
        stack_name: str = "Mneme-dev",
        overrides: Mapping[Any, str] = {},
        stack_uuid: str = STACK_UUID,
    ) -> None:
        self.raw = raw
        self.stack_name = stack_name
        self.overrides = dict(overrides)
        self.stack_uuid = stack_uuid

    # -- resources -------------------------------------------------------------------------------
    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.raw["Resources"]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.resources.items() if r["Type"] == resource_type}

    def one(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        (found,) = self.of_type(resource_type).items()
        return found[0], found[1]["Properties"]

    def with_overrides(self, overrides: Mapping[Any, str]) -> Template:
        return Template(self.raw, self.stack_name, {**self.overrides, **overrides}, self.stack_uuid)

    # -- references ------------------------------------------------------------------------------
    def physical_name(self, logical_id: str) -> str:
        return f"{self.stack_name}-{logical_id}"

    def ref(self, logical_id: str) -> Any:
        if logical_id in PSEUDO:
            return PSEUDO[logical_id]
        if logical_id == "AWS::StackName":
            return self.stack_name
        if logical_id == "AWS::StackId":
            return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{self.stack_name}/{self.stack_uuid}"
        if logical_id in self.overrides:
            return self.overrides[logical_id]
        kind = self.resources[logical_id]["Type"]
        if kind in ("AWS::StepFunctions::StateMachine", "AWS::SecretsManager::Secret", "AWS::SNS::Topic"):
            return self.get_att(logical_id, "Arn")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.physical_name(logical_id)}"
        if kind == "AWS::Logs::LogGroup":
            return f"/aws/mneme/{logical_id}"
        return self.physical_name(logical_id)

    def get_att(self, logical_id: str, attribute: str) -> Any:
        if (logical_id, attribute) in self.overrides:
            return self.overrides[(logical_id, attribute)]
        kind = self.resources[logical_id]["Type"]
        name = self.physical_name(logical_id)
        arns = {
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::OpenSearchServerless::Collection": f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/{name.lower()}",
            "AWS::StepFunctions::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
            "AWS::SecretsManager::Secret": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{name}",
        }
        if attribute == "Arn" and kind == "AWS::Logs::LogGroup":
            return f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/mneme/{logical_id}:*"
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return name
        if kind == "AWS::SQS::Queue" and attribute == "QueueUrl":
            return self.ref(logical_id)
        if kind == "AWS::OpenSearchService::Domain":
            domain = self.resources[logical_id]["Properties"]["DomainName"]
            if attribute == "Arn":
                return f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{domain}"
            if attribute == "DomainEndpoint":
                return f"search-{domain}-abc123.{REGION}.es.amazonaws.com"
        if kind == "AWS::OpenSearchServerless::Collection" and attribute == "CollectionEndpoint":
            return f"https://{name.lower()}.{REGION}.aoss.amazonaws.com"
        if kind == "AWS::ApiGateway::RestApi" and attribute == "RootResourceId":
            return f"{logical_id}-root"
        raise KeyError(f"no fake value for {logical_id}.{attribute} ({kind})")

    def resolve(self, value: Any) -> Any:
        """A template value with every supported intrinsic function evaluated."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical_id, attribute)
            if key == "Fn::Join":  # of a list, or of an intrinsic that gives one (Fn::Split)
                parts = self.resolve(arg[1]) if isinstance(arg[1], dict) else arg[1]
                return str(arg[0]).join(str(self.resolve(part)) for part in parts)
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(self.resolve(arg[0]))]
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
            if key == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
                return re.sub(r"\$\{([^}]+)\}", lambda m: str(self._sub(m.group(1), names)), text)
            if key.startswith("Fn::"):
                raise NotImplementedError(f"intrinsic {key} is not supported by the tier's resolver")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, name: str, names: Mapping[str, Any]) -> Any:
        if name in names:
            return names[name]
        if "." in name:
            logical_id, attribute = name.split(".", 1)
            return self.get_att(logical_id, attribute)
        return self.ref(name)

    # -- functions -------------------------------------------------------------------------------
    def functions(self) -> dict[str, Function]:
        out = {}
        for lid, resource in self.of_type("AWS::Lambda::Function").items():
            props = resource["Properties"]
            name = props["Description"].removeprefix("Mneme ")
            out[name] = Function(
                name=name,
                logical_id=lid,
                physical_name=self.physical_name(lid),
                handler=props["Handler"],
                environment={k: str(v) for k, v in self.resolve(props["Environment"]["Variables"]).items()},
                role_id=props["Role"]["Fn::GetAtt"][0],
                memory_mb=int(props.get("MemorySize", 128)),
                properties=props,
            )
        return out

    def function_by_arn(self, arn: str) -> Function:
        base = arn.split(":function:")[-1].split(":")[0]
        for function in self.functions().values():
            if base in (function.physical_name, self.get_att(function.logical_id, "Arn")):
                return function
        raise KeyError(f"no function {arn} in the template")

    def role_statements(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement of the identity policies attached to a role (inline and AWS::IAM::Policy)."""
        role = self.resources[role_id]["Properties"]
        inline = [s for p in role.get("Policies", []) for s in as_list(p["PolicyDocument"]["Statement"])]
        attached = [
            statement
            for policy in self.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in as_list(policy["Properties"]["PolicyDocument"]["Statement"])
        ]
        if role.get("ManagedPolicyArns"):
            raise NotImplementedError(f"{role_id} has managed policies; the tier cannot read them")
        return self.resolve(inline + attached)  # type: ignore[no-any-return]

    def data_access_rules(self) -> list[dict[str, Any]]:
        """The OpenSearch Serverless data access policies' rules, with principals resolved."""
        rules = []
        for policy in self.of_type("AWS::OpenSearchServerless::AccessPolicy").values():
            rules.extend(json.loads(self.resolve(policy["Properties"]["Policy"])))
        return rules

    def domain_access_policy(self) -> list[dict[str, Any]]:
        """The managed OpenSearch domain's resource policy statements (none without a domain), resolved."""
        return [
            statement
            for domain in self.of_type("AWS::OpenSearchService::Domain").values()
            for statement in self.resolve(domain["Properties"].get("AccessPolicies", {})).get("Statement", [])
        ]

    # -- API -------------------------------------------------------------------------------------
    def resource_paths(self) -> dict[str, str]:
        _, api = self.one("AWS::ApiGateway::RestApi")
        del api
        out: dict[str, str] = {}

        def path_of(lid: str) -> str:
            if lid not in out:
                props = self.resources[lid]["Properties"]
                parent = props["ParentId"]
                base = "" if "Fn::GetAtt" in parent else path_of(parent["Ref"])
                out[lid] = f"{base}/{props['PathPart']}"
            return out[lid]

        for lid in self.of_type("AWS::ApiGateway::Resource"):
            path_of(lid)
        return out

    def methods(self) -> list[Method]:
        paths = self.resource_paths()
        by_id = {f.logical_id: f.name for f in self.functions().values()}
        methods = []
        for props in (r["Properties"] for r in self.of_type("AWS::ApiGateway::Method").values()):
            resource = props["ResourceId"]
            path = "/" if "Fn::GetAtt" in resource else paths[resource["Ref"]]
            integrated = [lid for lid in _get_atts(props.get("Integration", {})) if lid in by_id]
            authorizer = props.get("AuthorizerId", {}).get("Ref") if props["AuthorizationType"] != "NONE" else None
            function = by_id[integrated[0]] if integrated else None
            methods.append(Method(props["HttpMethod"], path, function, authorizer, props.get("ApiKeyRequired", False)))
        return methods

    def api_key_source(self) -> str:
        return str(self.one("AWS::ApiGateway::RestApi")[1].get("ApiKeySourceType", "HEADER"))

    def usage_plans(self) -> list[UsagePlan]:
        stage_names = {lid: r["Properties"]["StageName"] for lid, r in self.of_type("AWS::ApiGateway::Stage").items()}
        values = {
            lid: self.resolve(r["Properties"]["Value"]) for lid, r in self.of_type("AWS::ApiGateway::ApiKey").items()
        }
        plan_keys = [r["Properties"] for r in self.of_type("AWS::ApiGateway::UsagePlanKey").values()]
        plans = []
        for lid, resource in self.of_type("AWS::ApiGateway::UsagePlan").items():
            props = resource["Properties"]
            throttle = props.get("Throttle", {})
            plans.append(
                UsagePlan(
                    rate_limit=float(throttle.get("RateLimit", 10_000)),
                    burst_limit=int(throttle.get("BurstLimit", 5_000)),
                    stages=[stage_names[s["Stage"]["Ref"]] for s in props.get("ApiStages", [])],
                    keys={values[k["KeyId"]["Ref"]] for k in plan_keys if k["UsagePlanId"] == {"Ref": lid}},
                )
            )
        return plans

    def gateway_responses(self) -> dict[str, dict[str, Any]]:
        return {
            r["Properties"]["ResponseType"]: r["Properties"]
            for r in self.of_type("AWS::ApiGateway::GatewayResponse").values()
        }

    def authorizer(self, logical_id: str) -> dict[str, Any]:
        props = dict(self.resources[logical_id]["Properties"])
        (function,) = {
            lid for lid in _get_atts(props["AuthorizerUri"]) if self.resources[lid]["Type"] == "AWS::Lambda::Function"
        }
        props["function"] = self.resources[function]["Properties"]["Description"].removeprefix("Mneme ")
        return props

    def stage(self) -> dict[str, Any]:
        return self.one("AWS::ApiGateway::Stage")[1]

    def rate_rules(self) -> list[RateRule]:
        """The rate-based rules of the web ACLs associated with the stage; a rule the tier cannot model raises."""
        stage_id, _ = self.one("AWS::ApiGateway::Stage")
        rules = []
        for association in self.of_type("AWS::WAFv2::WebACLAssociation").values():
            props = association["Properties"]
            if {"Ref": stage_id} not in json.loads(json.dumps(props["ResourceArn"]))["Fn::Join"][1]:
                continue
            acl = self.resources[props["WebACLArn"]["Fn::GetAtt"][0]]["Properties"]
            bodies = acl.get("CustomResponseBodies", {})
            for rule in acl["Rules"]:
                rate = rule["Statement"].get("RateBasedStatement")
                if rate is None or rate["AggregateKeyType"] != "CONSTANT" or "Block" not in rule["Action"]:
                    raise NotImplementedError(f"the tier models CONSTANT rate-based block rules only: {rule['Name']}")
                custom = rule["Action"]["Block"].get("CustomResponse", {})
                body = bodies.get(custom.get("CustomResponseBodyKey"), {}).get("Content", "")
                rules.append(RateRule(int(rate["Limit"]), int(rate.get("EvaluationWindowSec", 300)),
                                      int(custom.get("ResponseCode", 403)), body))  # fmt: skip
        return rules

    # -- consolidation ---------------------------------------------------------------------------
    def state_machine(self) -> tuple[str, dict[str, Any]]:
        """(logical id, resolved properties with the definition parsed)."""
        lid, props = self.one("AWS::StepFunctions::StateMachine")
        resolved = self.resolve(props)
        if "DefinitionString" in resolved:
            resolved["Definition"] = json.loads(resolved.pop("DefinitionString"))
        return lid, resolved

    def schedules(self) -> list[dict[str, Any]]:
        return [self.resolve(r["Properties"]) for r in self.of_type("AWS::Scheduler::Schedule").values()]


def _get_atts(value: Any) -> list[str]:
    """The logical ids a value references through Fn::GetAtt."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return [value["Fn::GetAtt"][0]]
        return [lid for v in value.values() for lid in _get_atts(v)]
    if isinstance(value, list):
        return [lid for v in value for lid in _get_atts(v)]
    return []
