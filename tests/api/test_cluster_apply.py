"""``POST /cluster/apply`` in-process: a cluster file becomes the inventory in one transaction,
never dropping a running gang unless asked to requeue it; and ``PUT /policy`` refuses a policy
the lint finds an error in, answering its warnings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.api.conftest import CLUSTER_FILE, Api
from tests.api.test_cluster import _running, policy_body
from topoq.discovery.clusterfile import cluster_document
from topoq.discovery.sources import load_cluster
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec

V1 = "/api/v1"
APPLY = f"{V1}/cluster/apply"


def cluster_body(
    nodes: list[NodeSpec] | None = None, *, drain: bool = False, dry_run: bool = False
) -> dict[str, Any]:
    cluster = load_cluster(CLUSTER_FILE)
    document = cluster_document(cluster.nodes if nodes is None else nodes, cluster.topology, "next")
    return {"document": document, "drain": drain, "dryRun": dry_run}


def with_extra_node() -> list[NodeSpec]:
    nodes = list(load_cluster(CLUSTER_FILE).nodes)
    extra = replace(nodes[-1], name=NodeName("p5-0009"))
    labels = dict(extra.labels) | {HOSTNAME_LABEL: "p5-0009"}
    return [*nodes, replace(extra, labels=labels)]


def without(names: list[str]) -> list[NodeSpec]:
    return [node for node in load_cluster(CLUSTER_FILE).nodes if node.name not in names]


def node_names(api: Api) -> list[str]:
    return [
        node["name"] for node in api.client.get(f"{V1}/nodes", headers=api.headers("viewer")).json()
    ]


def test_a_dry_run_answers_the_difference_and_stores_nothing(api: Api) -> None:
    answer = api.client.post(
        APPLY, json=cluster_body(with_extra_node(), dry_run=True), headers=api.headers("admin")
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["applied"], body["dryRun"], body["nodes"]) == (False, True, 9)
    assert [node["name"] for node in body["added"]] == ["p5-0009"]
    assert body["removed"] == [] and body["changed"] == [] and body["requeued"] == []
    assert "p5-0009" not in node_names(api)


def test_an_added_node_is_stored_audited_and_placed_on(api: Api) -> None:
    answer = api.client.post(
        APPLY, json=cluster_body(with_extra_node()), headers=api.headers("admin")
    )
    assert answer.status_code == 200 and answer.json()["applied"] is True
    assert "p5-0009" in node_names(api)
    [entry] = [
        e
        for e in api.client.get(f"{V1}/audit", headers=api.headers("admin")).json()
        if e["action"] == "inventory"
    ]
    assert entry["actor"] == "admin" and entry["detail"]["added"] == ["p5-0009"]
    again = api.client.post(
        APPLY, json=cluster_body(with_extra_node()), headers=api.headers("admin")
    )
    assert again.json()["applied"] is False  # no difference: nothing written


def test_removing_a_node_a_gang_runs_on_is_refused_without_drain(api: Api) -> None:
    first, _ = _running(api, "r")
    refused = api.client.post(
        APPLY, json=cluster_body(without([first])), headers=api.headers("admin")
    )
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert f"removes node {first} (r run there)" in detail["message"]
    assert "--drain" in detail["hint"]
    assert first in node_names(api)
    job = api.client.get(f"{V1}/jobs/r", headers=api.headers("admin")).json()
    assert job["phase"] == "running"


def test_with_drain_the_gang_is_requeued_and_runs_elsewhere(api: Api) -> None:
    first, _ = _running(api, "r")
    admin = api.headers("admin")
    answer = api.client.post(APPLY, json=cluster_body(without([first]), drain=True), headers=admin)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["requeued"] == ["r"] and body["removed"] == [{"name": first, "jobs": ["r"]}]
    assert first not in node_names(api)
    job = api.client.get(f"{V1}/jobs/r", headers=admin).json()
    assert job["phase"] == "pending" and "inventory change" in job["history"][-1]["cause"]
    api.controller.step()
    assert api.executor.cancelled == ["r"]
    again = api.client.get(f"{V1}/jobs/r", headers=admin).json()
    assert again["phase"] == "admitted" and first not in again["allocation"]["nodes"]


def test_a_node_shrunk_under_its_gang_is_a_change_that_needs_drain(api: Api) -> None:
    first, _ = _running(api, "r")
    nodes = list(load_cluster(CLUSTER_FILE).nodes)
    smaller = [
        replace(n, allocatable=n.allocatable - n.allocatable.restricted_to(["nvidia.com/gpu"]))
        if n.name == first
        else n
        for n in nodes
    ]
    refused = api.client.post(
        APPLY, json=cluster_body(smaller, dry_run=True), headers=api.headers("admin")
    )
    [change] = refused.json()["changed"]
    assert change["name"] == first and change["shortOf"] == ["nvidia.com/gpu"]
    assert refused.json()["requeued"] == ["r"]
    assert (
        api.client.post(APPLY, json=cluster_body(smaller), headers=api.headers("admin")).status_code
        == 409
    )


def test_a_malformed_cluster_is_a_422_naming_the_field_and_nothing_is_stored(api: Api) -> None:
    body = cluster_body(with_extra_node())
    body["document"]["nodes"][3]["allocatable"] = {"nvidia.com/gpu": "many"}
    answer = api.client.post(APPLY, json=body, headers=api.headers("admin"))
    assert answer.status_code == 422
    assert answer.json()["detail"]["where"].startswith("body.document")
    assert "p5-0009" not in node_names(api)
    levels = cluster_body()
    levels["document"]["levels"] = ["kubernetes.io/hostname"]
    other = api.client.post(APPLY, json=levels, headers=api.headers("admin"))
    assert other.status_code == 422 and "restart" in other.json()["detail"]["hint"]


def test_only_admins_apply_a_cluster(api: Api) -> None:
    answer = api.client.post(APPLY, json=cluster_body(), headers=api.headers("team-admin"))
    assert answer.status_code == 403


# --- the policy lint on PUT /policy -------------------------------------------------------
def test_a_policy_the_lint_finds_an_error_in_is_refused_and_not_kept(api: Api) -> None:
    body = policy_body()
    body["teams"][0]["quotas"][0]["instances"] = 10  # with vision's 4: 14 of 8 nodes
    answer = api.client.put(f"{V1}/policy", json=body, headers=api.headers("admin"))
    assert answer.status_code == 422
    assert "GUARANTEES_EXCEED_CAPACITY" in answer.json()["detail"]["message"]
    versions = api.client.get(f"{V1}/policy/versions", headers=api.headers("admin")).json()
    assert len(versions) == 1


def test_a_policy_with_a_lint_warning_is_kept_and_the_warning_answered(api: Api) -> None:
    body = policy_body()
    body["teams"].append({"name": "research"})  # no guarantee
    answer = api.client.put(f"{V1}/policy", json=body, headers=api.headers("admin"))
    assert answer.status_code == 200, answer.text
    warnings = answer.json()["warnings"]
    assert warnings and {w["severity"] for w in warnings} == {"warning"}
    assert any("research" in w["message"] for w in warnings)
