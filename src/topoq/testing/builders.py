"""Builders that make test clusters and workloads short to write and easy to read.

``cluster([2, 2, 4])`` is 2 spines × 2 blocks × 4 nodes; spines are ``s0, s1``, blocks are
numbered across the cluster (``b0 … b3``) and nodes ``n00 …`` so expected placements read well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topoq.core.ledger import CapacityLedger
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec, Taint
from topoq.domain.quantity import CPU, MEMORY, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import (
    NodeSelectorTerm,
    PodSetSpec,
    SliceConstraint,
    SpreadConstraint,
    Toleration,
    TopologyRequest,
    WorkloadSpec,
)

SPINE = "spine"
BLOCK = "block"
RACK = "rack"
DEFAULT_LEVEL_NAMES = (SPINE, BLOCK, RACK)
_PREFIXES = {SPINE: "s", BLOCK: "b", RACK: "r"}


def node_resources(
    gpus: int = 8, cpu: str = "96", memory: str = "1Ti", pods: int = 110
) -> Resources:
    return Resources.parse({NVIDIA_GPU: gpus, CPU: cpu, MEMORY: memory, "pods": pods})


def cluster(
    shape: Sequence[int],
    *,
    levels: Sequence[str] | None = None,
    resources: Resources | None = None,
    taints: Sequence[Taint] = (),
    labels: Mapping[str, str] | None = None,
    hostname_level: bool = True,
) -> tuple[list[NodeSpec], TopologySpec]:
    """Nodes and topology for ``shape`` = domains per parent at each level, nodes last."""
    level_names = list(levels or DEFAULT_LEVEL_NAMES[: len(shape) - 1])
    if len(level_names) != len(shape) - 1:
        raise ValueError("give one level name per shape entry except the last (the nodes)")
    allocatable = resources or node_resources()
    nodes: list[NodeSpec] = []
    counters = [0] * len(level_names)
    digits = len(str(_product(shape) - 1))

    def build(depth: int, path: dict[str, str]) -> None:
        if depth == len(level_names):
            for _ in range(shape[-1]):
                name = f"n{len(nodes):0{max(2, digits)}d}"
                node_labels = dict(labels or {}) | path | {HOSTNAME_LABEL: name}
                nodes.append(NodeSpec(NodeName(name), node_labels, allocatable, tuple(taints)))
            return
        for _ in range(shape[depth]):
            label = level_names[depth]
            value = f"{_PREFIXES.get(label, label[:1])}{counters[depth]}"
            counters[depth] += 1
            build(depth + 1, path | {label: value})

    build(0, {})
    spec_levels = (*level_names, HOSTNAME_LABEL) if hostname_level else tuple(level_names)
    return nodes, TopologySpec("test", tuple(spec_levels))


def _product(shape: Sequence[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def tree_and_ledger(
    nodes: Sequence[NodeSpec],
    spec: TopologySpec,
    used: Mapping[str, Mapping[str, object]] | None = None,
) -> tuple[TopologyTree, CapacityLedger]:
    """The tree and a ledger with ``used`` (node name → quantities) already taken."""
    tree = build_tree(nodes, spec)
    usage = {name: Resources.parse(amounts) for name, amounts in (used or {}).items()}
    return tree, CapacityLedger.with_usage(tree, usage, strict=True)


def gpu_pods(count: int, gpus: int = 8, name: str = "workers", **topology: Any) -> PodSetSpec:
    """A pod set of ``count`` pods with ``gpus`` GPUs each; ``topology`` keywords as in
    :func:`topology_request`."""
    return pod_set(name, count, {NVIDIA_GPU: gpus}, **topology)


def pod_set(
    name: str,
    count: int,
    requests: Mapping[str, object] | None = None,
    *,
    node_selector: Mapping[str, str] | None = None,
    affinity: Sequence[NodeSelectorTerm] = (),
    tolerations: Sequence[Toleration] = (),
    **topology: Any,
) -> PodSetSpec:
    return PodSetSpec(
        name=name,
        count=count,
        requests=Resources.parse(requests or {}),
        node_selector=dict(node_selector or {}),
        affinity_terms=tuple(affinity),
        tolerations=tuple(tolerations),
        topology=topology_request(**topology),
    )


def topology_request(
    required: str | None = None,
    preferred: str | None = None,
    slices: Sequence[tuple[str, int]] = (),
    group: str | None = None,
    spread: tuple[str, int] | None = None,
) -> TopologyRequest:
    return TopologyRequest(
        required=required,
        preferred=preferred,
        slices=tuple(SliceConstraint(level, size) for level, size in slices),
        group=group,
        spread=SpreadConstraint(*spread) if spread else None,
    )


def workload(*pod_sets: PodSetSpec, name: str = "job") -> WorkloadSpec:
    return WorkloadSpec(name=name, pod_sets=tuple(pod_sets))
