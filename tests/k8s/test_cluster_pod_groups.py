"""The cluster's own plain Pods through a real ``topoq server --executor kubernetes``: the pods
of one ``kueue.x-k8s.io/pod-group-name``, created gated (``topoq.io/placement``), are taken in
as one gang once all of them are there, pinned each to the placed node of its rank (pods in
name order), stopped by deleting them and made again from what topoq kept for the next
attempt; a group deleted by its user is cancelled in topoq; a group topoq does not take gets a
Warning Event on each pod that says why.

On the bed and server of ``tests.k8s.cluster_objects`` (without Kueue)."""

from __future__ import annotations

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

GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
GATE = "topoq.io/placement"


@pytest.fixture
def core(objects_bed: KubernetesBed) -> Iterator[Any]:
    api = client.CoreV1Api(objects_bed.api_client())
    yield api
    for namespace in (TEAM, OTHER_TEAM):
        api.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_until(
        lambda: not any(api.list_namespaced_pod(n).items for n in (TEAM, OTHER_TEAM)),
        30,
        "the pods to go",
    )


def pod_manifest(
    name: str,
    group: str,
    total: int,
    *,
    gpus: int = 8,
    gated: bool = True,
    queue: str = TEAM,
    sleep_s: str = "3600",
    required: str | None = BLOCK,
) -> dict[str, Any]:
    spec = sleeping_pod_spec(sleep_s, gpus)
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": queue, GROUP: group},
            "annotations": {
                TOTAL: str(total),
                **({"kueue.x-k8s.io/podset-required-topology": required} if required else {}),
            },
        },
        "spec": spec,
    }


def create_group(core: Any, group: str, pods: int, **options: Any) -> list[str]:
    """The group's pods, created in reverse order (rank follows names, not creation)."""
    names = [f"{group}-worker-{rank}" for rank in range(pods)]
    for name in reversed(names):
        core.create_namespaced_pod(TEAM, pod_manifest(name, group, pods, **options))
    return names


def group_pods(core: Any, group: str) -> list[Any]:
    found = core.list_namespaced_pod(TEAM, label_selector=f"{GROUP}={group}").items
    return [p for p in found if p.metadata.deletion_timestamp is None]


def running(core: Any, group: str) -> list[Any]:
    return [p for p in group_pods(core, group) if p.status.phase == "Running"]


def warnings_on_pod(core: Any, pod: str) -> list[Any]:
    events = core.list_namespaced_event(
        TEAM, field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod}"
    )
    return [e for e in events.items if e.type == "Warning"]


def test_a_gated_pod_group_runs_as_one_gang_on_the_placed_nodes_in_name_order(
    http: httpx.Client, core: Any
) -> None:
    names = create_group(core, "llm", 4)
    wait_until(lambda: phase_is(http, "llm", "running"), 60, "the pod group to run in topoq")
    found = topoq_job(http, "llm")
    assert found is not None and found["team"] == TEAM
    placed = found["allocation"]["nodes"]
    pods = {p.metadata.name: p for p in running(core, "llm")}
    assert sorted(pods) == sorted(names)  # the user's own pods, not copies
    by_rank = sorted(pods.values(), key=lambda p: int(p.metadata.labels["topoq.io/rank"]))
    assert [p.metadata.name for p in by_rank] == names
    assert sorted(p.spec.node_name for p in by_rank) == sorted(placed)
    for pod in by_rank:
        assert pod.metadata.annotations["topoq.io/node"] == pod.spec.node_name
        assert pod.metadata.labels["topoq.io/attempt"] == "1"
        assert not pod.spec.scheduling_gates
    layers = {core.read_node(n).metadata.labels[BLOCK] for n in placed}
    assert len(layers) == 1  # the required topology held

    create_group(core, "wait", 5, required=None)  # 4 nodes left: it waits
    wait_until(lambda: phase_is(http, "wait", "pending"), 30, "the second group to wait")
    assert all(p.spec.scheduling_gates for p in group_pods(core, "wait"))
    core.delete_collection_namespaced_pod(TEAM, label_selector=f"{GROUP}=wait")
    wait_until(lambda: phase_is(http, "wait", "cancelled"), 30, "the deleted group's cancel")

    assert http.post("/jobs/llm/cancel").status_code == 200
    wait_until(lambda: not group_pods(core, "llm"), 30, "the group's pods to go")
    assert phase_is(http, "llm", "cancelled")


