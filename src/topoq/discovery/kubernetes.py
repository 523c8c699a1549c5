"""Kubernetes and Kueue in and out: nodes, running pods, Kueue Topology and Workload objects.

Reads what ``kubectl get nodes -o json``, ``kubectl get pods -A -o json`` and ``kubectl get
topology <name> -o yaml`` print, ignoring every field the scheduler does not use. Writes a Kueue
Topology, a NodeList that reads back identically, and the ``kubectl label`` commands that put
topology labels on nodes. Kueue Workloads are read by :mod:`topoq.discovery.kubernetes_workload`
(re-exported here).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from topoq.discovery.documents import Fields
from topoq.discovery.kubernetes_objects import (
    LIST_KIND,
    object_items,
    pod_requests,
    require_kind,
    resource_amounts,
    taint_effect,
)
from topoq.discovery.kubernetes_workload import workload_from_kueue
from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import MAX_CLUSTER_NODES
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec, Taint
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

__all__ = [
    "KUEUE_TOPOLOGY_API_VERSIONS",
    "kueue_topology_document",
    "node_label_commands",
    "nodelist_document",
    "nodes_from_nodelist",
    "topology_from_kueue",
    "usage_from_podlist",
    "workload_from_kueue",
]

NODE_KIND, NODE_LIST_KIND = "Node", "NodeList"
POD_KIND, POD_LIST_KIND = "Pod", "PodList"
TOPOLOGY_KIND, TOPOLOGY_LIST_KIND = "Topology", "TopologyList"
KUEUE_TOPOLOGY_API_VERSIONS = frozenset(
    {"kueue.x-k8s.io/v1alpha1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"}
)
DEFAULT_KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
"""What topoq writes: Kueue 0.17 answers v1beta1 with "This version is deprecated"."""
READY_CONDITION = "Ready"
ACTIVE_POD_PHASES = frozenset({"Pending", "Running", "Unknown"})
FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
ONE_POD_SLOT = Resources({PODS: 1})


# --- nodes -----------------------------------------------------------------------------------


def nodes_from_nodelist(doc: object, *, source: str) -> list[NodeSpec]:
    """Nodes from a NodeList, a ``List`` of Nodes or a single Node.

    A node is ready when its ``Ready`` condition is ``True`` (no condition: not ready); its
    resources are ``status.allocatable``, or ``status.capacity`` when allocatable is absent.
    """
    try:
        return _nodes(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _nodes(fields: Fields) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    first_seen: dict[str, str] = {}
    records = object_items(fields, NODE_KIND, NODE_LIST_KIND)
    if len(records) > MAX_CLUSTER_NODES:
        raise InvalidInputError(
            f"{len(records):,} nodes: more than {MAX_CLUSTER_NODES:,} nodes",
            where=fields.path("items"),
            hint=f"a cluster has at most {MAX_CLUSTER_NODES:,} nodes",
        )
    for record in records:
        node = _node(record)
        if node.name in first_seen:
            raise InvalidInputError(
                f"node {node.name!r} is listed twice: {first_seen[node.name]} and {record.where}",
                where=record.path("metadata.name"),
                hint="each node must appear once",
            )
        first_seen[node.name] = record.where
        nodes.append(node)
    return nodes


def _node(record: Fields) -> NodeSpec:
    metadata, spec, status = (record.mapping(key) for key in ("metadata", "spec", "status"))
    name = metadata.text("name")
    if not name:
        raise InvalidInputError("the node name is empty", where=metadata.path("name"))
    resources = status.mapping("allocatable")
    if not resources.data:
        resources = status.mapping("capacity")
    return NodeSpec(
        name=NodeName(name),
        labels=metadata.string_map("labels"),
        allocatable=resource_amounts(resources),
        taints=tuple(_taint(taint) for taint in spec.records("taints")),
        unschedulable=spec.boolean("unschedulable"),
        ready=_is_ready(status),
    )


def _taint(fields: Fields) -> Taint:
    return Taint(fields.text("key"), taint_effect(fields), fields.text("value", ""))


def _is_ready(status: Fields) -> bool:
    for condition in status.records("conditions"):
        if condition.text("type", "") == READY_CONDITION:
            return condition.text("status", "") == "True"
    return False


# --- pods ------------------------------------------------------------------------------------


def usage_from_podlist(doc: object, *, source: str) -> dict[str, Resources]:
    """Node name → resources held by the pods bound to it (``spec.nodeName``).

    A Pending, Running or Unknown pod (no phase counts as Running) holds its effective request
    (see :func:`~topoq.discovery.kubernetes_objects.pod_requests`) plus one ``pods`` slot;
    Succeeded and Failed pods hold nothing.
    """
    try:
        return _usage(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _usage(fields: Fields) -> dict[str, Resources]:
    usage: dict[str, Resources] = {}
    for pod in object_items(fields, POD_KIND, POD_LIST_KIND):
        spec = pod.mapping("spec")
        node = spec.text("nodeName", "")
        if node and _holds_resources(pod.mapping("status")):
            usage[node] = usage.get(node, Resources()) + pod_requests(spec) + ONE_POD_SLOT
    return usage


def _holds_resources(status: Fields) -> bool:
    phase = status.text("phase", "Running")
    if phase in ACTIVE_POD_PHASES:
        return True
    if phase in FINISHED_POD_PHASES:
        return False
    known = ", ".join(sorted(ACTIVE_POD_PHASES | FINISHED_POD_PHASES))
    raise InvalidInputError(
        f"unknown pod phase {phase!r}", where=status.path("phase"), hint=f"use one of {known}"
    )


# --- Kueue Topology --------------------------------------------------------------------------


def topology_from_kueue(doc: object, *, source: str) -> TopologySpec:
    """The levels of a Kueue ``Topology`` (``spec.levels[].nodeLabel``, broadest first).

    A ``List`` (or ``TopologyList``, or YAML documents separated by ``---``) holding exactly
    one Topology is accepted too; its other objects (the ResourceFlavors that name the
    Topology, …) are not read here.
    """
    try:
        return _topology(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _topology(fields: Fields) -> TopologySpec:
    if fields.text("kind", "") in (LIST_KIND, TOPOLOGY_LIST_KIND):
        items = [item for item in fields.records("items") if _is_topology(item)]
        if len(items) != 1:
            raise InvalidInputError(
                f"the list holds {len(items)} topologies",
                where=fields.path("items"),
                hint="give exactly one Kueue Topology",
            )
        fields = items[0]
    require_kind(fields, {TOPOLOGY_KIND}, KUEUE_TOPOLOGY_API_VERSIONS)
    name = fields.mapping("metadata").text("name")
    spec = fields.mapping("spec")
    levels = tuple(level.text("nodeLabel") for level in spec.records("levels"))
    try:
        return TopologySpec(name, levels)
    except InvalidInputError as error:
        raise error.located(spec.path("levels")) from None


def _is_topology(item: Fields) -> bool:
    return bool(item.raw("kind") == TOPOLOGY_KIND)


def kueue_topology_document(
    topology: TopologySpec, *, api_version: str = DEFAULT_KUEUE_API_VERSION
) -> dict[str, Any]:
    """A Kueue ``Topology`` object with the levels of ``topology``."""
    if api_version not in KUEUE_TOPOLOGY_API_VERSIONS:
        raise InvalidInputError(
            f"Kueue Topology apiVersion {api_version!r} is not supported",
            hint=f"use {' or '.join(sorted(KUEUE_TOPOLOGY_API_VERSIONS))}",
        )
    return {
        "apiVersion": api_version,
        "kind": TOPOLOGY_KIND,
        "metadata": {"name": topology.name},
        "spec": {"levels": [{"nodeLabel": level} for level in topology.levels]},
    }


# --- writing nodes ---------------------------------------------------------------------------


def nodelist_document(nodes: Sequence[NodeSpec]) -> dict[str, Any]:
    """A NodeList that :func:`nodes_from_nodelist` reads back as the same nodes."""
    return {"apiVersion": "v1", "kind": NODE_LIST_KIND, "items": [_node_document(n) for n in nodes]}


def _node_document(node: NodeSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [_taint_document(taint) for taint in node.taints]
    if node.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": NODE_KIND,
        "metadata": {"name": node.name, "labels": dict(node.labels)},
        "spec": spec,
        "status": {
            "allocatable": node.allocatable.formatted(),
            "conditions": [{"type": READY_CONDITION, "status": "True" if node.ready else "False"}],
        },
    }


def _taint_document(taint: Taint) -> dict[str, str]:
    document = {"key": taint.key, "effect": taint.effect.value}
    if taint.value:
        document["value"] = taint.value
    return document


def node_label_commands(nodes: Sequence[NodeSpec], topology: TopologySpec) -> list[str]:
    """``kubectl label node NAME level=value ... --overwrite`` for each node.

    Only the topology's levels are labelled, except the hostname (the kubelet sets it); a node
    that carries none of those labels gets no command.
    """
    levels = [level for level in topology.levels if level != HOSTNAME_LABEL]
    commands: list[str] = []
    for node in nodes:
        pairs = [f"{level}={node.labels[level]}" for level in levels if level in node.labels]
        if pairs:
            command = ["kubectl", "label", "node", node.name, *pairs, "--overwrite"]
            commands.append(shlex.join(command))
    return commands
