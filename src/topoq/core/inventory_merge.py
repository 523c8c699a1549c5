"""The cluster's nodes as the executor reports them, merged with what topoq's own operators set
on them (pure). A node's cordon (``unschedulable``) and health (``ready``) can change on two
sides: on the cluster (``kubectl cordon``, a node gone NotReady) and in topoq (``topoq node
cordon``, ``topoq node fail``). The executor's report replaces the nodes, but a flag the
cluster did not change since its previous report keeps the value topoq stored, so that a
cordon or a failure set through topoq is not undone by the next report of an unrelated change.
The side that changed last wins: a flag the cluster changed takes the cluster's value. One
exception: a node the cluster reports not ready is not ready in topoq, whatever topoq set —
nothing can run there (a NotReady kubelet, a node Slurm holds DOWN), and a ``topoq node
recover`` that outlived the report would only send gangs to a node that cannot start them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from topoq.domain.node import NodeName, NodeSpec


def merged_inventory(
    reported: Iterable[NodeSpec],
    previous: Mapping[NodeName, NodeSpec],
    stored: Mapping[NodeName, NodeSpec],
) -> list[NodeSpec]:
    """``reported`` (the executor's nodes now), each flag the cluster left as it was in
    ``previous`` (the executor's last report) taken from ``stored`` (topoq's nodes)."""
    merged = []
    for node in reported:
        before, kept = previous.get(node.name), stored.get(node.name)
        if before is None or kept is None:
            merged.append(node)
            continue
        unschedulable, ready = node.unschedulable, node.ready
        if node.unschedulable == before.unschedulable:  # the cluster left it: topoq's stands
            unschedulable = kept.unschedulable
        if node.ready == before.ready and node.ready:  # the cluster's "not ready" always wins
            ready = kept.ready
        changed = (unschedulable, ready) != (node.unschedulable, node.ready)
        merged.append(replace(node, unschedulable=unschedulable, ready=ready) if changed else node)
    return merged
