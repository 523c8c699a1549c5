"""Plain Pods read as the gang they form (pure), as Kueue's pod integration groups them: the
pods of one namespace that carry the label ``kueue.x-k8s.io/pod-group-name`` with one value
are one job of ``kueue.x-k8s.io/pod-group-total-count`` pods (an annotation every pod of the
group carries); a pod without that label is a job of its own. The queue and priority class
come from the pods' ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class``
labels, which every pod of a group must agree on.

The pods that ask the same of the scheduler (requests, node selector, required affinity,
tolerations, topology annotations) form one pod set, named after its first pod; pod sets
come in the order of their first pod, and pods by name (``worker-2`` before ``worker-10``).
That order is the gang's rank order: the executor gives the n-th pod the n-th placed slot.

A group is read from a ``v1`` ``List`` of its Pods (or one ``Pod``), which is what the
Kubernetes executor offers for intake and what ``topoq submit`` reads from a file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from topoq.discovery.documents import Fields
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    LIST_KIND,
    namespace_name,
    workload_name,
)
from topoq.discovery.training_jobs import PRIORITY_LABEL, QUEUE_LABEL, template_pod_set
from topoq.domain.errors import InvalidInputError
from topoq.domain.workload import PodSetSpec, WorkloadSpec

POD = ("v1", "Pod")
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
POD_SET_NAME_LIMIT = 63
SLICE_ANNOTATIONS = "kueue.x-k8s.io/podset-slice-"
"""The annotations whose meaning depends on how many pods the pod set has."""
_DIGITS = re.compile(r"(\d+)")
_KEPT_METADATA = ("name", "namespace", "labels", "annotations")
_SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def is_pod(doc: object) -> bool:
    return isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) == POD


def is_pod_group(doc: object) -> bool:
    """A ``v1`` ``List`` whose items are all Pods (at least one), or one Pod."""
    if is_pod(doc):
        return True
    if not isinstance(doc, dict) or doc.get("kind") != LIST_KIND:
        return False
    items = doc.get("items")
    return isinstance(items, list) and bool(items) and all(is_pod(item) for item in items)


def group_name(pod: Mapping[str, Any]) -> str:
    """The name of the job a pod belongs to: its group's, else its own."""
    metadata = pod.get("metadata") or {}
    return str((metadata.get("labels") or {}).get(GROUP_LABEL) or metadata.get("name", ""))


def pods_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods of a group document (a Pod, or a List of them), as written."""
    return [dict(doc)] if is_pod(doc) else [dict(item) for item in doc.get("items") or ()]


def name_order(name: str) -> tuple[Any, ...]:
    """Names with their numbers compared as numbers: ``worker-2`` before ``worker-10``."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(name))


