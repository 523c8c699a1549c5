"""Why a pod set does not fit: a reason code, the numbers behind it, the nodes each cause
excluded, and the smallest changes that would make it fit now."""

from __future__ import annotations

from collections import Counter

import numpy as np

from topoq.core.eligibility import Eligibility
from topoq.core.gpu_devices import pods_on_devices
from topoq.core.ledger import CapacityLedger
from topoq.core.placement.fit import Room, pods_per_leaf, pods_per_node
from topoq.core.placement.request import Demand, SearchPlan
from topoq.core.placement.search import pick_several
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.gpu_share import GPU_SHARE, GPU_SHARING_LABEL, gpus_text
from topoq.domain.placement import ExclusionCause, PlacementReason, PodSetDiagnosis
from topoq.domain.quantity import NVIDIA_GPU, PODS
from topoq.domain.workload import PodSetSpec


def diagnose(
    ledger: CapacityLedger,
    pod_set: PodSetSpec,
    plan: SearchPlan,
    demand: Demand,
    eligibility: Eligibility,
    room: Room,
) -> PodSetDiagnosis:
    tree = ledger.tree
    excluded = excluded_nodes(ledger, demand, eligibility)
    if not len(tree.nodes) or not eligibility.mask.any():
        return PodSetDiagnosis(
            PlacementReason.NO_ELIGIBLE_NODES,
            f"no node of the topology is eligible for pod set {pod_set.name!r}: "
            + _causes_text(excluded),
            {"requested_pods": pod_set.count, "topology_nodes": len(tree.nodes)},
            excluded,
            ("tolerate the nodes' taints or loosen the node selector/affinity",),
        )
    if demand.missing:
        return _missing(pod_set, demand.missing, excluded)
    if room.total < pod_set.count:
        loose_total = int(pods_per_leaf(ledger, demand, eligibility).sum())
        if loose_total >= pod_set.count:
            return _constrained(tree, pod_set, plan, room, excluded, loose_total)
        return _insufficient(pod_set, room, excluded)
    return _unsatisfiable(tree, pod_set, plan, room, excluded)


def _missing(
    pod_set: PodSetSpec, missing: tuple[str, ...], excluded: dict[str, int]
) -> PodSetDiagnosis:
    """No node has a resource the pods ask for at all. A share of a GPU is asked as
    ``nvidia.com/gpu`` and kept as ``topoq.io/gpu-milli``, which only nodes opened to shares
    offer: that one is said in the user's terms, with how to open nodes."""
    others = [name for name in missing if name != GPU_SHARE]
    if len(others) == len(missing):
        named = ", ".join(missing)
        return PodSetDiagnosis(
            PlacementReason.INSUFFICIENT_CAPACITY,
            f"no node of the topology offers {named}",
            {"requested_pods": pod_set.count},
            excluded,
            (f"remove the request for {named} or add nodes that offer it",),
        )
    share = gpus_text(0, pod_set.requests.amount(GPU_SHARE))
    also = f"; no node offers {', '.join(others)} either" if others else ""
    return PodSetDiagnosis(
        PlacementReason.INSUFFICIENT_CAPACITY,
        f"each pod of {pod_set.name!r} asks for a share of one GPU ({share} {NVIDIA_GPU}) "
        f"and no node of the topology is open to GPU shares{also}",
        {"requested_pods": pod_set.count},
        excluded,
        (
            f"ask for whole GPUs ({NVIDIA_GPU}: 1)",
            f'label GPU nodes {GPU_SHARING_LABEL}: "true" to open them to shares',
        ),
    )


def _insufficient(pod_set: PodSetSpec, room: Room, excluded: dict[str, int]) -> PodSetDiagnosis:
    total = room.total
    relaxations = (f"reduce the count to {total}",) if total else ()
    return PodSetDiagnosis(
        PlacementReason.INSUFFICIENT_CAPACITY,
        f"only {total} of {pod_set.count} pods fit in the free capacity of the eligible nodes",
        {
            "requested_pods": pod_set.count,
            "pods_fit_in_topology": total,
            "short_by": pod_set.count - total,
        },
        excluded,
        (*relaxations, "wait for running work to finish, or add nodes", *_open_more(pod_set)),
    )


def _open_more(pod_set: PodSetSpec) -> tuple[str, ...]:
    """For pods that ask for a share of a GPU: only nodes open to shares hold them."""
    if not pod_set.requests.amount(GPU_SHARE):
        return ()
    return (f'label more GPU nodes {GPU_SHARING_LABEL}: "true" to open them to shares',)


def _constrained(
    tree: TopologyTree,
    pod_set: PodSetSpec,
    plan: SearchPlan,
    room: Room,
    excluded: dict[str, int],
    loose_total: int,
) -> PodSetDiagnosis:
    """Enough free capacity, but slices or a spread limit leave too little of it usable."""
    count, total = pod_set.count, room.total
    rules = [
        f"every {layer.size} consecutive pods in one {layer.level} domain"
        for layer in pod_set.topology.slices
    ]
    relaxations = [
        f"use smaller slices than {layer.size} at {layer.level}"
        for layer in pod_set.topology.slices
    ]
    if plan.spread is not None:
        level, most = plan.spread
        rules.append(f"at most {most} pods per {tree.spec.levels[level]} domain")
        relaxations.append(f"allow more than {most} pods per {tree.spec.levels[level]} domain")
    if total:
        relaxations.append(f"reduce the count to {total}")
    return PodSetDiagnosis(
        PlacementReason.TOPOLOGY_UNSATISFIABLE,
        f"{loose_total} pods would fit in the free capacity, but only {total} of {count} "
        f"with {' and '.join(rules)}",
        {
            "requested_pods": count,
            "pods_fit_in_topology": total,
            "pods_fit_without_slices_or_spread": loose_total,
            "short_by": count - total,
        },
        excluded,
        tuple(relaxations),
    )


