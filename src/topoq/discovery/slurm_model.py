"""A parsed Slurm topology.conf: the switches of the tree plugin or the blocks of the block plugin.

Line numbers and the source name are kept for messages but take no part in equality, and
:meth:`SlurmTopology.same_structure` compares what Slurm schedules on (which nodes sit under
which switch or block), not the order of lines or the informational ``LinkSpeed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

SlurmPlugin = Literal["tree", "block"]

SLURM_LABEL_DOMAIN = "topology.topoq.io"
SLURM_SWITCH_LABEL_PREFIX = f"{SLURM_LABEL_DOMAIN}/slurm-switch-"
"""Tree plugin: ``…/slurm-switch-1`` is the root tier, ``…/slurm-switch-K`` the leaf tier."""
SLURM_BLOCK_LABEL = f"{SLURM_LABEL_DOMAIN}/slurm-block"
"""Block plugin: the name of the block holding the node."""
SLURM_BLOCK_GROUP_LABEL_PREFIX = f"{SLURM_LABEL_DOMAIN}/slurm-block-group-"
"""Block plugin: ``…/slurm-block-group-<nodes>`` for each BlockSizes entry above the base."""
SLURM_BLOCK_GROUP_VALUE_PREFIX = "group-"
"""A block group's label value is ``group-<nodes>-<n>``: the n-th group of that size, from 1."""

SLURM_TREE_TOPOLOGY_NAME = "slurm-tree"
SLURM_BLOCK_TOPOLOGY_NAME = "slurm-block"
MAX_SWITCH_NAME_LENGTH = 64
"""Slurm refuses longer SwitchName values."""
MAX_BLOCK_LEVEL = 15
"""Slurm's highest block level: a BlockSizes entry may hold at most 2**15 base blocks."""


def slurm_switch_label(tier: int) -> str:
    """The node label of switch tier ``tier`` (1 = the root tier)."""
    return f"{SLURM_SWITCH_LABEL_PREFIX}{tier}"


def slurm_block_group_label(size_nodes: int) -> str:
    return f"{SLURM_BLOCK_GROUP_LABEL_PREFIX}{size_nodes}"


def slurm_block_group_value(size_nodes: int, ordinal: int) -> str:
    return f"{SLURM_BLOCK_GROUP_VALUE_PREFIX}{size_nodes}-{ordinal}"


@dataclass(frozen=True)
class SlurmSwitch:
    """A ``SwitchName=`` line: a leaf switch lists ``nodes``, any other lists ``switches``."""

    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int | None = None
    line: int = field(default=0, compare=False)

    @property
    def is_leaf(self) -> bool:
        return bool(self.nodes)


@dataclass(frozen=True)
class SlurmBlock:
    """A ``BlockName=`` line."""

    name: str
    nodes: tuple[str, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class SlurmTopology:
    """A validated topology.conf. Several root switches (disconnected trees) are allowed.

    ``block_sizes`` is BlockSizes as written (empty when absent): the base block size in nodes,
    then the sizes of the block groups Slurm plans with.
    """

    plugin: SlurmPlugin
    switches: tuple[SlurmSwitch, ...] = ()
    blocks: tuple[SlurmBlock, ...] = ()
    block_sizes: tuple[int, ...] = ()
    source: str = field(default="topology.conf", compare=False)

    @cached_property
    def parents(self) -> dict[str, str]:
        """Parent switch name of every non-root switch."""
        return {child: switch.name for switch in self.switches for child in switch.switches}

    @property
    def roots(self) -> tuple[SlurmSwitch, ...]:
        return tuple(switch for switch in self.switches if switch.name not in self.parents)

    @cached_property
    def switches_by_name(self) -> dict[str, SlurmSwitch]:
        return {switch.name: switch for switch in self.switches}

    def switch_path(self, name: str) -> tuple[str, ...]:
        """Switch names from the root down to ``name`` (the tree must be free of cycles)."""
        path = [name]
        while path[-1] in self.parents:
            path.append(self.parents[path[-1]])
        return tuple(reversed(path))

    @property
    def depth(self) -> int:
        """Switch tiers of a tree (leaves are equally deep once validated); 1 for blocks."""
        leaves = [switch for switch in self.switches if switch.is_leaf]
        return len(self.switch_path(leaves[0].name)) if leaves else 1

    def leaves_in_tree_order(self) -> list[SlurmSwitch]:
        """Leaf switches depth first: roots in file order, children in ``Switches=`` order."""
        ordered: list[SlurmSwitch] = []
        pending = list(reversed(self.roots))
        while pending:
            switch = pending.pop()
            if switch.is_leaf:
                ordered.append(switch)
            children = [self.switches_by_name[name] for name in switch.switches]
            pending.extend(reversed(children))
        return ordered

    @property
    def base_block_size(self) -> int:
        """Nodes per base block: the first BlockSizes entry, else the first block's node count."""
        if self.block_sizes:
            return self.block_sizes[0]
        return len(self.blocks[0].nodes) if self.blocks else 0

    @property
    def block_group_spans(self) -> tuple[int, ...]:
        """Blocks per group for each BlockSizes entry above the base, smallest first.

        As in Slurm, entries past the first one whose groups hold every block are dropped (all
        of them when there is a single block).
        """
        spans: list[int] = []
        if len(self.blocks) <= 1:
            return ()
        for size in self.block_sizes[1:]:
            spans.append(size // self.block_sizes[0])
            if spans[-1] >= len(self.blocks):
                break
        return tuple(spans)

    def same_structure(self, other: SlurmTopology) -> bool:
        """Same plugin and the same grouping of nodes (line order and LinkSpeed aside).

        Blocks compare in order; block groups by which blocks they put together, so a last
        BlockSizes entry of 4 or 8 blocks is the same when there are only 3 blocks.
        """
        return self._structure() == other._structure()

    def _structure(self) -> tuple[object, ...]:
        if self.plugin == "tree":
            switches = frozenset(
                (switch.name, frozenset(switch.nodes), frozenset(switch.switches))
                for switch in self.switches
            )
            return (self.plugin, switches)
        blocks = tuple((block.name, frozenset(block.nodes)) for block in self.blocks)
        groupings = tuple(
            tuple(index // span for index in range(len(self.blocks)))
            for span in self.block_group_spans
        )
        return (self.plugin, blocks, groupings)
