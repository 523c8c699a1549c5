"""Reading Slurm's topology.conf (tree and block plugins) and turning it into topoq nodes.

Every mistake is a :class:`~topoq.domain.errors.TopologyError` whose ``where`` is
``source:LINE`` and whose hint says what to change: a bad generated topology.conf silently
breaks a cluster's scheduling, so nothing doubtful is let through.

Block plugin rules (as Slurm applies them): the base block size is the first BlockSizes entry,
or the first block's node count when BlockSizes is absent; every block must hold at least that
many nodes (blocks may differ in size above it); every further entry must be the base size times
a power of two, ascending.

Nodes from the tree plugin carry ``topology.topoq.io/slurm-switch-1`` (root tier) …
``-K`` (leaf tier); from the block plugin ``topology.topoq.io/slurm-block-group-<nodes>`` for
each BlockSizes entry above the base (largest first), then ``topology.topoq.io/slurm-block``.
A block group is ``<nodes> / base`` consecutive blocks in file order, starting at the first;
its value is ``group-<nodes>-<n>``, and a trailing group may hold fewer blocks. Both end with
``kubernetes.io/hostname``. Export lives in :mod:`topoq.discovery.slurm_export`.
"""

from __future__ import annotations

from topoq.discovery.slurm_blocks import build_blocks
from topoq.discovery.slurm_lines import ConfLine, at, parse_conf_lines
from topoq.discovery.slurm_model import (
    SLURM_BLOCK_GROUP_LABEL_PREFIX,
    SLURM_BLOCK_GROUP_VALUE_PREFIX,
    SLURM_BLOCK_LABEL,
    SLURM_BLOCK_TOPOLOGY_NAME,
    SLURM_LABEL_DOMAIN,
    SLURM_SWITCH_LABEL_PREFIX,
    SLURM_TREE_TOPOLOGY_NAME,
    SlurmBlock,
    SlurmPlugin,
    SlurmSwitch,
    SlurmTopology,
    slurm_block_group_label,
    slurm_block_group_value,
    slurm_switch_label,
)
from topoq.discovery.slurm_tree import build_switches
from topoq.domain.errors import TopologyError
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

__all__ = [
    "SLURM_BLOCK_GROUP_LABEL_PREFIX",
    "SLURM_BLOCK_GROUP_VALUE_PREFIX",
    "SLURM_BLOCK_LABEL",
    "SLURM_BLOCK_TOPOLOGY_NAME",
    "SLURM_LABEL_DOMAIN",
    "SLURM_SWITCH_LABEL_PREFIX",
    "SLURM_TREE_TOPOLOGY_NAME",
    "SlurmBlock",
    "SlurmPlugin",
    "SlurmSwitch",
    "SlurmTopology",
    "cluster_from_slurm",
    "parse_topology_conf",
    "slurm_block_group_label",
    "slurm_block_group_value",
    "slurm_switch_label",
]


def parse_topology_conf(text: str, *, source: str = "topology.conf") -> SlurmTopology:
    """Parse and validate a topology.conf; errors name ``source:LINE`` and say what to fix."""
    lines = parse_conf_lines(text, source)
    tree_lines = [line for line in lines if line.kind == "SwitchName"]
    block_lines = [line for line in lines if line.kind != "SwitchName"]
    if tree_lines and block_lines:
        raise _mixed_plugins(tree_lines[0], block_lines[0], source)
    if tree_lines:
        switches = build_switches(tree_lines, source)
        return SlurmTopology(plugin="tree", switches=switches, source=source)
    if block_lines:
        blocks, sizes = build_blocks(block_lines, source)
        return SlurmTopology(plugin="block", blocks=blocks, block_sizes=sizes, source=source)
    raise TopologyError(
        "the topology is empty: no SwitchName= or BlockName= line",
        where=source,
        hint="describe the network, e.g. 'SwitchName=leaf1 Nodes=p5-[001-016]'",
    )


def cluster_from_slurm(
    topology: SlurmTopology, *, node_resources: Resources
) -> tuple[list[NodeSpec], TopologySpec]:
    """One node per name in the topology, labelled with its switches or blocks (see module doc)."""
    if topology.plugin == "tree":
        return _cluster_from_tree(topology, node_resources)
    return _cluster_from_blocks(topology, node_resources)


def _cluster_from_tree(
    topology: SlurmTopology, node_resources: Resources
) -> tuple[list[NodeSpec], TopologySpec]:
    levels = tuple(slurm_switch_label(tier) for tier in range(1, topology.depth + 1))
    nodes: list[NodeSpec] = []
    for leaf in topology.leaves_in_tree_order():
        switch_labels = dict(zip(levels, topology.switch_path(leaf.name), strict=True))
        nodes.extend(_node(name, switch_labels, node_resources) for name in leaf.nodes)
    return nodes, TopologySpec(SLURM_TREE_TOPOLOGY_NAME, (*levels, HOSTNAME_LABEL))


def _cluster_from_blocks(
    topology: SlurmTopology, node_resources: Resources
) -> tuple[list[NodeSpec], TopologySpec]:
    base = topology.base_block_size
    sizes_largest_first = [base * span for span in reversed(topology.block_group_spans)]
    levels = tuple(slurm_block_group_label(size) for size in sizes_largest_first)
    nodes: list[NodeSpec] = []
    for index, block in enumerate(topology.blocks):
        labels = {
            slurm_block_group_label(size): slurm_block_group_value(
                size, index // (size // base) + 1
            )
            for size in sizes_largest_first
        }
        labels[SLURM_BLOCK_LABEL] = block.name
        nodes.extend(_node(name, labels, node_resources) for name in block.nodes)
    return nodes, TopologySpec(
        SLURM_BLOCK_TOPOLOGY_NAME, (*levels, SLURM_BLOCK_LABEL, HOSTNAME_LABEL)
    )


def _node(name: str, domain_labels: dict[str, str], resources: Resources) -> NodeSpec:
    labels = {**domain_labels, HOSTNAME_LABEL: name}
    return NodeSpec(name=NodeName(name), labels=labels, allocatable=resources)


def _mixed_plugins(tree_line: ConfLine, block_line: ConfLine, source: str) -> TopologyError:
    later, earlier = sorted((tree_line, block_line), key=lambda line: line.number, reverse=True)
    return TopologyError(
        f"{later.kind}= on line {later.number} mixes plugins with "
        f"{earlier.kind}= on line {earlier.number}",
        where=at(source, later.number),
        hint="a cluster uses either the tree plugin (SwitchName=) or the block plugin "
        "(BlockName=, BlockSizes=); keep the lines of one",
    )