def _unsatisfiable(
    tree: TopologyTree, pod_set: PodSetSpec, plan: SearchPlan, room: Room, excluded: dict[str, int]
) -> PodSetDiagnosis:
    level = plan.strictest_level
    label = tree.spec.levels[level]
    room_here = room.at(level)
    closest = int(np.lexsort((np.arange(len(room_here)), -room_here))[0])
    best = int(room_here[closest])
    closest_name = tree.levels[level].name(closest)
    count = pod_set.count
    relaxations = _relaxations(tree, plan, room, count, best, closest_name)
    return PodSetDiagnosis(
        PlacementReason.TOPOLOGY_UNSATISFIABLE,
        f"at most {best} of {count} pods fit in any one {label} domain; the closest, "
        f"{closest_name}, is short by {count - best}",
        {
            "requested_pods": count,
            "level": label,
            "max_pods_in_one_domain": best,
            "closest_domain": closest_name,
            "short_by": count - best,
            "pods_fit_in_topology": room.total,
        },
        excluded,
        relaxations,
    )


def _relaxations(
    tree: TopologyTree, plan: SearchPlan, room: Room, count: int, best: int, closest: str
) -> tuple[str, ...]:
    label = tree.spec.levels[plan.strictest_level]
    found: list[str] = []
    for level in range(plan.strictest_level - 1, -1, -1):
        room_here = room.at(level)
        if len(room_here) and int(room_here.max()) >= count:
            domain = tree.levels[level].name(int(np.argmax(room_here)))
            found.append(
                f"require {tree.spec.levels[level]} instead of {label} "
                f"({domain} has room for all {count} pods)"
            )
            break
    if not plan.split_at_top:
        every = np.arange(len(room.at(plan.strictest_level)))
        picks = pick_several(room.at(plan.strictest_level), every, count)
        if picks is not None:
            found.append(
                f"make {label} preferred instead of required "
                f"(the pods would then span at least {len(picks)} {label} domains)"
            )
    if best > 0:
        found.append(f"reduce the count to {best} (room in {closest})")
    return tuple(found)


def excluded_nodes(
    ledger: CapacityLedger, demand: Demand, eligibility: Eligibility
) -> dict[str, int]:
    """Nodes that cannot take even one pod, counted under their first cause."""
    tree = ledger.tree
    causes: Counter[str] = Counter()
    for node in tree.excluded:
        causes[node.reason.value] += 1
    causes.update(eligibility.excluded)
    if demand.missing or not len(demand.columns) or not len(tree.nodes):
        return dict(causes)
    blocked = eligibility.mask & (pods_per_node(ledger, demand) == 0)
    if blocked.any():
        binding = np.bincount(
            binding_resource(ledger, demand)[blocked], minlength=len(demand.columns)
        )
        for column in np.flatnonzero(binding):
            number = binding[column]
            name = tree.resource_names[int(demand.columns[column])]
            cause = (
                ExclusionCause.NO_FREE_POD_SLOT.value
                if name == PODS
                else ExclusionCause.too_little(name)
            )
            causes[cause] += int(number)
    return dict(causes)


def binding_resource(ledger: CapacityLedger, demand: Demand) -> IntArray:
    """Per node, which of ``demand.columns`` (by position) holds the fewest pods of the shape:
    the first such (read-only, kept on the ledger across charges like ``pods_per_node``)."""
    columns, wanted = demand.columns, demand.vector[demand.columns]
    devices = demand.devices
    if devices is None:
        return ledger.per_node(
            ("binding-resource", demand.vector.tobytes()),
            lambda free, _rows: np.argmin(free[:, columns] // wanted, axis=1),
        )
    tree = ledger.tree
    gpu = tree.resource_column[GPU_SHARE if devices.shares_a_device else NVIDIA_GPU]
    gpu_position = int(np.flatnonzero(columns == gpu)[0])

    def binding(free: IntArray, rows: IntArray | None) -> IntArray:
        """The column that holds fewest pods, or the GPU's where the devices hold fewer
        (a share no single device holds, whole GPUs partly taken by shares)."""
        by_columns = free[:, columns] // wanted
        shares = tree.shares_gpus if rows is None else tree.shares_gpus[rows]
        on_devices = pods_on_devices(free[:, tree.device_columns], devices)
        devices_bind = shares & (on_devices < by_columns.min(axis=1))
        return np.where(devices_bind, gpu_position, np.argmin(by_columns, axis=1))

    return ledger.per_node(("binding-resource", demand.vector.tobytes()), binding)


def _causes_text(excluded: dict[str, int]) -> str:
    if not excluded:
        return "the topology has no nodes"
    return ", ".join(f"{count} {cause.replace('_', ' ')}" for cause, count in excluded.items())
