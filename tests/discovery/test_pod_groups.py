"""Plain Pods read as the gang they form: one job per kueue.x-k8s.io/pod-group-name, pod sets by
what each pod asks of the scheduler, ranks in name order, and a clear error for a group whose
pods disagree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from topoq.cli.server_commands import detect_format
from topoq.discovery.batch_jobs import workload_from_kubernetes_object
from topoq.discovery.documents import read_document
from topoq.discovery.jobfile import load_workload
from topoq.discovery.pod_groups import (
    GROUP_LABEL,
    TOTAL_ANNOTATION,
    group_total,
    is_pod_group,
    kept_manifest,
    ranked_pods,
    workload_from_pod_group,
)
from topoq.domain.errors import InvalidInputError
from topoq.wire.v1 import JobFormat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "jobs"
QUEUE = "kueue.x-k8s.io/queue-name"


def pod(
    name: str, *, gpus: int = 8, total: int | str | None = 4, group: str = "g"
) -> dict[str, Any]:
    annotations = {} if total is None else {TOTAL_ANNOTATION: str(total)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {GROUP_LABEL: group, QUEUE: "ml"},
            "annotations": annotations,
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        },
    }


def group(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(pods)}


def four() -> dict[str, Any]:
    return group(pod("worker-10"), pod("worker-2"), pod("launcher", gpus=0), pod("worker-1"))


def test_the_example_group_is_one_job_of_a_launcher_and_two_workers() -> None:
    workload = load_workload(EXAMPLE / "pod-group.yaml")
    assert (workload.name, workload.namespace) == ("allreduce", "hyperpod-ns-nlp")
    assert workload.queue == "hyperpod-ns-nlp-localqueue"
    launcher, workers = workload.pod_sets
    assert (launcher.name, launcher.count) == ("allreduce-launcher", 1)
    assert launcher.requests.amount("nvidia.com/gpu") == 0
    assert (workers.name, workers.count) == ("allreduce-worker-0", 2)
    assert workers.requests.amount("nvidia.com/gpu") == 8
    assert workers.topology.required == "topology.k8s.aws/network-node-layer-3"


def test_pods_that_ask_the_same_are_one_pod_set_and_ranks_follow_names_as_numbers() -> None:
    workload = workload_from_kubernetes_object(four(), source="pods.yaml")
    assert [(s.name, s.count) for s in workload.pod_sets] == [("launcher", 1), ("worker-1", 3)]
    ranked = [(s, p["metadata"]["name"]) for s, p in ranked_pods(four())]
    assert ranked == [
        ("launcher", "launcher"),
        ("worker-1", "worker-1"),
        ("worker-1", "worker-2"),
        ("worker-1", "worker-10"),
    ]


@given(st.permutations(range(4)))
def test_the_rank_order_does_not_depend_on_the_order_the_pods_are_given(order: list[int]) -> None:
    items = four()["items"]
    shuffled = group(*(items[i] for i in order))
    assert [p["metadata"]["name"] for _, p in ranked_pods(shuffled)] == [
        "launcher",
        "worker-1",
        "worker-2",
        "worker-10",
    ]
    assert workload_from_pod_group(shuffled, source="x") == workload_from_pod_group(
        four(), source="x"
    )


def test_a_pod_without_a_group_is_a_job_of_its_own() -> None:
    alone = pod("solo", total=None)
    del alone["metadata"]["labels"][GROUP_LABEL]
    assert is_pod_group(alone) and detect_format(alone, "solo.yaml") is JobFormat.KUBERNETES
    workload = workload_from_kubernetes_object(alone, source="solo.yaml")
    assert workload.name == "solo" and [(s.name, s.count) for s in workload.pod_sets] == [
        ("solo", 1)
    ]
    assert group_total(alone) == 1


def test_a_list_of_pods_is_told_apart_from_other_lists() -> None:
    assert detect_format(four(), "pods.yaml") is JobFormat.KUBERNETES
    assert not is_pod_group({"apiVersion": "v1", "kind": "List", "items": []})
    assert not is_pod_group(group(pod("a"), {"apiVersion": "v1", "kind": "Service"}))


def _broken(change: str) -> dict[str, Any]:
    doc = four()
    items = doc["items"]
    if change == "namespace":
        items[1]["metadata"]["namespace"] = "other"
    elif change == "name":
        items[1]["metadata"]["name"] = "worker-10"
    elif change == "queue":
        items[2]["metadata"]["labels"][QUEUE] = "elsewhere"
    elif change == "no total":
        del items[3]["metadata"]["annotations"][TOTAL_ANNOTATION]
    elif change == "totals":
        items[3]["metadata"]["annotations"][TOTAL_ANNOTATION] = "5"
    elif change == "count":
        doc["items"] = items[:3]
    elif change == "not a count":
        for item in items:
            item["metadata"]["annotations"][TOTAL_ANNOTATION] = "four"
    elif change == "no name":
        del items[0]["metadata"]["name"]
    return doc


@pytest.mark.parametrize(
    ("change", "said", "where"),
    [
        ("namespace", "not in namespace 'ml'", "items[1].metadata.namespace"),
        ("name", "two pods of the group are named 'worker-10'", "items[1].metadata.name"),
        ("queue", "names queue 'elsewhere'", "items[2].metadata.labels"),
        ("no total", "does not say how many pods", "items[3].metadata.annotations"),
        ("totals", "give different totals (4, 5)", TOTAL_ANNOTATION),
        ("count", "has 3 pods, its pods say 4", TOTAL_ANNOTATION),
        ("not a count", "not a count of pods", "items[0].metadata.annotations"),
        ("no name", "has no name", "items[0].metadata.name"),
    ],
)
def test_a_group_whose_pods_disagree_is_refused_saying_which_pod_and_what_to_fix(
    change: str, said: str, where: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        workload_from_kubernetes_object(_broken(change), source="pods.yaml")
    assert said in caught.value.message
    assert where in str(caught.value.where)
    assert str(caught.value.where).startswith("pods.yaml")
    assert caught.value.hint


def test_what_is_kept_of_a_pod_leaves_out_what_the_server_and_scheduler_wrote() -> None:
    seen = copy.deepcopy(pod("worker-1"))
    seen["metadata"] |= {"uid": "u1", "resourceVersion": "7", "creationTimestamp": "t"}
    seen["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    seen["spec"]["nodeName"] = "n1"
    seen["status"] = {"phase": "Pending"}
    kept = kept_manifest(seen)
    assert set(kept["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert kept["metadata"]["annotations"] == {TOTAL_ANNOTATION: "4"}
    assert "nodeName" not in kept["spec"] and "status" not in kept
    assert kept["spec"]["containers"] == seen["spec"]["containers"]
    json.dumps(kept)  # kept as JSON in the store
    assert "nodeName" in seen["spec"]  # the pod itself is left alone


def test_a_slice_size_is_checked_against_the_pods_of_its_pod_set() -> None:
    workers = [pod(f"worker-{i}", total=5) for i in range(4)]
    for worker in workers:
        worker["metadata"]["annotations"] |= {
            "kueue.x-k8s.io/podset-slice-required-topology": "block",
            "kueue.x-k8s.io/podset-slice-size": "2",
        }
    doc = group(pod("launcher", gpus=0, total=5), *workers)
    launcher, sliced = workload_from_pod_group(doc, source="x").pod_sets
    assert (launcher.count, sliced.count) == (1, 4)
    assert [(s.level, s.size) for s in sliced.topology.slices] == [("block", 2)]
    for worker in workers:
        worker["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "3"
    with pytest.raises(InvalidInputError) as caught:
        workload_from_pod_group(doc, source="x")
    assert "does not divide" in caught.value.message and "items[1]" in str(caught.value.where)


def test_a_groups_pods_separated_by_dashes_read_as_their_list(tmp_path: Path) -> None:
    listed = read_document(EXAMPLE / "pod-group.yaml")
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(listed["items"]), encoding="utf-8")
    assert load_workload(path) == load_workload(EXAMPLE / "pod-group.yaml")
