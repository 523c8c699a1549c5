"""What the Kubernetes executor offers and writes for a group of plain Pods (pure; the same
against a real API server: tests/k8s/test_cluster_pod_groups.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tests.executors.launches import gang, place
from topoq.discovery.pod_groups import GROUP_LABEL, TOTAL_ANNOTATION, kept_manifest
from topoq.domain.job import SourceObject
from topoq.engine.ports import GangLaunch
from topoq.executors.kubernetes.cluster_jobs import PLACEMENT_GATE
from topoq.executors.kubernetes.pod_groups import (
    GROUP_ANNOTATION,
    MakePod,
    PinPod,
    is_candidate,
    offered_group,
    start_steps,
    versions,
)
from topoq.testing.governance import gpu_pods

QUEUE = "kueue.x-k8s.io/queue-name"


def user_pod(name: str, *, total: int = 2, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": created,
            "labels": {QUEUE: "ml", GROUP_LABEL: "g"},
            "annotations": {TOTAL_ANNOTATION: str(total)},
        },
        "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}], "containers": [{"name": "c"}]},
    }


def test_only_the_users_own_queue_labelled_pods_are_candidates() -> None:
    assert is_candidate(user_pod("a"))
    owned = user_pod("b")
    owned["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "controller": True}]
    assert not is_candidate(owned)
    made = user_pod("c")
    made["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "topoq"
    assert not is_candidate(made)
    unqueued = user_pod("d")
    del unqueued["metadata"]["labels"][QUEUE]
    assert not is_candidate(unqueued)


def test_a_group_is_offered_once_whole_and_not_once_taken_or_going() -> None:
    key = ("ml", "g")
    late = user_pod("w-1", created="2026-01-01T00:00:05Z")
    assert offered_group(key, [late]) is None  # one of two
    offered = offered_group(key, [late, user_pod("w-0")])
    assert offered is not None
    assert [p["metadata"]["name"] for p in offered["items"]] == ["w-0", "w-1"]
    assert offered["metadata"] == {
        "namespace": "ml",
        "name": "g",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    taken = [user_pod("w-0"), user_pod("w-1")]
    for pod in taken:
        pod["metadata"]["annotations"]["topoq.io/job-id"] = "g"
    assert offered_group(key, taken) is None
    going = [user_pod("w-0"), user_pod("w-1")]
    going[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert offered_group(key, going) is None


def test_a_refused_group_is_known_again_only_once_a_pod_changes() -> None:
    pods = [user_pod("w-0"), user_pod("w-1")]
    before = offered_group(("ml", "g"), pods)
    assert before is not None
    pods[1] = {**pods[1], "metadata": {**pods[1]["metadata"], "resourceVersion": "2"}}
    after = offered_group(("ml", "g"), pods)
    assert after is not None and versions(after) != versions(before)
    assert versions(before) == versions(
        offered_group(("ml", "g"), [*pods[:1], user_pod("w-1")]) or {}
    )


def launch_of(attempt: int = 1) -> GangLaunch:
    placed = place(gang("g", gpu_pods(2, gpus=8)))
    launch = placed.launch("g", attempt=attempt)
    manifests = tuple(json.dumps(kept_manifest(user_pod(n))) for n in ("w-0", "w-1"))
    source = SourceObject("PodGroup", "ml", "g", "uid-w-0", manifests)
    return replace(launch, job=replace(launch.job, source=source))


def test_the_users_gated_pods_are_pinned_with_topoqs_labels() -> None:
    launch = launch_of()
    live = {n: user_pod(n) for n in ("w-0", "w-1")}
    nodes, steps = start_steps(launch, "ml", live, frozenset())
    assert len(nodes) == 2 and all(isinstance(step, PinPod) for step in steps)
    first = steps[0]
    assert isinstance(first, PinPod) and first.key == ("ml", "w-0")
    ops = {(op["path"], json.dumps(op.get("value"))) for op in first.patch}
    assert ("/metadata/labels/topoq.io~1attempt", '"1"') in ops
    assert ("/metadata/labels/app.kubernetes.io~1managed-by", '"topoq"') in ops
    assert ("/metadata/annotations/topoq.io~1job-id", '"g"') in ops
    assert ("/metadata/annotations/topoq.io~1pods", '"2"') in ops
    assert (f"/metadata/annotations/{GROUP_ANNOTATION.replace('/', '~1')}", '"g"') in ops
    assert ("/metadata/annotations/topoq.io~1node", json.dumps(nodes[0])) in ops
    assert ("/spec/schedulingGates", "[]") in ops


def test_a_pod_gone_is_made_again_renamed_and_bound_and_a_rank_made_before_is_left() -> None:
    launch = launch_of(attempt=2)
    live = {"w-1": user_pod("w-1")}
    nodes, steps = start_steps(launch, "ml", live, frozenset())
    made, pinned = steps
    assert isinstance(made, MakePod) and isinstance(pinned, PinPod)
    manifest = made.manifest
    assert manifest["metadata"]["name"] == "w-0-a2"
    assert manifest["spec"]["nodeName"] == nodes[0]
    assert "schedulingGates" not in manifest["spec"]
    labels = manifest["metadata"]["labels"]
    assert labels["topoq.io/attempt"] == "2" and labels["topoq.io/rank"] == "0"
    assert labels[QUEUE] == "ml" and labels[GROUP_LABEL] == "g"  # the user's stay
    _, again = start_steps(launch, "ml", live, frozenset({0}))
    assert [type(step) for step in again] == [PinPod]
    going = {
        "w-1": {
            **user_pod("w-1"),
            "metadata": {**user_pod("w-1")["metadata"], "deletionTimestamp": "t"},
        }
    }
    _, replaced = start_steps(launch, "ml", going, frozenset({0}))
    assert [type(step) for step in replaced] == [MakePod]
