"""Free capacity beside the tree: per node, and aggregated per domain of every level.

A ledger is the per-cycle state; the tree is not touched. Trial placements run on a copy
(``scratch``), so a failed attempt never leaks into the capacity others see.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from topoq.core.tree import IntArray, LevelIndex, TopologyTree
from topoq.domain.errors import InvalidInputError
from topoq.domain.node import NodeName
from topoq.domain.resources import Resources


class CapacityLedger:
    def __init__(self, tree: TopologyTree, free: IntArray) -> None:
        self.tree = tree
        self.free = free
        self.domain_free: list[IntArray] = [
            _sum_ranges(free, level.node_start) for level in self._summed_levels
        ]
        if tree.leaves_are_nodes:  # a host leaf's free capacity is its node's: share the array
            self.domain_free.append(free)

    @property
    def _summed_levels(self) -> tuple[LevelIndex, ...]:
        """Levels whose totals are kept apart from ``free`` (all but host leaves)."""
        levels = self.tree.levels
        return levels[:-1] if self.tree.leaves_are_nodes else levels

    @classmethod
    def empty_cluster(cls, tree: TopologyTree) -> CapacityLedger:
        return cls(tree, tree.capacity.copy())

    @classmethod
    def with_usage(
        cls, tree: TopologyTree, used: Mapping[str, Resources], *, strict: bool = False
    ) -> CapacityLedger:
        """Free = allocatable − used. Usage on nodes outside the topology is ignored unless
        ``strict`` (then it names the unknown node). Overcommitted nodes count as full."""
        free = tree.capacity.copy()
        for name, resources in used.items():
            index = tree.node_index.get(NodeName(name))
            if index is None:
                if strict:
                    raise InvalidInputError(
                        f"usage names unknown node {name!r}", hint="list only nodes of the cluster"
                    )
                continue
            free[index] -= tree.resource_vector(resources)
        np.maximum(free, 0, out=free)
        return cls(tree, free)

    def scratch(self) -> CapacityLedger:
        """A copy to try placements on; the original is untouched."""
        copy = CapacityLedger.__new__(CapacityLedger)
        copy.tree = self.tree
        copy.free = self.free.copy()
        summed = len(copy._summed_levels)
        copy.domain_free = [totals.copy() for totals in self.domain_free[:summed]]
        if summed < len(self.domain_free):
            copy.domain_free.append(copy.free)
        return copy

    def charge_node(self, node: int, amount: IntArray) -> None:
        """Take ``amount`` (a resource vector) from one node and every domain above it."""
        self.free[node] -= amount
        for level, totals in zip(self._summed_levels, self.domain_free, strict=False):
            totals[level.domain_of_node[node]] -= amount

    def charge_nodes(self, nodes: IntArray, amounts: IntArray) -> None:
        """Take ``amounts[i]`` (a row per node) from ``nodes[i]`` (distinct) and their domains."""
        self.free[nodes] -= amounts
        for level, totals in zip(self._summed_levels, self.domain_free, strict=False):
            np.subtract.at(totals, level.domain_of_node[nodes], amounts)

    def charge_pool(self, nodes: Iterable[int], amount: IntArray) -> None:
        """Take ``amount`` from a pooled leaf: each resource from the listed nodes in order."""
        remaining = amount.copy()
        for node in nodes:
            if not remaining.any():
                break
            taken = np.minimum(self.free[node], remaining)
            if taken.any():
                self.charge_node(node, taken)
                remaining -= taken

    def used(self) -> IntArray:
        return self.tree.capacity - self.free


def _sum_ranges(matrix: IntArray, starts: IntArray) -> IntArray:
    """Row sums of ``matrix`` over the ranges ``starts[i]:starts[i+1]``."""
    if len(starts) <= 1:
        return np.zeros((0, matrix.shape[1]), dtype=np.int64)
    prefix = np.vstack([np.zeros((1, matrix.shape[1]), dtype=np.int64), np.cumsum(matrix, axis=0)])
    return np.asarray(prefix[starts[1:]] - prefix[starts[:-1]], dtype=np.int64)


def confined(ledger: CapacityLedger, start: int, end: int) -> CapacityLedger:
    """A copy in which only nodes ``start:end`` (one domain's range) have free capacity."""
    free = np.zeros_like(ledger.free)
    free[start:end] = ledger.free[start:end]
    return CapacityLedger(ledger.tree, free)
