"""Episodes and facts as records through the deployed shape: the records function (its environment and role),
DynamoDB and the OpenSearch collection. List with a metadata filter, recall with one (inside the OpenSearch
queries), forget an episode (a writer) and a fact (an approver), the tombstones in the change feed."""

from __future__ import annotations

from tests.cloud.conftest import Cloud
from tests.cloud.test_consolidation import EPISODES, SCOPE, execution_arn, remember
from tests.cloud.test_scenarios import key


def consolidated(cloud: Cloud, admin: str) -> list[str]:
    episode_ids = remember(cloud, admin)
    cloud.later(minutes=15)
    (run,) = cloud.fire_schedule().payload["runs"]
    assert cloud.deployment.wait_for_execution(execution_arn(cloud, run["run_id"]))["status"] == "SUCCEEDED"
    return episode_ids


def records_calls_were_allowed(cloud: Cloud, since: int) -> None:
    invocations = [i for i in cloud.deployment.invocations[since:] if i.function == "records"]
    assert invocations, "the records function served no request"
    calls = [c for i in invocations for c in i.calls]
    assert calls and all(c.decision.allowed for c in calls), [c for c in calls if not c.decision.allowed]
    assert {c.request.action.split(":")[0] for c in calls} >= {"dynamodb"}


def test_list_and_recall_filter_on_metadata_and_forget_an_episode(cloud: Cloud, admin: str) -> None:
    episode_ids = consolidated(cloud, admin)
    writer = key(cloud, admin, "bot", "writer")
    start = cloud.api("GET", "/v1/changes", key=writer).json()["next_cursor"]
    before = len(cloud.deployment.invocations)

    listed = cloud.api("GET", "/v1/episodes", key=writer, query={"scope": SCOPE, "metadata.n": "1"})
    assert listed.status == 200, str(listed)
    assert [e["id"] for e in listed.json()["episodes"]] == [episode_ids[1]]
    assert listed.json()["episodes"][0]["content"] == EPISODES[1]
    page = cloud.api("GET", "/v1/episodes", key=writer, query={"scope": "root", "limit": "2"}).json()
    rest = cloud.api("GET", "/v1/episodes", key=writer, query={"cursor": page["next_cursor"]}).json()
    assert sorted(e["id"] for e in page["episodes"] + rest["episodes"]) == sorted(episode_ids)
    one = cloud.api("GET", f"/v1/episodes/{episode_ids[0]}", key=writer)
    assert one.status == 200 and one.json()["facts"], str(one)  # the facts consolidation drew from it

    query = {"query": "Pennine Joinery VAT scheme", "kinds": ["episode"], "metadata": {"n": [0, 2]}}
    recalled = cloud.api("POST", "/v1/recall", query, key=writer)
    assert recalled.status == 200, str(recalled)
    assert sorted(r["id"] for r in recalled.json()["results"]) == sorted([episode_ids[0], episode_ids[2]])

    forgot = cloud.api("DELETE", f"/v1/episodes/{episode_ids[0]}", key=writer, query={"reason": "asked to"})
    assert forgot.status == 200, str(forgot)
    assert {s["action"] for s in forgot.json()["settled"]} <= {"regrounded", "stale", "rebuilt", "retracted"}
    again = cloud.api("POST", "/v1/recall", {**query, "metadata": {"n": 0}}, key=writer)
    assert again.status == 200 and again.json()["results"] == [], str(again)
    gone = cloud.api("GET", f"/v1/episodes/{episode_ids[0]}", key=writer)
    assert gone.status == 404 and gone.json()["error"]["code"] == "episode_forgotten"
    cloud.later(minutes=1)  # past the feed's settle horizon
    feed = cloud.api("GET", "/v1/changes", key=writer, query={"cursor": start}).json()["changes"]
    assert {"id": episode_ids[0], "kind": "episode", "deleted": True} in [
        {k: c[k] for k in ("id", "kind", "deleted")} for c in feed
    ]
    records_calls_were_allowed(cloud, before)


def test_forgetting_a_fact_needs_an_approver_and_other_tenants_see_nothing(cloud: Cloud, admin: str) -> None:
    consolidated(cloud, admin)
    writer, approver = key(cloud, admin, "bot", "writer"), key(cloud, admin, "rita", "approver")
    facts = cloud.api("GET", "/v1/facts", key=writer, query={"scope": SCOPE}).json()["facts"]
    (fact,) = [f for f in facts if f["entity"]]
    outsider = cloud.operator_key("globex", "eve", "admin")
    for method, path in (("GET", f"/v1/facts/{fact['id']}"), ("DELETE", f"/v1/facts/{fact['id']}")):
        assert cloud.api(method, path, key=outsider).status == 404
    assert cloud.api("GET", "/v1/facts", key=outsider).json()["facts"] == []
    before = len(cloud.deployment.invocations)

    refused = cloud.api("DELETE", f"/v1/facts/{fact['id']}", key=writer)
    assert refused.status == 403, str(refused)
    corrected = cloud.api("PATCH", f"/v1/facts/{fact['id']}", {"version": 1, "value": "standard rate"}, key=approver)
    assert corrected.status == 200 and corrected.json()["version"] == 2, str(corrected)
    forgot = cloud.api("DELETE", f"/v1/facts/{fact['id']}", key=approver)
    assert forgot.status == 200, str(forgot)
    after = cloud.api("POST", "/v1/recall", {"query": "Pennine Joinery VAT scheme", "kinds": ["fact"]}, key=approver)
    assert fact["id"] not in [r["id"] for r in after.json()["results"]]
    assert cloud.api("GET", f"/v1/facts/{fact['id']}", key=approver).json()["error"]["code"] == "fact_forgotten"
    records_calls_were_allowed(cloud, before)
