"""The nodes topoq may place on, as the API server shows them (pure): each Node's
``status.allocatable`` (cpu, memory, ``nvidia.com/gpu``, ``vpc.amazonaws.com/efa``, pods)
minus what the pods that topoq does not manage already request on it (other schedulers'
pods, DaemonSets), so that topoq never books what the kubelet would refuse; its labels (the
topology levels), taints and ``spec.unschedulable`` (cordoned) as they are; ``Ready``
``False`` or ``Unknown`` (or no Ready condition yet) as failed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from topoq.discovery.kubernetes import nodes_from_nodelist, usage_from_podlist
from topoq.domain.node import NodeSpec
from topoq.domain.resources import Resources
from topoq.executors.kubernetes.manifests import job_id_of


def inventory(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[NodeSpec]:
    """The nodes in name order, with the room that pods not of topoq leave on them."""
    listed = sorted(nodes, key=lambda node: (node.get("metadata") or {}).get("name", ""))
    specs = nodes_from_nodelist({"kind": "NodeList", "items": listed}, source="the API server")
    foreign = [pod for pod in pods if job_id_of(pod) is None]
    used = usage_from_podlist({"kind": "PodList", "items": foreign}, source="the API server")
    return [_less(node, used.get(node.name)) for node in specs]


def _less(node: NodeSpec, used: Resources | None) -> NodeSpec:
    if not used:
        return node
    left = node.allocatable - used
    return replace(node, allocatable=Resources({k: max(0, v) for k, v in left.items()}))
