"""The policy as Kueue objects (``discovery.kueue_policy``), object by object; that real Kueue
accepts them and makes every queue Active is tests/k8s/test_kueue_export.py."""

from __future__ import annotations

from typing import Any

import pytest

from topoq.discovery.kueue_policy import ROOT_COHORT, TEAMS_COHORT, kueue_objects
from topoq.discovery.kueue_policy_import import policy_from_kueue
from topoq.discovery.policy import policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

TOPOLOGY = TopologySpec("aws", ("topology.k8s.aws/network-node-layer-1", "kubernetes.io/hostname"))


def policy(teams: list[dict[str, Any]], cohorts: list[dict[str, Any]] | None = None) -> Any:
    document: dict[str, Any] = {"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": teams}
    if cohorts:
        document["cohorts"] = cohorts
    return policy_from_document(document, source="test")


def team(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "quotas": [{"flavor": "p5.48xlarge", "instances": 2}], **fields}


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def gpu(queue: dict[str, Any]) -> dict[str, Any]:
    [group] = queue["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")


def test_each_sharing_strategy_becomes_its_limits() -> None:
    objects = kueue_objects(
        policy(
            [
                team("both", sharing="LendAndBorrow", borrowLimitPercent=50),
                team("lends", sharing="Lend"),
                team("keeps", sharing="DontLend"),
            ]
        ),
        TOPOLOGY,
    )
    queues = by_kind(objects, "ClusterQueue")
    assert gpu(queues["both"]) == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "16",
        "borrowingLimit": "8",
    }
    assert gpu(queues["lends"])["borrowingLimit"] == "0" and "lendingLimit" not in gpu(
        queues["lends"]
    )
    assert gpu(queues["keeps"])["lendingLimit"] == "0"
    assert all(q["spec"]["cohortName"] == TEAMS_COHORT for q in queues.values())


def test_the_cohort_tree_lends_nothing_across_top_level_cohorts() -> None:
    objects = kueue_objects(
        policy(
            [team("a", cohort=["org", "x"]), team("b", cohort=["other"]), team("c")],
            [{"name": "org"}, {"name": "x", "parent": ["org"]}],
        ),
        TOPOLOGY,
        idle={"p5.48xlarge": Resources({"nvidia.com/gpu": 24})},
    )
    cohorts = by_kind(objects, "Cohort")
    assert set(cohorts) == {ROOT_COHORT, TEAMS_COHORT, "org", "other", "x"}
    assert cohorts["x"]["spec"]["parentName"] == "org"
    assert cohorts["org"]["spec"]["parentName"] == ROOT_COHORT
    top = cohorts["org"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["lendingLimit"] for r in top} == {"0"}
    root = cohorts[ROOT_COHORT]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert root == [{"name": "nvidia.com/gpu", "nominalQuota": "24"}]
    assert by_kind(objects, "ClusterQueue")["a"]["spec"]["cohortName"] == "x"


def test_queueing_preemption_weight_and_a_held_team() -> None:
    objects = kueue_objects(
        policy(
            [
                team("strict", queueing="strict-fifo", preemptTeamTasks="Never", active=False),
                team("heavy", fairShareWeight=3),
            ]
        ),
        TOPOLOGY,
        namespace_pattern="hyperpod-ns-{team}",
    )
    queues = by_kind(objects, "ClusterQueue")
    strict = queues["strict"]["spec"]
    assert strict["queueingStrategy"] == "StrictFIFO"
    assert strict["preemption"]["withinClusterQueue"] == "Never"
    assert strict["stopPolicy"] == "Hold"
    assert queues["heavy"]["spec"]["fairSharing"] == {"weight": 3}
    assert queues["heavy"]["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    local = by_kind(objects, "LocalQueue")["heavy"]
    assert local["metadata"]["namespace"] == "hyperpod-ns-heavy"
    assert "hyperpod-ns-heavy" in by_kind(objects, "Namespace")


def test_v1beta1_names_its_fields_as_v1beta1_did_and_other_versions_are_refused() -> None:
    objects = kueue_objects(policy([team("a")]), TOPOLOGY, version="v1beta1")
    assert {o["apiVersion"] for o in objects if o["kind"] != "Namespace"} == {
        "kueue.x-k8s.io/v1beta1"
    }
    assert by_kind(objects, "ClusterQueue")["a"]["spec"]["cohort"] == TEAMS_COHORT
    with pytest.raises(InvalidInputError, match="v1beta2 or v1beta1"):
        kueue_objects(policy([team("a")]), TOPOLOGY, version="v1")


ROUND_TRIP = {
    "apiVersion": "topoq.io/v1",
    "kind": "Policy",
    "scheduling": {
        "priorityClasses": [{"name": "inference", "weight": 100}, {"name": "batch", "weight": 5}]
    },
    "cohorts": [
        {"name": "org", "fairShareWeight": 2},
        {
            "name": "research",
            "parent": ["org"],
            "quotas": [{"flavor": "p5.48xlarge", "instances": 1}],
        },
    ],
    "teams": [
        {
            **team("vision", cohort=["org", "research"], sharing="LendAndBorrow"),
            "borrowLimitPercent": 50,
            "lendingLimits": {"p5.48xlarge": {"nvidia.com/gpu": 8}},
        },
        team("nlp", cohort=["org", "research"], sharing="DontLend", fairShareWeight=3),
        team("serving", sharing="Lend", preemptTeamTasks="Never", queueing="strict-fifo"),
        team("paused", active=False),
    ],
}


def test_export_then_import_gives_back_the_policy() -> None:
    original = policy_from_document(ROUND_TRIP, source="test")
    back = policy_from_kueue(kueue_objects(original, TOPOLOGY))
    assert back.teams == original.teams
    assert back.cohorts == original.cohorts
    assert back.priority_classes == original.priority_classes


def test_import_says_what_is_missing() -> None:
    with pytest.raises(InvalidInputError, match="no Kueue ClusterQueue"):
        policy_from_kueue([{"apiVersion": "v1", "kind": "Namespace"}])
    objects = [
        o for o in kueue_objects(policy([team("a")]), TOPOLOGY) if o["kind"] != "ResourceFlavor"
    ]
    with pytest.raises(InvalidInputError, match=r"ResourceFlavor 'p5\.48xlarge'"):
        policy_from_kueue(objects)
