"""What the Kubernetes executor offers, writes and makes for a group of plain Pods that topoq
took in from the cluster (pure; docs/executors.md, "Pods already on the cluster"):

- ``is_candidate``, ``group_key``, ``offered_group``: the pods that name a queue and that no
  controller owns, gathered by namespace and ``kueue.x-k8s.io/pod-group-name`` into the
  ``v1`` ``List`` the intake reads, once every pod of the group is there;
- ``start_steps``: for each rank of an attempt, either a JSON patch that pins the user's own
  gated pod to its node (``pin_patch``: node affinity, the gate lifted) and gives it topoq's
  labels, or — when that pod is gone, as after a preemption — a pod made again from the
  manifest kept at intake, named for the attempt and bound to its node at creation.

A pinned or made pod carries topoq's labels (``app.kubernetes.io/managed-by: topoq``, job,
attempt, rank, team) like the pods of topoq's own gangs, so that it is followed, stopped and
adopted after a restart the same way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topoq.discovery.kubernetes_objects import LIST_KIND
from topoq.discovery.pod_groups import group_name, group_total, name_order
from topoq.domain.kube_names import kube_name
from topoq.engine.ports import GangLaunch
from topoq.executors.environment import plan_pods
from topoq.executors.kubernetes.cluster_jobs import (
    QUEUE_LABEL,
    gated,
    pin_patch,
)
from topoq.executors.kubernetes.manifests import (
    JOB_ID_ANNOTATION,
    MANAGED_BY,
    NODE_ANNOTATION,
    RANK_LABEL,
    attempt_annotations,
    attempt_labels,
)

GROUP_ANNOTATION = "topoq.io/pod-group"
"""On a pod topoq pinned or made for a pod group: the group's name."""
PodKey = tuple[str, str]


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def is_candidate(pod: Mapping[str, Any]) -> bool:
    """A pod the user made to be placed by topoq: it names a queue, no controller owns it
    (a Job's pods are the Job's), and topoq has not pinned or made it."""
    return (
        QUEUE_LABEL in _labels(pod)
        and _labels(pod).get(MANAGED_BY[0]) != MANAGED_BY[1]
        and not any(owner.get("controller") for owner in _owners(pod))
    )


def _owners(pod: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return (pod.get("metadata") or {}).get("ownerReferences") or ()


def group_key(pod: Mapping[str, Any]) -> PodKey:
    return (pod.get("metadata") or {}).get("namespace", ""), group_name(pod)


def taken_by(pod: Mapping[str, Any]) -> str | None:
    """The topoq job a candidate pod was taken in as, if it was."""
    return _annotations(pod).get(JOB_ID_ANNOTATION)


def offered_group(key: PodKey, pods: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The group as the intake reads it, or None while it is not to be offered: some pod of it
    is being deleted, fewer pods are there than the group says it has, or every pod of it
    was taken in already."""
    if not pods or any((p.get("metadata") or {}).get("deletionTimestamp") for p in pods):
        return None
    ordered = sorted(pods, key=lambda p: name_order((p.get("metadata") or {}).get("name", "")))
    total = group_total(ordered[0])
    if total is not None and len(ordered) < total:
        return None  # the rest is on its way
    if all(taken_by(pod) is not None for pod in ordered):
        return None
    namespace, name = key
    return {
        "apiVersion": "v1",
        "kind": LIST_KIND,
        "metadata": {
            "namespace": namespace,
            "name": name,
            "creationTimestamp": min(
                str((pod.get("metadata") or {}).get("creationTimestamp") or "") for pod in ordered
            ),
        },
        "items": [dict(pod) for pod in ordered],
    }


def versions(group: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """What the group's pods are now (uid, resourceVersion): refused as they are, a group is
    offered again only once one of them changes."""
    return frozenset(
        (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        for pod in group.get("items") or ()
        for meta in [pod.get("metadata") or {}]
    )


@dataclass(frozen=True)
class PinPod:
    """Pin the user's own gated pod ``key`` to its node: a JSON patch."""

    key: PodKey
    patch: list[dict[str, Any]]


@dataclass(frozen=True)
class MakePod:
    """Make the pod again from its kept manifest, bound to its node at creation."""

    manifest: dict[str, Any]
    replaces: str
    """The name of the user's pod it stands for."""


def start_steps(
    launch: GangLaunch,
    namespace: str,
    live: Mapping[str, Mapping[str, Any]],
    made_ranks: frozenset[int],
) -> tuple[tuple[str, ...], list[PinPod | MakePod]]:
    """The placed nodes by rank of ``launch``'s attempt, and what starts each rank not made
    yet (``made_ranks``: seen with this attempt's labels, as after a crash). ``live``: the
    group's candidate pods by name."""
    job = launch.job
    source = job.source
    assert source is not None
    nodes = tuple(plan.node for plan in plan_pods(job.workload, launch.allocation))
    labels = attempt_labels(launch)
    annotations = attempt_annotations(launch, len(nodes)) | {GROUP_ANNOTATION: source.name}
    steps: list[PinPod | MakePod] = []
    for rank, (node, kept) in enumerate(zip(nodes, source.manifests, strict=True)):
        if rank in made_ranks:
            continue
        manifest = json.loads(kept)
        original = manifest["metadata"]["name"]
        found = live.get(original)
        if (
            found is not None
            and gated(found)
            and not (found.get("metadata") or {}).get("deletionTimestamp")
        ):
            patch = pin_patch(found, node, rank) + _label_ops(labels, annotations)
            steps.append(PinPod((namespace, original), patch))
            continue
        name = kube_name(f"{original}-a{launch.attempt}", limit=253, dots=True)
        steps.append(MakePod(made_again(manifest, name, node, rank, labels, annotations), original))
    return nodes, steps


def _label_ops(labels: Mapping[str, str], annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """JSON patch ops that set these labels and annotations (both maps exist already: the
    pod names a queue, and ``pin_patch`` adds its annotation)."""
    return [
        {"op": "add", "path": f"/metadata/{where}/{_pointer(key)}", "value": value}
        for where, found in (("labels", labels), ("annotations", annotations))
        for key, value in found.items()
    ]


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def made_again(
    manifest: Mapping[str, Any],
    name: str,
    node: str,
    rank: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """A kept pod made again for a later attempt: renamed (its first pod may still be going),
    with topoq's labels, bound to ``node`` (``spec.nodeName``), so without scheduling gates
    (the API server refuses a pod with both)."""
    made = copy.deepcopy(dict(manifest))
    metadata = made.setdefault("metadata", {})
    metadata["name"] = name
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels, RANK_LABEL: str(rank)}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        **annotations,
        NODE_ANNOTATION: node,
    }
    spec = made.setdefault("spec", {})
    spec.pop("schedulingGates", None)
    spec["nodeName"] = node
    return made


def group_of_made(pod: Mapping[str, Any]) -> str | None:
    """The pod group a pod topoq pinned or made belongs to, if it does."""
    return _annotations(pod).get(GROUP_ANNOTATION)
