"""The cluster's own Jobs through a real ``topoq server --executor kubernetes``: a suspended
``batch/v1`` Job that names a team's queue is taken in, started on the placed nodes in
completion-index order, ended by its own conditions, suspended again when topoq stops it and
started anew on other nodes; a Job topoq does not take gets a Warning Event that says why.

On the bed and server of ``tests.k8s.cluster_objects`` (without Kueue)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.executors.launches import wait_until
from tests.k8s.cluster_objects import (
    BLOCK,
    OTHER_TEAM,
    TEAM,
    Servers,
    admin,
    phase_is,
    sleeping_pod_spec,
    topoq_job,
)
from topoq.testbeds.kubernetes import KubernetesBed

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture
def batch(objects_bed: KubernetesBed) -> Iterator[Any]:
    api = client.BatchV1Api(objects_bed.api_client())
    yield api
    for namespace in (TEAM, OTHER_TEAM):
        api.delete_collection_namespaced_job(namespace, propagation_policy="Background")


@pytest.fixture
def core(objects_bed: KubernetesBed) -> Any:
    return client.CoreV1Api(objects_bed.api_client())


def job_manifest(
    name: str,
    pods: int,
    *,
    queue: str | None = None,
    namespace: str = TEAM,
    indexed: bool = True,
    suspend: bool = True,
    sleep_s: str = "3600",
    gpus: int = 8,
    affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": queue or namespace},
        },
        "spec": {
            "suspend": suspend,
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": BLOCK}},
                "spec": sleeping_pod_spec(sleep_s, gpus),
            },
        },
    }
    if affinity is not None:
        manifest["spec"]["template"]["spec"]["affinity"] = affinity
    return manifest


def started(
    http: httpx.Client, batch: Any, name: str, pods: int, namespace: str = TEAM
) -> dict[str, Any]:
    """Create the Job and wait until topoq runs it; topoq's view of it."""
    batch.create_namespaced_job(namespace, job_manifest(name, pods, namespace=namespace))
    wait_until(lambda: phase_is(http, name, "running"), 60, f"Job {name} to run in topoq")
    found = topoq_job(http, name)
    assert found is not None
    return found


def running_pods(core: Any, job: str) -> list[Any]:
    pods = core.list_namespaced_pod(TEAM, label_selector=f"batch.kubernetes.io/job-name={job}")
    return [
        p
        for p in pods.items
        if p.metadata.deletion_timestamp is None and p.status.phase == "Running"
    ]


def warnings_on(core: Any, job: str) -> list[Any]:
    events = core.list_namespaced_event(
        TEAM, field_selector=f"involvedObject.kind=Job,involvedObject.name={job}"
    )
    return [e for e in events.items if e.type == "Warning"]


def test_an_indexed_job_runs_on_the_placed_nodes_in_rank_order_and_a_cancel_suspends_it(
    http: httpx.Client, batch: Any, core: Any
) -> None:
    found = started(http, batch, "train", 4)
    assert found["team"] == TEAM
    placed = found["allocation"]["nodes"]
    job = batch.read_namespaced_job("train", TEAM)
    assert job.metadata.annotations["topoq.io/job-id"] == "train"
    assert job.spec.suspend is False
    by_rank = json.loads(job.spec.template.metadata.annotations["topoq.io/placement"])
    assert sorted(by_rank) == sorted(placed)
    pods = running_pods(core, "train")
    assert len(pods) == 4
    for pod in pods:  # each pod on the node of its rank, bound by kube-scheduler
        rank = int(pod.metadata.annotations[COMPLETION_INDEX])
        assert pod.spec.node_name == by_rank[rank]
        assert pod.metadata.labels["topoq.io/rank"] == str(rank)
        assert not pod.spec.scheduling_gates
    layers = {core.read_node(n).metadata.labels[BLOCK] for n in placed}
    assert len(layers) == 1  # the required topology held
    assert http.post("/jobs/train/cancel").status_code == 200
    wait_until(lambda: not running_pods(core, "train"), 30, "the Job's pods to go")
    assert batch.read_namespaced_job("train", TEAM).spec.suspend is True
    assert phase_is(http, "train", "cancelled")


def test_a_nonindexed_job_that_completes_succeeds_in_topoq(
    http: httpx.Client, batch: Any, core: Any
) -> None:
    # the user's own node affinity stays, narrowed to the placed node
    kwok_only = {"key": "type", "operator": "In", "values": ["kwok"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [kwok_only]}]
            }
        }
    }
    manifest = job_manifest("short", 2, indexed=False, sleep_s="2", affinity=affinity)
    batch.create_namespaced_job(TEAM, manifest)
    wait_until(lambda: len(running_pods(core, "short")) == 2, 60, "the pods to run")
    pods = running_pods(core, "short")
    assert sorted(int(p.metadata.labels["topoq.io/rank"]) for p in pods) == [0, 1]
    for pod in pods:
        [term] = (
            pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        )
        assert term.match_expressions[0].key == "type"
        assert term.match_fields[0].values == [pod.spec.node_name]
    wait_until(lambda: phase_is(http, "short", "succeeded"), 60, "the Job to complete in topoq")


