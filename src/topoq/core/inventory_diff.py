"""What a new cluster file changes in the stored inventory (pure): the nodes it adds, removes
and changes, and the gangs holding capacity on those nodes.

Every inventory change a user makes (``POST /cluster/apply``, ``topoq cluster apply``, a start
on another ``--cluster`` file) is this difference, applied by one shell. A node's cordon
(``unschedulable``) and health (``ready``) are topoq's operational state, not inventory: for a
node both sides list, the stored state stands, and only its labels, taints and allocatable can
change. A new node takes the file's state.

A gang is **displaced** when it holds capacity on a node that is removed, or on a node whose
allocatable shrinks below what the gangs on it hold of some resource: such a gang cannot stay
where it runs, so the change is applied only when it may requeue them (a drain). A gang on a
node that changed otherwise (labels, taints, more capacity) keeps running; new placements see
the new node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from topoq.domain.job import JobId, JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.resources import Resources

__all__ = ["InventoryDiff", "NodeChange", "RemovedNode", "displacement", "inventory_diff"]

MAX_LISTED = 5
"""Nodes a refusal names (it says how many more)."""


@dataclass(frozen=True)
class RemovedNode:
    node: NodeSpec
    gangs: tuple[JobId, ...]
    """The gangs holding capacity on it (all displaced)."""


@dataclass(frozen=True)
class NodeChange:
    before: NodeSpec
    after: NodeSpec
    """The new node (its cordon and health the stored ones)."""
    gangs: tuple[JobId, ...]
    """The gangs holding capacity on it."""
    short_of: tuple[str, ...]
    """The resources its gangs hold more of than it now has (then they are displaced)."""

    @property
    def name(self) -> NodeName:
        return self.after.name

    @property
    def what(self) -> tuple[str, ...]:
        """What changed, by name: ``allocatable``, ``labels``, ``taints``."""
        fields = (
            ("allocatable", self.before.allocatable != self.after.allocatable),
            ("labels", dict(self.before.labels) != dict(self.after.labels)),
            ("taints", self.before.taints != self.after.taints),
        )
        return tuple(name for name, changed in fields if changed)

    @property
    def shrinks(self) -> tuple[str, ...]:
        """The resources the node has less of than before."""
        before, after = self.before.allocatable, self.after.allocatable
        return tuple(sorted(name for name in before if after.amount(name) < before[name]))


@dataclass(frozen=True)
class InventoryDiff:
    added: tuple[NodeSpec, ...]
    removed: tuple[RemovedNode, ...]
    changed: tuple[NodeChange, ...]
    nodes: tuple[NodeSpec, ...]
    """The inventory once applied, in the new file's order."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    @property
    def displaced(self) -> tuple[JobId, ...]:
        """The gangs that cannot stay: on a removed node, or on one now short of what they
        hold; each once, sorted."""
        gangs = {job for removed in self.removed for job in removed.gangs}
        gangs.update(job for change in self.changed if change.short_of for job in change.gangs)
        return tuple(sorted(gangs))

    def applied_to(self, stored: Iterable[NodeSpec]) -> list[NodeSpec]:
        """``stored`` with this difference applied (what ``nodes`` is, built from the parts):
        removed nodes dropped, changed ones replaced, added ones put in, in ``nodes``' order."""
        gone = {removed.node.name for removed in self.removed}
        by_name = {node.name: node for node in stored if node.name not in gone}
        by_name.update((change.name, change.after) for change in self.changed)
        by_name.update((node.name, node) for node in self.added)
        return [by_name[node.name] for node in self.nodes]


def inventory_diff(
    stored: Sequence[NodeSpec], wanted: Sequence[NodeSpec], holding: Iterable[JobView]
) -> InventoryDiff:
    """The difference from the ``stored`` inventory to the ``wanted`` one (a cluster file's
    nodes), with the gangs among ``holding`` (the jobs that hold capacity) on each removed
    or changed node."""
    before = {node.name: node for node in stored}
    names = {node.name for node in wanted}
    gangs_on, held_on = _holdings(holding)
    nodes = tuple(_kept_state(node, before.get(node.name)) for node in wanted)
    changed = tuple(
        NodeChange(
            before[node.name],
            node,
            gangs_on.get(node.name, ()),
            _short_of(node, held_on.get(node.name)),
        )
        for node in nodes
        if node.name in before and node != before[node.name]
    )
    return InventoryDiff(
        added=tuple(node for node in nodes if node.name not in before),
        removed=tuple(
            RemovedNode(node, gangs_on.get(node.name, ()))
            for node in stored
            if node.name not in names
        ),
        changed=changed,
        nodes=nodes,
    )


def _kept_state(node: NodeSpec, stored: NodeSpec | None) -> NodeSpec:
    if stored is None or (node.ready, node.unschedulable) == (stored.ready, stored.unschedulable):
        return node
    return replace(node, ready=stored.ready, unschedulable=stored.unschedulable)


def _holdings(
    holding: Iterable[JobView],
) -> tuple[dict[str, tuple[JobId, ...]], dict[str, Resources]]:
    """Per node: the gangs holding capacity on it (sorted) and what they hold in all."""
    gangs: dict[str, list[JobId]] = {}
    held: dict[str, Resources] = {}
    for job in holding:
        if job.allocation is None:
            continue
        for node, amounts in job.allocation.resources_on_node.items():
            gangs.setdefault(node, []).append(job.id)
            held[node] = held.get(node, Resources()) + amounts
    return {node: tuple(sorted(ids)) for node, ids in gangs.items()}, held


def _short_of(node: NodeSpec, held: Mapping[str, int] | None) -> tuple[str, ...]:
    if not held:
        return ()
    return tuple(
        sorted(name for name, amount in held.items() if amount > node.allocatable.amount(name))
    )


def displacement(diff: InventoryDiff) -> str | None:
    """Why ``diff`` cannot be applied without requeueing gangs (None when it can): the nodes
    removed or shrunk under them, and the gangs."""
    if not diff.displaced:
        return None
    parts = [
        f"removes node {removed.node.name} ({', '.join(removed.gangs)} run there)"
        for removed in diff.removed
        if removed.gangs
    ]
    parts += [
        f"shrinks node {change.name} below what {', '.join(change.gangs)} hold of "
        f"{', '.join(change.short_of)}"
        for change in diff.changed
        if change.short_of
    ]
    shown = "; ".join(parts[:MAX_LISTED]) + (
        f"; and {len(parts) - MAX_LISTED} more nodes" if len(parts) > MAX_LISTED else ""
    )
    gangs = len(diff.displaced)
    return f"the new inventory {shown}: {gangs} running gangs would have to go back to the queue"