def ranked_pods(doc: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every pod of the group in rank order, with the name of its pod set."""
    return [(pod_set.name, pod) for pod_set, pods in _pod_sets(doc) for pod in pods]


def workload_from_pod_group(doc: object, *, source: str) -> WorkloadSpec:
    try:
        return _workload(doc)
    except InvalidInputError as error:
        raise error.located(source) from None


def _workload(doc: object) -> WorkloadSpec:
    if not isinstance(doc, dict) or not is_pod_group(doc):
        raise InvalidInputError(
            "not a group of Pods",
            where="kind",
            hint="give a v1 Pod, or a v1 List whose items are the Pods of one group",
        )
    pods = pods_of(doc)
    first = Fields(pods[0], "items[0]" if not is_pod(doc) else "")
    metadata = first.mapping("metadata")
    namespace = namespace_name(metadata, "namespace", DEFAULT_NAMESPACE)
    name = group_name(pods[0])
    labels = metadata.string_map("labels")
    _check_agreement(doc, pods, namespace, name)
    sets = _pod_sets(doc)
    try:
        return WorkloadSpec(
            workload_name(Fields({"name": name}, first.path("metadata")), "name"),
            tuple(pod_set for pod_set, _ in sets),
            namespace,
            labels.get(QUEUE_LABEL),
            labels.get(PRIORITY_LABEL),
        )
    except InvalidInputError as error:
        raise error.located(first.where) from None


def _check_agreement(
    doc: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], namespace: str, name: str
) -> None:
    """Every pod of the group is in one namespace, names one group, queue and priority class,
    and says the same total; no two have one name."""
    names: set[str] = set()
    first_labels = (pods[0].get("metadata") or {}).get("labels") or {}
    totals = set()
    for index, pod in enumerate(pods):
        where = "" if is_pod(doc) else f"items[{index}]"
        fields = Fields(pod, where)
        metadata = fields.mapping("metadata")
        pod_name = metadata.text("name", "")
        if not pod_name:
            raise InvalidInputError(
                "a pod of the group has no name",
                where=metadata.path("name"),
                hint="give every pod a metadata.name",
            )
        if pod_name in names:
            raise InvalidInputError(
                f"two pods of the group are named {pod_name!r}",
                where=metadata.path("name"),
                hint="give every pod of the group its own name",
            )
        names.add(pod_name)
        if namespace_name(metadata, "namespace", DEFAULT_NAMESPACE) != namespace:
            raise InvalidInputError(
                f"pod {pod_name!r} is not in namespace {namespace!r} as the group's first pod is",
                where=metadata.path("namespace"),
                hint="a group's pods are all in one namespace",
            )
        labels = metadata.string_map("labels")
        agreed = ((GROUP_LABEL, "group"), (QUEUE_LABEL, "queue"), (PRIORITY_LABEL, "priority"))
        for label, what in agreed:
            if labels.get(label) != first_labels.get(label):
                raise InvalidInputError(
                    f"pod {pod_name!r} names {what} {labels.get(label)!r}, the group's first "
                    f"pod {first_labels.get(label)!r}",
                    where=metadata.mapping("labels").path(label),
                    hint=f"give every pod of group {name!r} the same {label} label",
                )
        annotations = metadata.mapping("annotations")
        if annotations.has(TOTAL_ANNOTATION):
            totals.add(_total(annotations))
        elif len(pods) > 1 or labels.get(GROUP_LABEL):
            raise InvalidInputError(
                f"pod {pod_name!r} does not say how many pods its group has",
                where=annotations.path(TOTAL_ANNOTATION),
                hint=f'annotate every pod of group {name!r} with {TOTAL_ANNOTATION}: "{len(pods)}"',
            )
    if len(totals) > 1:
        raise InvalidInputError(
            f"the pods of group {name!r} give different totals "
            f"({', '.join(map(str, sorted(totals)))})",
            where=TOTAL_ANNOTATION,
            hint="annotate every pod of the group with the same count",
        )
    total = totals.pop() if totals else 1
    if total != len(pods):
        raise InvalidInputError(
            f"group {name!r} has {len(pods)} pods, its pods say {total}",
            where=TOTAL_ANNOTATION,
            hint=f'give all {total} pods, or annotate them with {TOTAL_ANNOTATION}: "{len(pods)}"',
        )


def group_total(pod: Mapping[str, Any]) -> int | None:
    """How many pods the pod's group says it has (1 for a pod of its own; None when a group's
    pod does not say, or says something that is not a count)."""
    metadata = pod.get("metadata") or {}
    written = (metadata.get("annotations") or {}).get(TOTAL_ANNOTATION)
    if written is None:
        return None if (metadata.get("labels") or {}).get(GROUP_LABEL) else 1
    text = str(written).strip()
    return int(text) if text.isdigit() and int(text) >= 1 else None


def _total(annotations: Fields) -> int:
    text = str(annotations.raw(TOTAL_ANNOTATION)).strip()
    if not text.isdigit() or int(text) < 1:
        raise InvalidInputError(
            f"{TOTAL_ANNOTATION} is {text!r}, not a count of pods",
            where=annotations.path(TOTAL_ANNOTATION),
            hint='give the number of pods of the group, e.g. "4"',
        )
    return int(text)


def _pod_sets(doc: Mapping[str, Any]) -> list[tuple[PodSetSpec, list[dict[str, Any]]]]:
    """The group's pod sets, each with its pods in rank order. Pods are told apart by what
    each asks alone and by their slice annotations as written (a slice size is checked
    against the count of its pod set, known only once the pods are grouped)."""
    pods = pods_of(doc)
    where = {id(pod): ("" if is_pod(doc) else f"items[{i}]") for i, pod in enumerate(pods)}
    order = sorted(pods, key=lambda pod: name_order((pod.get("metadata") or {}).get("name", "")))
    shapes: dict[str, list[dict[str, Any]]] = {}
    for pod in order:
        fields = Fields(pod, where[id(pod)])
        annotations = fields.mapping("metadata").mapping("annotations")
        written = dict((pod.get("metadata") or {}).get("annotations") or {})
        slices = sorted((k, str(v)) for k, v in written.items() if SLICE_ANNOTATIONS in k)
        kept = {k: v for k, v in written.items() if SLICE_ANNOTATIONS not in k}
        try:
            shape = template_pod_set(_pod_set_name(pod), 1, fields, Fields(kept, annotations.where))
        except InvalidInputError as error:
            raise error.located(fields.where) from None
        shapes.setdefault(_shape_key(shape) + repr(slices), []).append(pod)
    found = []
    for members in shapes.values():
        first = Fields(members[0], where[id(members[0])])
        annotations = first.mapping("metadata").mapping("annotations")
        name = _pod_set_name(members[0])
        try:
            found.append((template_pod_set(name, len(members), first, annotations), members))
        except InvalidInputError as error:
            raise error.located(first.where) from None
    return found


def _pod_set_name(pod: Mapping[str, Any]) -> str:
    """A pod set is named after its first pod."""
    return str(pod["metadata"]["name"])[:POD_SET_NAME_LIMIT].rstrip("-.")


def _shape_key(pod_set: PodSetSpec) -> str:
    """What the scheduler is asked for one pod (not the command or environment it runs)."""
    return repr(
        (
            sorted(pod_set.requests.items()),
            sorted(pod_set.node_selector.items()),
            pod_set.affinity_terms,
            pod_set.tolerations,
            pod_set.topology,
        )
    )


def kept_manifest(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What of a pod topoq keeps to make it again for a later attempt (after a preemption or a
    lost node): its name, namespace, labels, annotations and spec, without what the server or
    the scheduler wrote (status, uid, the node it was bound to)."""
    metadata = pod.get("metadata") or {}
    kept = {key: copy.deepcopy(metadata[key]) for key in _KEPT_METADATA if key in metadata}
    for annotation in _SERVER_ANNOTATIONS:
        (kept.get("annotations") or {}).pop(annotation, None)
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    return {"apiVersion": POD[0], "kind": POD[1], "metadata": kept, "spec": spec}
