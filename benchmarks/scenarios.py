"""Benchmark scenarios: GPU clusters with half their GPUs in use, and the gangs to place on them.

Every cluster has 8-GPU nodes under three network layers and the hostname (four levels), built
with :func:`topoq.testing.builders.cluster`. Usage is drawn by a seeded numpy generator:

- 40% of the nodes are full (one 8-GPU pod),
- 20% run 1–7 one-GPU pods (with some extra CPU for sidecars, so CPU sometimes binds first),
- the rest only run daemon-set pods (1 CPU, 4 GiB, 4 pod slots, on every node).

That is half of the GPUs on average; :attr:`Cluster.used_gpu_fraction` reports what was drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from topoq.domain.node import NodeSpec
from topoq.domain.quantity import CPU, MEMORY, NVIDIA_GPU, PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, TopologySpec
from topoq.domain.workload import WorkloadSpec
from topoq.testing.builders import cluster, pod_set, workload

NETWORK_LEVELS = AWS_NETWORK_LAYER_LABELS[:3]
"""``topology.k8s.aws/network-node-layer-1..3``, broadest first; the hostname is the fourth."""
LOWEST_NETWORK_LEVEL = NETWORK_LEVELS[-1]

SHAPES: dict[int, tuple[int, ...]] = {
    64: (2, 2, 2, 8),
    512: (2, 4, 4, 16),
    2048: (4, 4, 8, 16),
    8192: (8, 8, 8, 16),
}
"""Nodes → domains per parent at layer-1, layer-2, layer-3, then nodes per layer-3 domain."""
DEFAULT_SIZES = (512, 2048, 8192)
GANG_GPUS = (8, 64, 256, 512, 1024)
MODES = ("required", "preferred")

GPUS_PER_NODE = 8
FULL_FRACTION = 0.4
PARTIAL_FRACTION = 0.2
MAX_SIDECAR_CPU = 15
"""Extra cores a partly used node's pods take beyond their GPUs' share (0 to this, uniform)."""

DAEMONSETS = Resources.parse({CPU: "1", MEMORY: "4Gi", PODS: 4})
PER_GPU = Resources.parse({NVIDIA_GPU: 1, CPU: "11", MEMORY: "120Gi"})
"""What one GPU of a pod comes with: a full 8-GPU pod asks 88 cores and 960 GiB of 96 and 1 TiB."""


@dataclass(frozen=True)
class Cluster:
    size: int
    shape: tuple[int, ...]
    nodes: list[NodeSpec]
    spec: TopologySpec
    used: dict[str, Resources]

    @property
    def used_gpu_fraction(self) -> float:
        used = sum(resources.amount(NVIDIA_GPU) for resources in self.used.values())
        return used / (len(self.nodes) * GPUS_PER_NODE)

    def domain_gpus(self, level: int) -> int:
        """GPUs of one empty domain of network level ``level`` (0 = layer-1)."""
        return prod(self.shape[level + 1 :]) * GPUS_PER_NODE


@dataclass(frozen=True)
class Gang:
    gpus: int
    mode: str
    level: str
    workload: WorkloadSpec

    @property
    def pods(self) -> int:
        return self.workload.pod_sets[0].count

    @property
    def gpus_per_pod(self) -> int:
        return self.workload.pod_sets[0].requests.amount(NVIDIA_GPU)

    @property
    def level_name(self) -> str:
        """``layer-3`` for ``topology.k8s.aws/network-node-layer-3``."""
        return self.level.rsplit("/", 1)[-1].removeprefix("network-node-")


def make_cluster(size: int, seed: int) -> Cluster:
    if size not in SHAPES:
        known = ", ".join(str(known) for known in SHAPES)
        raise ValueError(f"no cluster shape for {size} nodes; choose from {known}")
    shape = SHAPES[size]
    nodes, spec = cluster(list(shape), levels=list(NETWORK_LEVELS), hostname_level=True)
    rng = np.random.default_rng(seed)
    return Cluster(size, shape, nodes, spec, draw_usage([node.name for node in nodes], rng))


def draw_usage(names: list[str], rng: np.random.Generator) -> dict[str, Resources]:
    """Full, partly used and idle nodes in the fractions above, at random positions."""
    order = rng.permutation(len(names))
    full = round(FULL_FRACTION * len(names))
    partial = round(PARTIAL_FRACTION * len(names))
    used: dict[str, Resources] = {}
    for position, index in enumerate(order.tolist()):
        if position < full:
            used[names[index]] = DAEMONSETS + one_gpu_pods(GPUS_PER_NODE, 1)
        elif position < full + partial:
            gpus = int(rng.integers(1, GPUS_PER_NODE))
            sidecars = Resources({CPU: 1000 * int(rng.integers(0, MAX_SIDECAR_CPU + 1))})
            used[names[index]] = DAEMONSETS + one_gpu_pods(1, gpus) + sidecars
        else:
            used[names[index]] = DAEMONSETS
    return used


def one_gpu_pods(gpus_per_pod: int, pods: int) -> Resources:
    """What ``pods`` pods of ``gpus_per_pod`` GPUs each take, pod slots included."""
    return PER_GPU.scaled(gpus_per_pod * pods) + Resources({PODS: pods})


def gangs(on: Cluster) -> list[Gang]:
    """Every (gang size, mode) for the cluster, skipping required rows no domain could hold."""
    found: list[Gang] = []
    for gpus in GANG_GPUS:
        for mode in MODES:
            level = required_level(on, gpus) if mode == "required" else LOWEST_NETWORK_LEVEL
            if level is not None:
                found.append(make_gang(gpus, mode, level))
    return found


def required_level(on: Cluster, gpus: int) -> str | None:
    """The lowest network level whose domains, empty, hold ``gpus`` GPUs."""
    for level in range(len(NETWORK_LEVELS) - 1, -1, -1):
        if on.domain_gpus(level) >= gpus:
            return NETWORK_LEVELS[level]
    return None


def make_gang(gpus: int, mode: str, level: str) -> Gang:
    """8-GPU pods; the 8-GPU gang is 8 pods of 1 GPU (so it can use partly used nodes)."""
    gpus_per_pod = 1 if gpus == GPUS_PER_NODE else GPUS_PER_NODE
    requests = PER_GPU.scaled(gpus_per_pod).formatted()
    required = level if mode == "required" else None
    preferred = level if mode == "preferred" else None
    spec = pod_set(
        "workers", gpus // gpus_per_pod, requests, required=required, preferred=preferred
    )
    return Gang(gpus, mode, level, workload(spec, name=f"gang-{gpus}"))
