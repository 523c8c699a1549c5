"""What jobs hold: per-node resources and per-flavor quota, for ledgers and quota books."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter

import numpy as np

from topoq.core.ledger import CapacityLedger, distinct
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.flavors import flavor_of
from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.job import Allocation, JobId, JobView
from topoq.domain.node import NodeName
from topoq.domain.placement import PlacementResult
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
    """The free capacity the holders leave (nodes outside the tree are skipped)."""
    held = (job.allocation.resources_on_node for job in holders if job.allocation is not None)
    return CapacityLedger.with_used(tree, _used_on_nodes(tree, held))


HeldOnNodes = Mapping[str, Resources]
"""What one holder takes on each node (``Allocation.resources_on_node``)."""
Holding = tuple[TeamName, Allocation]
"""A holder's team and allocation, as a prepared ledger remembers it."""
UsageSums = Mapping[TeamName, Mapping[FlavorName, Mapping[str, int]]]
"""Per team and flavor, the amounts the holders use (plain numbers, zeros left out)."""


@dataclass(frozen=True)
class PreparedLedger:
    """The free capacity the holders of one cycle leave, what each of them was charged, and
    what each team's holders use: the next cycle's is derived from it by the holders that
    changed (``prepared_ledger``'s ``previous``) instead of summed again from every holder.
    Immutable: ``ledger()`` hands out a copy to charge."""

    tree: TopologyTree
    held: Mapping[JobId, Holding]
    used: IntArray
    """Per node of the tree, what the holders use (not capped by capacity)."""
    base: CapacityLedger
    """The free capacity; never charged (``ledger()`` copies it)."""
    sums: UsageSums = field(default_factory=dict)
    came: tuple[JobId, ...] | None = None
    """The holders whose holdings came or moved since the ledger it was derived from, in
    the holders' order; None when it was not derived (every holder is new to it)."""
    views: tuple[JobView, ...] = ()
    """The holders it was made from, kept alive so that their ``id``s stay theirs: the next
    cycle tells the very same views from the ones that changed by those ids alone."""
    view_ids: frozenset[int] = frozenset()

    def ledger(self) -> CapacityLedger:
        """A ledger of the caller's own to charge (the prepared one stays as it is)."""
        return self.base.scratch()

    def usage_by_team(self) -> dict[TeamName, dict[FlavorName, Resources]]:
        """``usage_by_team`` of the holders, from the sums kept."""
        return {
            team: {flavor: Resources(total) for flavor, total in flavors.items()}
            for team, flavors in self.sums.items()
        }


def prepared_ledger(
    tree: TopologyTree, holders: Iterable[JobView], previous: PreparedLedger | None = None
) -> PreparedLedger:
    """The ledger the holders leave, as ``ledger_after`` builds it (the same figures), and
    their usage per team, as ``usage_by_team`` sums it, ready to derive the next cycle's
    from. Given the ``previous`` cycle's (on the same tree), only the holders that came, went
    or moved are released and charged, on the nodes they hold and in their team's sums: one
    job ending costs its nodes, not the cluster's. ``previous`` is left unchanged."""
    views = tuple(holders)
    view_ids = frozenset(map(id, views))
    if previous is None or previous.tree is not tree:
        held = {job.id: (job.team, job.allocation) for job in views if job.allocation is not None}
        used = _used_on_nodes(
            tree, (allocation.resources_on_node for _, allocation in held.values())
        )
        sums = _summed({}, held.values(), ())
        ledger = CapacityLedger.with_used(tree, used)
        return PreparedLedger(tree, held, used, ledger, sums, None, views, view_ids)
    new_views = view_ids - previous.view_ids
    if not new_views and len(view_ids) == len(previous.view_ids):  # the very same holders
        if previous.came == ():
            return previous
        return replace(previous, came=(), views=views, view_ids=view_ids)
    held, came, came_ids, gone = _held_since(views, new_views, previous.held)
    if not gone and not came:
        return replace(previous, held=held, came=(), views=views, view_ids=view_ids)
    indices, rows = rows_on_nodes(tree, (allocation.resources_on_node for _, allocation in came))
    released, released_rows = rows_on_nodes(
        tree, (allocation.resources_on_node for _, allocation in gone)
    )
    changed = np.concatenate([indices, released])
    used = previous.used.copy()
    np.add.at(used, changed, np.concatenate([rows, -released_rows]))
    nodes = distinct(changed)
    free = np.maximum(tree.capacity[nodes] - used[nodes], 0)
    base = previous.base.scratch()
    base.charge_nodes(nodes, base.free[nodes] - free)
    sums = _summed(previous.sums, came, gone)
    return PreparedLedger(tree, held, used, base, sums, tuple(came_ids), views, view_ids)


def _held_since(
    views: tuple[JobView, ...], new_views: frozenset[int], before: Mapping[JobId, Holding]
) -> tuple[dict[JobId, Holding], list[Holding], list[JobId], list[Holding]]:
    """The holdings of the holders ``views`` given those ``before`` (a holding held alike is
    the very same tuple), those that came or moved and their jobs, and those that went or
    moved. Only the views not among the last cycle's (``new_views``: by ``id``) are looked
    at: a view never changes, so the very same view holds what it held. Finding them, and
    the jobs no longer held, runs in C (sets of ids, ``compress``)."""
    held = dict(before)
    gone = [held.pop(job) for job in before.keys() - set(map(_JOB_ID, views))]
    came: list[Holding] = []
    came_ids: list[JobId] = []
    for job in compress(views, map(new_views.__contains__, map(id, views))):
        job_id, allocation = job.id, job.allocation
        was = before.get(job_id)
        if allocation is None:  # holds nothing to count
            if was is not None:
                gone.append(held.pop(job_id))
            continue
        if was is not None and was[1] is allocation and was[0] == job.team:
            continue  # held alike: ``held`` has it already
        holding = (job.team, allocation)
        if was is not None and _same(was, holding):
            continue
        held[job_id] = holding
        came.append(holding)
        came_ids.append(job_id)
        if was is not None:
            gone.append(was)  # it moved: what it held before goes
    return held, came, came_ids, gone


