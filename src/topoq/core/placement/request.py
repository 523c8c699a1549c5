"""A pod set's request resolved against a topology: level indexes, slice units, search plan.

Invalid requests (an unknown level, a slice above the pod-set level, slices out of order) are
rejected here with a message that says what to change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoq.core.gpu_devices import WHOLE_GPU_MILLI, GpuAsk
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.errors import InvalidRequestError
from topoq.domain.gpu_share import GPU_SHARE
from topoq.domain.quantity import NVIDIA_GPU, PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec


@dataclass(frozen=True)
class SearchPlan:
    """Levels tried for one domain holding the whole pod set, lowest first, then maybe a split."""

    search_levels: tuple[int, ...]
    split_at_top: bool
    units: tuple[int, ...]
    """Pods per unit at each level: a domain's room counts only whole slices of this size."""
    spread: tuple[int, int] | None
    """(level, max pods per domain), if the pod set spreads."""

    @property
    def strictest_level(self) -> int:
        """The highest level a single domain may be taken from."""
        return self.search_levels[-1]


@dataclass(frozen=True)
class Demand:
    """One pod's request as a vector over the tree's resource columns (a pod slot included)."""

    vector: IntArray
    columns: IntArray
    missing: tuple[str, ...]
    """Requested resources no node of the topology offers."""
    devices: GpuAsk | None = None
    """What one pod asks of a node's GPU devices, where some nodes keep them one by one
    (``TopologyTree.device_columns``): whole devices, or a share of one. None elsewhere."""


def demand_of(tree: TopologyTree, requests: Resources) -> Demand:
    per_pod = requests + Resources({PODS: 1})
    missing = tuple(name for name in per_pod if name not in tree.resource_column)
    vector = tree.resource_vector(per_pod)
    return Demand(vector, np.flatnonzero(vector > 0), missing, _device_ask(tree, requests))


def _device_ask(tree: TopologyTree, requests: Resources) -> GpuAsk | None:
    """One pod's ask of GPU devices, where the tree keeps devices (nodes open to shares)."""
    if not len(tree.device_columns):
        return None
    whole, share = requests.amount(NVIDIA_GPU), requests.amount(GPU_SHARE)
    if whole and share:
        raise InvalidRequestError(
            f"a pod asks for {whole} whole GPUs and a share of another",
            hint="a pod asks for whole GPUs or for a share of one GPU, not both",
        )
    if share:
        return GpuAsk(count=1, milli=share)
    return GpuAsk(count=whole, milli=WHOLE_GPU_MILLI) if whole else None


def plan_search(spec: TopologySpec, pod_set: PodSetSpec) -> SearchPlan:
    where = f"pod set {pod_set.name!r}"
    request = pod_set.topology
    required = _level(spec, request.required, where, "required topology")
    preferred = _level(spec, request.preferred, where, "preferred topology")
    lowest = spec.depth - 1
    if required is not None and preferred is not None and preferred < required:
        raise InvalidRequestError(
            f"preferred level {request.preferred} is above required level {request.required}",
            where=where,
            hint="the preferred level must be the required level or one below it",
        )
    start = preferred if preferred is not None else (required if required is not None else lowest)
    stop = required if required is not None else 0
    search_levels = tuple(range(start, stop - 1, -1))
    pod_set_level = required if required is not None else preferred
    units = _slice_units(spec, pod_set, pod_set_level, where)
    spread = None
    if request.spread is not None:
        spread_level = _level(spec, request.spread.level, where, "spread topology")
        if spread_level is not None:
            spread = (spread_level, request.spread.max_pods_per_domain)
    return SearchPlan(search_levels, required is None, units, spread)


def _level(spec: TopologySpec, label: str | None, where: str, what: str) -> int | None:
    return None if label is None else _level_of(spec, label, where, what)


def _level_of(spec: TopologySpec, label: str, where: str, what: str) -> int:
    index = spec.index_of(label)
    if index is None:
        raise InvalidRequestError(
            f"{what} {label!r} is not a level of topology {spec.name!r}",
            where=where,
            hint="use one of: " + ", ".join(spec.levels),
        )
    return index


def _slice_units(
    spec: TopologySpec, pod_set: PodSetSpec, pod_set_level: int | None, where: str
) -> tuple[int, ...]:
    units = [1] * spec.depth
    previous_level = -1
    for layer in pod_set.topology.slices:
        level = _level_of(spec, layer.level, where, "slice topology")
        if pod_set_level is not None and level < pod_set_level:
            raise InvalidRequestError(
                f"slice level {layer.level} is above the pod set's level "
                f"{spec.levels[pod_set_level]}",
                where=where,
                hint="a slice must sit inside the pod set's domain: choose a lower level",
            )
        if level <= previous_level:
            raise InvalidRequestError(
                f"slice level {layer.level} is not below the slice level listed before it",
                where=where,
                hint="list slice layers outermost (highest level) first",
            )
        previous_level = level
        for above in range(level + 1):
            units[above] = max(units[above], layer.size)
    return tuple(units)
