"""What the Kubernetes executor writes for a cluster's Job, and how such a Job's gang ends (pure;
the same against a real API server: tests/k8s/test_cluster_jobs.py)."""

from __future__ import annotations

import json
from typing import Any

from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.kubernetes.cluster_jobs import (
    PLACEMENT_GATE,
    completion_index,
    free_rank,
    gated,
    job_outcome,
    pin_patch,
    placed_nodes,
)
from topoq.executors.kubernetes.gangs import GangPods, PodSeen


def gated_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {}},
        "spec": {"schedulingGates": [{"name": "other"}, {"name": PLACEMENT_GATE}], **spec},
    }


def test_a_pod_without_affinity_gets_the_node_and_keeps_the_other_gates() -> None:
    patch = pin_patch(gated_pod(), "node-7", 3)
    assert patch[0]["path"] == "/spec/affinity"
    [term] = patch[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]
    }
    assert {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "other"}]} in patch
    assert {"op": "add", "path": "/metadata/labels/topoq.io~1rank", "value": "3"} in patch
    assert {"op": "add", "path": "/metadata/annotations/topoq.io~1node", "value": "node-7"} in patch


def test_every_term_of_a_pods_own_affinity_is_narrowed_to_the_node() -> None:
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["x"]}]},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    patch = pin_patch(gated_pod(affinity=affinity), "n1", 0)
    base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
    pin = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    assert patch[0] == {
        "op": "add",
        "path": f"{base}/nodeSelectorTerms/0/matchFields",
        "value": [pin],
    }
    assert patch[1] == {
        "op": "add",
        "path": f"{base}/nodeSelectorTerms/1/matchFields/-",
        "value": pin,
    }


def test_a_pod_with_only_pod_affinity_gets_node_affinity_beside_it() -> None:
    patch = pin_patch(gated_pod(affinity={"podAntiAffinity": {}}), "n1", 0)
    assert patch[0]["path"] == "/spec/affinity/nodeAffinity"


def test_the_rank_comes_from_the_completion_index_else_the_lowest_free_slot() -> None:
    indexed = {"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": "5"}}}
    assert completion_index(indexed) == 5
    assert completion_index({"metadata": {}}) is None
    assert free_rank([0, 2], 4) == 1
    assert free_rank([0, 1], 2) is None
    assert gated(gated_pod()) and not gated({"spec": {"schedulingGates": [{"name": "other"}]}})
    template = {"metadata": {"annotations": {"topoq.io/placement": json.dumps(["a", "b"])}}}
    assert placed_nodes(template) == ("a", "b")
    assert placed_nodes({"metadata": {"annotations": {"topoq.io/placement": "{"}}}) == ()


def test_the_jobs_conditions_say_how_it_ended() -> None:
    def job(kind: str, status: str = "True", **more: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": kind, "status": status, **more}]}}

    assert job_outcome(job("Complete")) == (0, "the Job completed")
    failed = job_outcome(job("Failed", reason="BackoffLimitExceeded", message="too many"))
    assert failed == (1, "the Job failed (BackoffLimitExceeded: too many)")
    assert job_outcome(job("Failed", status="False")) is None
    assert job_outcome(job("Suspended")) is None
    assert job_outcome({}) is None


def pod(name: str, rank: int, phase: str) -> PodSeen:
    return PodSeen(name, rank, phase, "n", deleting=False, exit_code=None, reason="")


def test_a_jobs_gang_starts_once_its_pods_run_and_ends_by_the_job_not_by_a_failed_pod() -> None:
    gang = GangPods(JobId("j"), 1, "ns", expected=2, since=0.0, creating=False, source="j")
    gang.saw(pod("a", 0, "Running"))
    assert gang.events(1.0, 300) == []
    gang.saw(pod("b", 1, "Failed"))  # the Job controller makes a replacement
    assert gang.events(2.0, 300) == []
    gang.saw(pod("c", 1, "Running"))
    assert [e.kind for e in gang.events(3.0, 300)] == [ExecutorEventKind.STARTED]
    gang.gone("a")  # evicted: replaced too
    assert gang.events(4.0, 300) == []
    gang.outcome = (0, "the Job completed")
    [ended] = gang.events(5.0, 300)
    assert (ended.kind, ended.exit_code, ended.message) == (
        ExecutorEventKind.EXITED,
        0,
        "the Job completed",
    )
    assert gang.events(6.0, 300) == []


def test_a_stopped_jobs_gang_is_stopped_once_no_pod_holds_a_node() -> None:
    gang = GangPods(JobId("j"), 1, "ns", expected=1, since=0.0, creating=False, source="j")
    gang.saw(pod("a", 0, "Running"))
    gang.saw(pod("b", 0, "Failed"))  # kept by the Job controller, holds nothing
    gang.stop_deadline = 10.0
    assert gang.events(1.0, 300) == []
    gang.gone("a")
    assert [e.kind for e in gang.events(2.0, 300)] == [ExecutorEventKind.STOPPED]


def test_a_jobs_gang_that_does_not_start_in_time_fails_naming_the_waiting_pod() -> None:
    gang = GangPods(JobId("j"), 1, "ns", expected=2, since=0.0, creating=False, source="j")
    gang.saw(PodSeen("a", 0, "Pending", None, False, None, "Unschedulable: no room"))
    [ended] = gang.events(301.0, 300)
    assert ended.exit_code == 1
    assert ended.message == "its pods did not start within 300 s (a: Unschedulable: no room)"
