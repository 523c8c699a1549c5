"""How many pods of one shape each domain can take now, at every level, in one vectorized pass.

Leaves first: per node (hostname leaves) or per pooled leaf, the pods that fit in the free
capacity of the eligible nodes. Then bottom-up over the contiguous child ranges: a domain's room
is the sum of its children's, capped by a spread limit and rounded down to whole slices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoq.core.eligibility import Eligibility
from topoq.core.gpu_devices import pods_on_devices
from topoq.core.ledger import CapacityLedger
from topoq.core.placement.request import Demand, SearchPlan
from topoq.core.tree import IntArray, TopologyTree


@dataclass(frozen=True)
class Room:
    """``by_level[l][d]``: pods of the shape that domain ``d`` of level ``l`` can take now."""

    by_level: tuple[IntArray, ...]
    units: tuple[int, ...]
    """Pods per unit at each level (whole slices), as in :class:`SearchPlan`."""

    def at(self, level: int) -> IntArray:
        return self.by_level[level]

    @property
    def total(self) -> int:
        return int(self.by_level[0].sum()) if len(self.by_level[0]) else 0


def pods_per_leaf(ledger: CapacityLedger, demand: Demand, eligibility: Eligibility) -> IntArray:
    tree = ledger.tree
    leaves = tree.leaf_level.size
    if demand.missing or not len(demand.columns):
        return np.zeros(leaves, dtype=np.int64)
    if tree.leaves_are_nodes:
        fits = pods_per_node(ledger, demand)
        return fits if eligibility.all_eligible else np.where(eligibility.mask, fits, 0)
    wanted = demand.vector[demand.columns]
    if eligibility.all_eligible:
        pooled = ledger.domain_free[-1][:, demand.columns]
    else:
        masked = ledger.free[:, demand.columns] * eligibility.mask[:, None]
        pooled = _range_sums(masked, tree.leaf_level.node_start)
    return np.asarray((pooled // wanted).min(axis=1), dtype=np.int64)


def pods_per_node(ledger: CapacityLedger, demand: Demand) -> IntArray:
    """Per node, the pods of the shape its free capacity holds, eligible or not (read-only:
    kept on the ledger across charges, see :meth:`CapacityLedger.per_node`). ``demand``
    requests something every node of the tree offers. On nodes open to GPU shares, a pod
    that asks for GPUs must also find them on its devices (``pods_on_devices``)."""
    columns, wanted = demand.columns, demand.vector[demand.columns]
    devices = demand.devices
    if devices is None:
        return ledger.per_node(
            ("pods-that-fit", demand.vector.tobytes()),
            lambda free, _rows: _fits_per_row(free, columns, wanted),
        )
    tree = ledger.tree

    def fits(free: IntArray, rows: IntArray | None) -> IntArray:
        shares = tree.shares_gpus if rows is None else tree.shares_gpus[rows]
        on_devices = pods_on_devices(free[:, tree.device_columns], devices)
        by_columns = _fits_per_row(free, columns, wanted)
        return np.where(shares, np.minimum(by_columns, on_devices), by_columns)

    return ledger.per_node(("pods-that-fit", demand.vector.tobytes()), fits)


def _fits_per_row(free: IntArray, columns: IntArray, wanted: IntArray) -> IntArray:
    """``min over columns of free[:, c] // wanted[c]``, one column at a time (one small
    temporary instead of a copy of the whole matrix)."""
    fits: IntArray = free[:, columns[0]] // wanted[0]
    for column, amount in zip(columns[1:], wanted[1:], strict=True):
        np.minimum(fits, free[:, column] // amount, out=fits)
    return fits


def room_by_level(tree: TopologyTree, leaf_pods: IntArray, plan: SearchPlan) -> Room:
    by_level: list[IntArray] = [leaf_pods] * tree.depth
    room = leaf_pods
    for level in range(tree.depth - 1, -1, -1):
        child_start = tree.levels[level].child_start
        if child_start is not None:
            room = _range_sums(by_level[level + 1], child_start)
        if plan.spread is not None and level >= plan.spread[0]:  # at or below the spread level
            room = np.minimum(room, plan.spread[1])
        unit = plan.units[level]
        if unit > 1:
            room = room - room % unit
        by_level[level] = room
    return Room(tuple(by_level), plan.units)


def _range_sums(values: IntArray, starts: IntArray) -> IntArray:
    """Sums of ``values`` over ``starts[i]:starts[i+1]`` along the first axis. The ranges are
    a tree's (a domain's children, a leaf's nodes): contiguous and never empty, so one
    ``reduceat`` sums them (it would give ``values[starts[i]]`` for an empty one)."""
    if len(starts) <= 1:
        return np.zeros((0, *values.shape[1:]), dtype=np.int64)
    return np.asarray(np.add.reduceat(values, starts[:-1], axis=0), dtype=np.int64)