_JOB_ID = attrgetter("id")


def _same(before: Holding | None, now: Holding) -> bool:
    """The same team and allocation (an allocation is kept whole: identity first)."""
    return before is now or (
        before is not None
        and before[0] == now[0]
        and (
            before[1] is now[1]
            or (
                before[1].resources_on_node == now[1].resources_on_node
                and before[1].usage == now[1].usage
            )
        )
    )


def _summed(
    sums: UsageSums, added: Iterable[Holding], removed: Iterable[Holding]
) -> dict[TeamName, dict[FlavorName, Mapping[str, int]]]:
    """``sums`` with the usage of ``added`` counted and that of ``removed`` taken out, zeros
    left out: new dicts for what changes (``sums`` stays as it is)."""
    result: dict[TeamName, dict[FlavorName, Mapping[str, int]]] = {
        team: dict(flavors) for team, flavors in sums.items()
    }
    changing: dict[tuple[TeamName, FlavorName], dict[str, int]] = {}
    for sign, holdings in ((1, added), (-1, removed)):
        for team, allocation in holdings:
            for flavor, amount in allocation.usage.items():
                total = changing.get((team, flavor))
                if total is None:
                    total = dict(result.get(team, {}).get(flavor, {}))
                    changing[(team, flavor)] = total
                for name, value in amount.items():
                    total[name] = total.get(name, 0) + sign * value
    for (team, flavor), total in changing.items():
        kept = {name: value for name, value in total.items() if value}
        flavors = result.setdefault(team, {})
        if kept:
            flavors[flavor] = kept
        else:
            flavors.pop(flavor, None)
        if not flavors:
            del result[team]
    return result


def _used_on_nodes(tree: TopologyTree, held: Iterable[HeldOnNodes]) -> IntArray:
    """Per node of the tree, what ``held`` take there together."""
    used = np.zeros_like(tree.capacity)
    indices, rows = rows_on_nodes(tree, held)
    np.add.at(used, indices, rows)
    return used


def rows_on_nodes(tree: TopologyTree, held: Iterable[HeldOnNodes]) -> tuple[IntArray, IntArray]:
    """(node indices, a resource row each) of what ``held`` take on the tree's nodes; the row
    of each distinct amount is made once (most nodes of a gang take the same)."""
    vectors: dict[Resources, IntArray] = {}
    indices: list[int] = []
    rows: list[IntArray] = []
    for on_nodes in held:
        for name, resources in on_nodes.items():
            index = tree.node_index.get(NodeName(name))
            if index is None:
                continue
            row = vectors.get(resources)
            if row is None:
                row = vectors[resources] = tree.resource_vector(resources)
            indices.append(index)
            rows.append(row)
    width = len(tree.resource_names)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, width), dtype=np.int64)
    return np.asarray(indices, dtype=np.int64), np.vstack(rows)


def usage_by_team(holders: Iterable[JobView]) -> dict[TeamName, dict[FlavorName, Resources]]:
    """What each team's holders use of each flavor (summed as plain numbers, one
    ``Resources`` per team and flavor at the end); a flavor or team they use nothing of is
    left out."""
    sums: dict[TeamName, dict[FlavorName, dict[str, int]]] = {}
    for job in holders:
        if job.allocation is None:
            continue
        flavors = sums.setdefault(job.team, {})
        for flavor, amount in job.allocation.usage.items():
            total = flavors.setdefault(flavor, {})
            for name, value in amount.items():
                total[name] = total.get(name, 0) + value
    found = {
        team: {flavor: Resources(total) for flavor, total in flavors.items() if any(total.values())}
        for team, flavors in sums.items()
    }
    return {team: flavors for team, flavors in found.items() if flavors}


def resources_taken(
    before: CapacityLedger, after: CapacityLedger, placed: PlacementResult | None = None
) -> dict[str, Resources]:
    """Per node, what a placement took: the drop in free capacity between two ledgers, in
    node order. ``placed``: the placement itself, when every pod of it is on a named node
    (leaves that are hosts) only those nodes are compared, not the whole cluster."""
    tree = before.tree
    indices = _placed_on(tree, placed) if placed is not None else None
    if indices is None:
        delta = before.free - after.free
        changed = np.flatnonzero(delta.any(axis=1))
        rows = delta[changed]
    else:
        rows = before.free[indices] - after.free[indices]
        changed = np.asarray(indices, dtype=np.int64)
    taken: dict[str, Resources] = {}
    names = tree.resource_names
    for index, row in zip(changed.tolist(), rows.tolist(), strict=True):
        if any(row):
            taken[tree.nodes[index].name] = Resources(
                {name: int(row[column]) for column, name in enumerate(names)}
            )
    return taken


def _placed_on(tree: TopologyTree, placed: PlacementResult) -> list[int] | None:
    """The indices of the nodes a placement put pods on, in order (None: a leaf pools
    several nodes, so the names alone do not say which)."""
    indices = set()
    for outcome in placed.pod_sets:
        for assignment in outcome.assignments:
            if assignment.node is None:
                return None
            index = tree.node_index.get(NodeName(assignment.node))
            if index is None:
                return None
            indices.add(index)
    return sorted(indices)


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