def test_a_stopped_job_starts_again_on_other_nodes_when_its_node_is_lost(
    http: httpx.Client, batch: Any, core: Any
) -> None:
    found = started(http, batch, "again", 2)
    lost = sorted(found["allocation"]["nodes"])[0]
    not_ready = "node-not-ready.stage.kwok.x-k8s.io"
    core.patch_node(lost, {"metadata": {"labels": {not_ready: "true"}}})
    try:

        def restarted() -> bool:
            job = batch.read_namespaced_job("again", TEAM)
            labels = job.spec.template.metadata.labels or {}
            pods = running_pods(core, "again")
            return (
                labels.get("topoq.io/attempt") == "2"
                and len(pods) == 2
                and all(p.metadata.labels.get("topoq.io/attempt") == "2" for p in pods)
            )

        wait_until(restarted, 90, "the Job to start again as attempt 2")
        wait_until(lambda: phase_is(http, "again", "running"), 10, "topoq to see it run")
        again = topoq_job(http, "again")
        assert again is not None
        assert lost not in again["allocation"]["nodes"]
        assert {p.spec.node_name for p in running_pods(core, "again")} == set(
            again["allocation"]["nodes"]
        )
    finally:
        core.patch_node(lost, {"metadata": {"labels": {not_ready: None}}})


def test_a_job_topoq_does_not_take_gets_a_warning_event_that_says_why(
    http: httpx.Client, batch: Any, core: Any
) -> None:
    batch.create_namespaced_job(TEAM, job_manifest("elsewhere", 1, queue="team-b"))
    batch.create_namespaced_job(TEAM, job_manifest("eager", 1, suspend=False))
    batch.create_namespaced_job(TEAM, job_manifest("huge", 1, gpus=16))
    wait_until(lambda: len(warnings_on(core, "elsewhere")) == 1, 30, "the unknown queue's Event")
    wait_until(lambda: len(warnings_on(core, "eager")) == 1, 30, "the unsuspended Job's Event")
    wait_until(lambda: len(warnings_on(core, "huge")) == 1, 30, "the too-large Job's Event")
    unknown = warnings_on(core, "elsewhere")[0]
    assert unknown.reason == "UnknownQueue"
    assert "'team-b'" in unknown.message and "'vision'" in unknown.message
    assert warnings_on(core, "eager")[0].reason == "NotSuspended"
    huge = warnings_on(core, "huge")[0]
    assert huge.reason == "InvalidJob" and "nvidia.com/gpu" in huge.message
    for name in ("elsewhere", "eager", "huge"):
        assert topoq_job(http, name) is None
    time.sleep(2)  # a few steps: said once, not at every step
    assert len(warnings_on(core, "elsewhere")) == 1


def test_a_server_killed_with_a_job_running_adopts_it_when_it_comes_back(
    servers: Servers, http: httpx.Client, batch: Any, core: Any
) -> None:
    started(http, batch, "kept", 2)
    before = {p.metadata.name: p.metadata.uid for p in running_pods(core, "kept")}
    again = servers.kill_and_start_again()
    with admin(again) as fresh:
        time.sleep(3)  # a few steps
        found = topoq_job(fresh, "kept")
        assert found is not None
        causes = " | ".join(change["cause"] for change in found["history"])
        assert found["phase"] == "running", causes
        assert "restarted" not in causes
    assert {p.metadata.name: p.metadata.uid for p in running_pods(core, "kept")} == before
    job = batch.read_namespaced_job("kept", TEAM)
    assert job.spec.suspend is False
    assert job.spec.template.metadata.labels["topoq.io/attempt"] == "1"


def test_a_teams_token_sees_no_more_of_another_teams_cluster_job_than_the_aggregate(
    http: httpx.Client, batch: Any, core: Any
) -> None:
    started(http, batch, "secret-run", 1, namespace=OTHER_TEAM)
    made = http.post("/tokens", json={"name": "vision-dev", "role": "member", "teams": [TEAM]})
    assert made.status_code == 201, made.text
    member = {"Authorization": f"Bearer {made.json()['token']}"}
    for route in ("", "/logs", "/history", "/explain"):
        assert http.get(f"/jobs/secret-run{route}", headers=member).status_code == 403, route
    assert http.post("/jobs/secret-run/cancel", headers=member).status_code == 403
    assert batch.read_namespaced_job("secret-run", OTHER_TEAM).spec.suspend is False
    listed = http.get("/jobs", params={"team": OTHER_TEAM}, headers=member).json()["items"]
    [summary] = listed  # the documented aggregate: id, team, phase and GPUs only
    assert summary["visible"] is False and summary["gpus"] == 8
    hidden = set(summary) - {"id", "team", "phase", "gpus", "visible"}
    assert hidden and all(summary[key] is None for key in hidden)