def test_a_group_whose_pod_was_deleted_while_the_server_was_down_is_not_made_again(
    servers: Servers, http: httpx.Client, core: Any
) -> None:
    create_group(core, "hold", 6, required=None)
    wait_until(lambda: len(running(core, "hold")) == 6, 60, "the first group to run")
    create_group(core, "late", 4, required=None)  # 2 nodes left: it waits
    wait_until(lambda: phase_is(http, "late", "pending"), 30, "the second group to wait")
    again = servers.kill_and_start_again(lambda: core.delete_namespaced_pod("late-worker-3", TEAM))
    with admin(again) as fresh:
        assert fresh.post("/jobs/hold/cancel").status_code == 200  # room for it now
        wait_until(
            lambda: phase_is(fresh, "late", "cancelled", "failed"), 60, "the late group to end"
        )
        ended = topoq_job(fresh, "late")
    assert ended is not None
    causes = " | ".join(change["cause"] for change in ended["history"])
    assert ended["phase"] == "cancelled", causes
    names = sorted(p.metadata.name for p in group_pods(core, "late"))
    assert names == ["late-worker-0", "late-worker-1", "late-worker-2"]  # none made again
    assert all(p.spec.scheduling_gates for p in group_pods(core, "late"))


def test_a_group_is_taken_once_all_its_pods_are_there_and_made_again_after_a_lost_node(
    servers: Servers, http: httpx.Client, core: Any
) -> None:
    core.create_namespaced_pod(TEAM, pod_manifest("pair-worker-1", "pair", 2))
    time.sleep(2)  # a few steps: half a group is not a job
    assert topoq_job(http, "pair") is None
    core.create_namespaced_pod(TEAM, pod_manifest("pair-worker-0", "pair", 2))
    wait_until(lambda: len(running(core, "pair")) == 2, 60, "the pair to run")
    first = topoq_job(http, "pair")
    assert first is not None
    lost = sorted(first["allocation"]["nodes"])[0]

    before = {p.metadata.name: p.metadata.uid for p in running(core, "pair")}
    again = servers.kill_and_start_again()  # adopted, not restarted
    with admin(again) as fresh:
        time.sleep(3)
        kept = topoq_job(fresh, "pair")
        assert kept is not None and kept["phase"] == "running", kept["history"]
    assert {p.metadata.name: p.metadata.uid for p in running(core, "pair")} == before

    not_ready = "node-not-ready.stage.kwok.x-k8s.io"
    core.patch_node(lost, {"metadata": {"labels": {not_ready: "true"}}})
    try:

        def restarted() -> bool:
            pods = running(core, "pair")
            return len(pods) == 2 and all(
                p.metadata.labels.get("topoq.io/attempt") == "2" for p in pods
            )

        wait_until(restarted, 90, "the group to run again as attempt 2")
        with admin(servers.current) as fresh:
            wait_until(lambda: phase_is(fresh, "pair", "running"), 10, "topoq to see it run")
            second = topoq_job(fresh, "pair")
        assert second is not None and lost not in second["allocation"]["nodes"]
        pods = sorted(running(core, "pair"), key=lambda p: p.metadata.labels["topoq.io/rank"])
        assert [p.metadata.name for p in pods] == ["pair-worker-0-a2", "pair-worker-1-a2"]
        assert {p.spec.node_name for p in pods} == set(second["allocation"]["nodes"])
        assert all(p.metadata.labels["kueue.x-k8s.io/queue-name"] == TEAM for p in pods)
    finally:
        core.patch_node(lost, {"metadata": {"labels": {not_ready: None}}})

    core.delete_namespaced_pod("pair-worker-1-a2", TEAM)  # the user's delete: cancelled
    with admin(servers.current) as fresh:
        wait_until(lambda: phase_is(fresh, "pair", "cancelled"), 30, "the group's cancel")
    wait_until(lambda: not group_pods(core, "pair"), 30, "the rest of its pods to go")


def test_a_group_topoq_does_not_take_gets_a_warning_event_on_each_pod(
    http: httpx.Client, core: Any
) -> None:
    ungated = create_group(core, "ungated", 2, gated=False)
    elsewhere = create_group(core, "other-queue", 1, queue="team-b")
    huge = create_group(core, "too-big", 2, gpus=16)
    for name in (*ungated, *elsewhere, *huge):
        wait_until(lambda n=name: len(warnings_on_pod(core, n)) == 1, 30, f"{name}'s Event")
    said = warnings_on_pod(core, ungated[0])[0]
    assert said.reason == "NotGated" and GATE in said.message
    unknown = warnings_on_pod(core, elsewhere[0])[0]
    assert unknown.reason == "UnknownQueue" and "'team-b'" in unknown.message
    too_big = warnings_on_pod(core, huge[1])[0]
    assert too_big.reason == "InvalidJob" and "nvidia.com/gpu" in too_big.message
    for group in ("ungated", "other-queue", "too-big"):
        assert topoq_job(http, group) is None
    time.sleep(2)  # a few steps: said once, not at every step
    assert len(warnings_on_pod(core, huge[0])) == 1
