"""What jobs hold: per-node resources and per-flavor quota, for ledgers and quota books."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from topoq.core.ledger import CapacityLedger
from topoq.core.tree import TopologyTree
from topoq.domain.flavors import flavor_of
from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.job import JobView
from topoq.domain.node import NodeName
from topoq.domain.resources import Resources


def capacity_by_flavor(tree: TopologyTree, label: str) -> dict[FlavorName, Resources]:
    """Allocatable of the schedulable nodes, summed per flavor (memoized on the tree)."""
    key = ("capacity-by-flavor", label)
    cached = tree.memo(key)
    if isinstance(cached, dict):
        return cached
    totals: dict[FlavorName, Resources] = {}
    for node in tree.nodes:
        flavor = flavor_of(node, label)
        totals[flavor] = totals.get(flavor, Resources()) + node.allocatable
    tree.remember(key, totals)
    return totals


def flavor_values(tree: TopologyTree, label: str) -> dict[FlavorName, tuple[str, ...]]:
    """Each flavor's raw label values (``ml.p5.48xlarge`` and ``p5.48xlarge`` may both occur;
    memoized on the tree: the cycle asks for every candidate)."""
    key = ("flavor-values", label)
    cached = tree.memo(key)
    if isinstance(cached, dict):
        return cached
    values: dict[FlavorName, set[str]] = {}
    for node in tree.nodes:
        raw = node.labels.get(label)
        if raw:
            values.setdefault(flavor_of(node, label), set()).add(raw)
    found = {flavor: tuple(sorted(raws)) for flavor, raws in values.items()}
    tree.remember(key, found)
    return found


def ledger_after(tree: TopologyTree, holders: Iterable[JobView]) -> CapacityLedger:
    used: dict[str, Resources] = {}
    for job in holders:
        if job.allocation is None:
            continue
        for node, resources in job.allocation.resources_on_node.items():
            used[node] = used.get(node, Resources()) + resources
    return CapacityLedger.with_usage(tree, used)


def usage_by_team(holders: Iterable[JobView]) -> dict[TeamName, dict[FlavorName, Resources]]:
    usage: dict[TeamName, dict[FlavorName, Resources]] = {}
    for job in holders:
        if job.allocation is None:
            continue
        flavors = usage.setdefault(job.team, {})
        for flavor, amount in job.allocation.usage.items():
            flavors[flavor] = flavors.get(flavor, Resources()) + amount
    return usage


def resources_taken(before: CapacityLedger, after: CapacityLedger) -> dict[str, Resources]:
    """Per node, what a placement took: the drop in free capacity between two ledgers."""
    tree = before.tree
    delta = before.free - after.free
    taken: dict[str, Resources] = {}
    for index in np.flatnonzero(delta.any(axis=1)):
        row = delta[index]
        taken[tree.nodes[int(index)].name] = Resources(
            {name: int(row[column]) for column, name in enumerate(tree.resource_names)}
        )
    return taken


def release(ledger: CapacityLedger, resources_on_node: Mapping[str, Resources]) -> None:
    """Give a job's resources back to ``ledger`` (nodes that left the tree are skipped)."""
    tree = ledger.tree
    for name, resources in resources_on_node.items():
        index = tree.node_index.get(NodeName(name))
        if index is not None:
            ledger.charge_node(index, -tree.resource_vector(resources))


def total_demand(job: JobView) -> Resources:
    """The job's requests summed over all its pods (the pod slots excluded)."""
    return job.spec.workload.total_requests
