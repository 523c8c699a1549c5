"""What the Kubernetes executor writes to start, pin and stop a ``batch/v1`` Job that topoq took
in from the cluster (pure; docs/adr/0009-starting-kubernetes-jobs.md):

- ``start_patch``: one strategic-merge patch that gives the Job's pod template topoq's labels
  and annotations (job, attempt, team, the placement as nodes by rank) and the scheduling gate
  ``topoq.io/placement``, and unsuspends the Job;
- ``pin_patch``: a JSON patch that gives one gated pod the node of its rank as required node
  affinity on ``metadata.name`` and lifts the gate, so that kube-scheduler binds it there and
  nowhere else;
- ``suspend_patch``, ``clear_start_time``: what stops the Job and what lets its template be
  patched again for the next attempt;
- ``job_outcome``: the Job's own ``Complete`` or ``Failed`` condition, which ends the gang;
- ``warning_event``: the Kubernetes Event that tells a Job's (or a pod's) owner why topoq did
  not take it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from topoq.engine.ports import GangLaunch
from topoq.executors.environment import plan_pods
from topoq.executors.kubernetes.manifests import (
    NODE_ANNOTATION,
    RANK_LABEL,
    attempt_annotations,
    attempt_labels,
)

PLACEMENT_GATE = "topoq.io/placement"
"""The scheduling gate every pod of a started Job is created with, until topoq pins it."""
PLACEMENT_ANNOTATION = "topoq.io/placement"
"""On the Job's pod template: the placed nodes by rank, as a JSON list."""
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The rank of a pod of an Indexed Job (the Job controller sets it)."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
EVENT_COMPONENT = "topoq"
NODE_NAME_FIELD = "metadata.name"
REQUIRED_NODE_AFFINITY = (
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
)


def start_patch(launch: GangLaunch) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The patch that starts ``launch``'s attempt of the Job, and the placed nodes by rank."""
    nodes = tuple(plan.node for plan in plan_pods(launch.job.workload, launch.allocation))
    template = {
        "metadata": {
            "labels": attempt_labels(launch),
            "annotations": attempt_annotations(launch, len(nodes))
            | {PLACEMENT_ANNOTATION: json.dumps(list(nodes))},
        },
        "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}]},
    }
    return {"spec": {"suspend": False, "template": template}}, nodes


SUSPEND_PATCH: dict[str, Any] = {"spec": {"suspend": True}}
CLEAR_START_TIME: dict[str, Any] = {"status": {"startTime": None}}
"""Through ``jobs/status``: a suspended Job's template is mutable only while this is unset."""


def placed_nodes(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The nodes by rank a pod's template carried (empty when it carried none)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        found = json.loads(annotations.get(PLACEMENT_ANNOTATION, "[]"))
    except ValueError:
        return ()
    return tuple(str(node) for node in found) if isinstance(found, list) else ()


def gated(pod: Mapping[str, Any]) -> bool:
    """The pod still waits for topoq to pin it."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(gate.get("name") == PLACEMENT_GATE for gate in gates)


def completion_index(pod: Mapping[str, Any]) -> int | None:
    """The pod's completion index (an Indexed Job's pod), else None."""
    metadata = pod.get("metadata") or {}
    for found in (metadata.get("annotations") or {}, metadata.get("labels") or {}):
        value = found.get(COMPLETION_INDEX)
        if value is not None and str(value).isdigit():
            return int(value)
    return None


def owner_job(pod: Mapping[str, Any]) -> str | None:
    """The name of the Job that owns the pod, if a Job does."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("kind") == "Job" and owner.get("controller"):
            return str(owner.get("name"))
    return None


def free_rank(taken: Sequence[int], size: int) -> int | None:
    """The lowest rank below ``size`` that no live pod holds (a NonIndexed Job's pod)."""
    held = set(taken)
    return next((rank for rank in range(size) if rank not in held), None)


def pin_patch(pod: Mapping[str, Any], node: str, rank: int) -> list[dict[str, Any]]:
    """The JSON patch that pins a gated pod to ``node`` as ``rank`` and lifts the gate. On a
    gated pod the API server allows node affinity to be set, or terms to be narrowed, never
    replaced: the pin is added to every term the pod already has (terms are ORed; each must
    name the node)."""
    spec = pod.get("spec") or {}
    metadata = pod.get("metadata") or {}
    requirement = {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}
    required = {"nodeSelectorTerms": [{"matchFields": [requirement]}]}
    affinity = spec.get("affinity")
    node_affinity = (affinity or {}).get("nodeAffinity")
    terms = ((node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    patch: list[dict[str, Any]] = []
    if affinity is None:
        patch.append(
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
                },
            }
        )
    elif node_affinity is None:
        patch.append(
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity",
                "value": {"requiredDuringSchedulingIgnoredDuringExecution": required},
            }
        )
    elif not terms:
        patch.append({"op": "add", "path": REQUIRED_NODE_AFFINITY, "value": required})
    else:
        base = REQUIRED_NODE_AFFINITY
        for index, term in enumerate(terms):
            path = f"{base}/nodeSelectorTerms/{index}/matchFields"
            if term.get("matchFields"):
                patch.append({"op": "add", "path": f"{path}/-", "value": requirement})
            else:
                patch.append({"op": "add", "path": path, "value": [requirement]})
    others = [g for g in spec.get("schedulingGates") or () if g.get("name") != PLACEMENT_GATE]
    patch.append({"op": "replace", "path": "/spec/schedulingGates", "value": others})
    if metadata.get("labels") is None:
        patch.append({"op": "add", "path": "/metadata/labels", "value": {}})
    patch.append(
        {"op": "add", "path": f"/metadata/labels/{_pointer(RANK_LABEL)}", "value": str(rank)}
    )
    if metadata.get("annotations") is None:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    patch.append(
        {"op": "add", "path": f"/metadata/annotations/{_pointer(NODE_ANNOTATION)}", "value": node}
    )
    return patch


def _pointer(key: str) -> str:
    """``key`` as one step of a JSON pointer (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def job_outcome(job: Mapping[str, Any]) -> tuple[int, str] | None:
    """How the Job ended by its own conditions — (0, …) Complete, (1, …) Failed — else None."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("status") != "True":
            continue
        said = ": ".join(p for p in (condition.get("reason"), condition.get("message")) if p)
        if condition.get("type") == "Complete":
            return 0, "the Job completed"
        if condition.get("type") == "Failed":
            return 1, f"the Job failed ({said})" if said else "the Job failed"
    return None


def warning_event(job: Mapping[str, Any], reason: str, message: str, now: float) -> dict[str, Any]:
    """A Warning Event on ``job`` — a Job, or a Pod of a group (core/v1, as ``kubectl
    describe`` shows them)."""
    metadata = job.get("metadata") or {}
    at = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{metadata.get('name', 'job')}.",
            "namespace": metadata.get("namespace", "default"),
        },
        "involvedObject": {
            "apiVersion": job.get("apiVersion", "batch/v1"),
            "kind": job.get("kind", "Job"),
            "namespace": metadata.get("namespace", "default"),
            "name": metadata.get("name", ""),
            "uid": metadata.get("uid", ""),
            "resourceVersion": metadata.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning",
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": EVENT_COMPONENT,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }
