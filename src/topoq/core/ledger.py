"""Free capacity beside the tree: per node, and aggregated per domain of every level.

A ledger is the per-cycle state; the tree is not touched. Trial placements run on a copy
(``scratch``), so a failed attempt never leaks into the capacity others see.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from topoq.core.tree import IntArray, LevelIndex, TopologyTree
from topoq.domain.errors import InvalidInputError
from topoq.domain.node import NodeName
from topoq.domain.resources import Resources

if TYPE_CHECKING:
    from topoq.core.placement.packing import Packing

MAX_PER_NODE_FIGURES = 256
"""Per-node figures a ledger keeps up to date at most (one per pod shape asked about, and
one per pod shape packed by fragmentation), the least recently asked let go first."""

RowsFigure = Callable[[IntArray, IntArray | None], IntArray]
"""One figure per row of free capacity (rows of ``free``, in order), from those rows and the
nodes they are (their indexes; None when the rows are all nodes, in order) alone."""


class _Origin(NamedTuple):
    """The ledger a copy was made from and how often that one was charged by then."""

    ledger: weakref.ref[CapacityLedger]
    charges: int


class CapacityLedger:
    def __init__(self, tree: TopologyTree, free: IntArray) -> None:
        self.tree = tree
        self.free = free
        self.domain_free: list[IntArray] = _domain_totals(self._summed_levels, free)
        if tree.leaves_are_nodes:  # a host leaf's free capacity is its node's: share the array
            self.domain_free.append(free)
        self._charges = 0
        """How often this ledger was charged (a copy's figures follow it while it is not)."""
        self._figures: dict[Hashable, tuple[IntArray, int]] = {}
        """Per-node figures and ``_charges`` when each was worked out."""
        self._charged: list[IntArray] = []
        """The nodes of each charge after the first ``_listed_from`` (those of the charges
        since figures were kept, or the copy began), until so many rows are listed that
        ``_last_charge`` takes over."""
        self._listed_from = 0
        self._charged_rows = 0
        self._last_charge: IntArray | None = None
        """Per node, the number of its last charge: kept instead of the list once that grew
        long."""
        self._origin: _Origin | None = None
        self.packing: Packing | None = None
        """What packing a single GPU pod by fragmentation needs (``placement.packing``; None:
        such pods are placed as any pod set), handed to every copy."""

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
        matrix = np.zeros_like(tree.capacity)
        for name, resources in used.items():
            index = tree.node_index.get(NodeName(name))
            if index is None:
                if strict:
                    raise InvalidInputError(
                        f"usage names unknown node {name!r}", hint="list only nodes of the cluster"
                    )
                continue
            matrix[index] += tree.resource_vector(resources)
        return cls.with_used(tree, matrix)

    @classmethod
    def with_used(cls, tree: TopologyTree, used: IntArray) -> CapacityLedger:
        """Free = allocatable − ``used`` (a row per node of the tree); overcommitted nodes
        count as full."""
        return cls(tree, np.maximum(tree.capacity - used, 0))

    def scratch(self) -> CapacityLedger:
        """A copy to try placements on; the original is untouched."""
        copy = CapacityLedger.__new__(CapacityLedger)
        copy.tree = self.tree
        copy.free = self.free.copy()
        summed = len(copy._summed_levels)
        copy.domain_free = [totals.copy() for totals in self.domain_free[:summed]]
        if summed < len(self.domain_free):
            copy.domain_free.append(copy.free)
        copy._charges, copy._figures, copy._charged, copy._charged_rows = 0, {}, [], 0
        copy._listed_from, copy._last_charge = 0, None
        copy._origin = _Origin(weakref.ref(self), self._charges)
        copy.packing = self.packing
        return copy

    def per_node(self, key: Hashable, figure: RowsFigure) -> IntArray:
        """``figure(self.free, None)`` (read-only), kept under ``key`` across charges. A cycle's
        ledgers are mostly one ledger charged job after job, and copies of it with a few
        nodes charged (capacity held for a gang taken out, a trial placement): so only the
        rows of the nodes charged since the figure was last worked out — here, or on the
        ledger this one was copied from while that one is unchanged — are worked out again,
        not every node's. The figure of a row must depend on that row of ``free`` and the
        node's index alone (the row changes only through the charge methods)."""
        figures = self._figures
        kept = figures.get(key)
        if kept is None:
            kept = self._from_origin(key, figure)
        if kept is None:
            values = figure(self.free, None)
        else:
            values, since = kept
            if since == self._charges:
                if len(figures) >= MAX_PER_NODE_FIGURES:  # kept in the order last asked
                    figures[key] = figures.pop(key)
                return values
            rows = self._charged_since(since)  # a row listed twice gets one value
            values = values.copy()
            values[rows] = figure(self.free[rows], rows)
        values.setflags(write=False)
        if figures.pop(key, None) is None and len(figures) >= MAX_PER_NODE_FIGURES:
            del figures[next(iter(figures))]  # the one asked for least recently
        figures[key] = (values, self._charges)
        return values

    def _charged_since(self, charge: int) -> IntArray:
        """The nodes charged after the ledger's ``charge``-th charge (some maybe twice)."""
        if self._last_charge is not None:
            return np.flatnonzero(self._last_charge > charge)
        return np.concatenate(self._charged[charge - self._listed_from :])

    def _from_origin(self, key: Hashable, figure: RowsFigure) -> tuple[IntArray, int] | None:
        """The figure of the ledger this one was copied from, stale on every node charged
        here since (all of ``_charged``); None when that ledger is gone or was charged since
        (its figure is then no longer this one's but for a few rows)."""
        origin = self._origin
        source = origin.ledger() if origin is not None else None
        if origin is None or source is None or source._charges != origin.charges:
            return None
        return source.per_node(key, figure), 0

    def _mark_charged(self, nodes: IntArray) -> None:
        """``nodes`` were charged: the kept figures (and a copy's origin's) are stale there.
        A figure is brought up to date by the rows charged since: listed charge by charge
        while few rows were, else by each node's last charge (a ledger charged job after job
        for long, as a replay's), so that a figure is never worked out for every node again."""
        self._charges += 1
        last = self._last_charge
        if last is not None:
            last[nodes] = self._charges
            return
        if not self._figures and self._origin is None:
            self._listed_from = self._charges  # no figure can be older
            return
        self._charged.append(nodes)
        self._charged_rows += len(nodes)
        if self._charged_rows * 4 > len(self.free):
            last = np.zeros(len(self.free), dtype=np.int64)
            for number, charged in enumerate(self._charged, start=self._listed_from + 1):
                last[charged] = number
            self._last_charge, self._charged, self._charged_rows = last, [], 0
            self._listed_from = self._charges

    def without(self, nodes: IntArray, amounts: IntArray | None = None) -> CapacityLedger:
        """A copy without ``amounts[i]`` (a row per entry) of the free capacity of
        ``nodes[i]`` — a node listed twice loses both, none goes below zero — or, with no
        amounts, without the listed nodes' whole free capacity: what is left to others once
        capacity is held for a gang. The domain totals are lowered by what the nodes lose
        instead of being summed again from every node, so it costs a copy, not a rebuild."""
        distinct, wanted = _per_distinct_node(nodes, amounts)
        taken = self.free[distinct] if wanted is None else np.minimum(self.free[distinct], wanted)
        copy = self.scratch()
        copy.charge_nodes(distinct, taken)
        return copy

    def charge_node(self, node: int, amount: IntArray) -> None:
        """Take ``amount`` (a resource vector) from one node and every domain above it."""
        self.free[node] -= amount
        for level, totals in zip(self._summed_levels, self.domain_free, strict=False):
            totals[level.domain_of_node[node]] -= amount
        self._mark_charged(np.asarray([node], dtype=np.int64))

    def charge_nodes(self, nodes: IntArray, amounts: IntArray) -> None:
        """Take ``amounts[i]`` (a row per node) from ``nodes[i]`` (distinct) and their domains."""
        self.free[nodes] -= amounts
        for level, totals in zip(self._summed_levels, self.domain_free, strict=False):
            np.subtract.at(totals, level.domain_of_node[nodes], amounts)
        self._mark_charged(np.asarray(nodes, dtype=np.int64).reshape(-1))

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


def distinct(values: IntArray) -> IntArray:
    """``np.unique(values)``: sorted, each once. Written out because ``np.unique`` without
    its optional outputs asks ``np.ma`` whether the array is masked, which imports
    ``numpy.ma`` (~16 ms) in the first cycle that derives the ledger from the last."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def _per_distinct_node(
    nodes: IntArray, amounts: IntArray | None
) -> tuple[IntArray, IntArray | None]:
    """The distinct nodes in order and, per node, the sum of its rows of ``amounts``; nodes
    already distinct and in order (a hold's, as ``np.flatnonzero`` lists them) as they are."""
    if len(nodes) < 2 or bool((nodes[1:] > nodes[:-1]).all()):
        return nodes, amounts
    if amounts is None:
        return distinct(nodes), None
    each, entry = np.unique(nodes, return_inverse=True)
    summed = np.zeros((len(each), amounts.shape[1]), dtype=np.int64)
    np.add.at(summed, entry.reshape(-1), amounts)
    return each, summed


def _domain_totals(levels: tuple[LevelIndex, ...], free: IntArray) -> list[IntArray]:
    """Each level's domain totals of ``free``, bottom-up: the lowest level summed over its
    nodes, every level above over the totals of its children (the domains one level down are
    contiguous and never empty), so the nodes are walked once, not once per level."""
    if not levels or levels[-1].size == 0:
        return [np.zeros((level.size, free.shape[1]), dtype=np.int64) for level in levels]
    totals = [np.add.reduceat(free, levels[-1].node_start[:-1], axis=0)]
    for level in reversed(levels[:-1]):
        children = cast(IntArray, level.child_start)  # every level but the lowest has them
        totals.append(np.add.reduceat(totals[-1], children[:-1], axis=0))
    return totals[::-1]


def confined(ledger: CapacityLedger, start: int, end: int) -> CapacityLedger:
    """A copy in which only nodes ``start:end`` (one domain's range) have free capacity."""
    free = np.zeros_like(ledger.free)
    free[start:end] = ledger.free[start:end]
    return CapacityLedger(ledger.tree, free)
