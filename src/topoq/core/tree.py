"""The topology tree, built once per inventory change with dense integer indexes.

Included nodes are sorted by their label path (natural order), so every domain of every level
covers a contiguous range of nodes, and of the domains one level down. Aggregating over a
domain is then a ``reduceat`` over ranges instead of a walk over its nodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from topoq.domain.errors import TopologyError
from topoq.domain.gpu_share import (
    GPU_MILLI_PER_GPU,
    GPU_SHARE,
    MAX_DEVICES_PER_NODE,
    device_resource,
    is_device_resource,
    opens_gpus_to_shares,
)
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import NVIDIA_GPU, PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

IntArray = npt.NDArray[np.int64]
_DIGITS = re.compile(r"(\d+)")


class ExclusionReason(StrEnum):
    NOT_READY = "not_ready"
    CORDONED = "cordoned"
    MISSING_LEVEL_LABEL = "missing_level_label"


@dataclass(frozen=True)
class ExcludedNode:
    name: str
    reason: ExclusionReason
    detail: str


@dataclass(frozen=True)
class LevelIndex:
    """The domains of one level, in tree order.

    ``paths[d]`` are the label values from the top level down to this one; ``node_start[d]`` to
    ``node_start[d + 1]`` is the domain's node range; ``child_start`` likewise indexes the next
    level's domains (absent for the lowest level); ``parent[d]`` the domain one level up.
    """

    label: str
    paths: tuple[tuple[str, ...], ...]
    node_start: IntArray
    child_start: IntArray | None
    parent: IntArray | None
    domain_of_node: IntArray

    @property
    def size(self) -> int:
        return len(self.paths)

    def name(self, domain: int) -> str:
        return "/".join(self.paths[domain])


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``p5-2`` before ``p5-10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text))


class TopologyTree:
    """Immutable: the nodes of the topology, their capacity and the domain indexes per level."""

    def __init__(
        self,
        spec: TopologySpec,
        nodes: Sequence[NodeSpec],
        excluded: Sequence[ExcludedNode],
        levels: Sequence[LevelIndex],
    ) -> None:
        self.spec = spec
        self.nodes = tuple(nodes)
        self.excluded = tuple(excluded)
        self.levels = tuple(levels)
        self.node_index = {node.name: index for index, node in enumerate(self.nodes)}
        offered = [_capacity_of(node, spec.leaves_are_nodes) for node in self.nodes]
        names: set[str] = set()
        for resources in offered:
            names.update(resources)
        names.add(PODS)
        self.resource_names: tuple[str, ...] = tuple(sorted(names))
        self.resource_column = {name: column for column, name in enumerate(self.resource_names)}
        self.capacity: IntArray = self.resource_matrix(offered)
        self.capacity.setflags(write=False)
        devices = sum(1 for name in names if is_device_resource(name))
        self.device_columns: IntArray = np.asarray(
            [self.resource_column[device_resource(index)] for index in range(devices)],
            dtype=np.int64,
        )
        """The columns of ``topoq.io/gpu-device-<i>``, device 0 first (none when no node is
        open to GPU shares): each device's free share on the nodes open to shares."""
        self.shares_gpus: npt.NDArray[np.bool_] = (
            self.capacity[:, self.resource_column[GPU_SHARE]] > 0
            if GPU_SHARE in self.resource_column
            else np.zeros(len(self.nodes), dtype=np.bool_)
        )
        """Per node: open to GPU shares (its devices are kept one by one)."""
        self._memo: dict[object, object] = {}
        self._kept: dict[object, list[object]] = {}
        self._labels: dict[tuple[int, int], Mapping[str, str]] = {}

    @property
    def leaves_are_nodes(self) -> bool:
        return self.spec.leaves_are_nodes

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def leaf_level(self) -> LevelIndex:
        return self.levels[-1]

    def resource_matrix(self, rows: Iterable[Resources]) -> IntArray:
        matrix = [[row.amount(name) for name in self.resource_names] for row in rows]
        if not matrix:
            return np.zeros((0, len(self.resource_names)), dtype=np.int64)
        return np.asarray(matrix, dtype=np.int64)

    def resource_vector(self, resources: Resources) -> IntArray:
        return np.asarray([resources.amount(name) for name in self.resource_names], dtype=np.int64)

    def level_of(self, label: str) -> int | None:
        return self.spec.index_of(label)

    def domain_labels(self, level: int, domain: int) -> Mapping[str, str]:
        """``{label: value}`` for the domain and all its ancestors, highest level first."""
        key = (level, domain)
        labels = self._labels.get(key)
        if labels is None:
            path = self.levels[level].paths[domain]
            labels = MappingProxyType(dict(zip(self.spec.levels, path, strict=False)))
            self._labels[key] = labels
        return labels

    def memo(self, key: object) -> object | None:
        """Values derived from the immutable tree (eligibility masks) are cached here."""
        return self._memo.get(key)

    def remember(self, key: object, value: object) -> None:
        self._memo[key] = value

    def remember_some(self, key: object, value: object, kept: int) -> None:
        """``remember``, keeping at most ``kept`` answers of the kind ``key[0]`` names (the
        oldest forgotten first): for answers whose inputs change from cycle to cycle."""
        kind = key[0] if isinstance(key, tuple) and key else key
        order = self._kept.setdefault(kind, [])
        if key not in self._memo:
            order.append(key)
        self._memo[key] = value
        while len(order) > kept:
            self._memo.pop(order.pop(0), None)


def _capacity_of(node: NodeSpec, leaves_are_nodes: bool) -> Resources:
    """What the scheduler places against on ``node``: its allocatable and, on a node open to
    GPU shares (in a topology whose leaves are nodes: devices are kept per node), each
    device's share (``topoq.io/gpu-device-<i>``, a whole GPU each) and ``topoq.io/gpu-milli``
    (1,000 per GPU, taken by shares only). docs/gpu-sharing.md."""
    gpus = node.allocatable.amount(NVIDIA_GPU)
    if not (leaves_are_nodes and 0 < gpus <= MAX_DEVICES_PER_NODE):
        return node.allocatable
    if not opens_gpus_to_shares(node.labels):
        return node.allocatable
    derived = {device_resource(index): GPU_MILLI_PER_GPU for index in range(gpus)}
    return node.allocatable + Resources(derived | {GPU_SHARE: gpus * GPU_MILLI_PER_GPU})


def build_tree(nodes: Iterable[NodeSpec], spec: TopologySpec) -> TopologyTree:
    """Index the schedulable nodes that carry every level label; record why others are left out."""
    included: list[tuple[tuple[str, ...], NodeSpec]] = []
    excluded: list[ExcludedNode] = []
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise TopologyError(
                f"node {node.name!r} is listed twice",
                where=f"node {node.name}",
                hint="node names must be unique",
            )
        seen.add(node.name)
        path = _path_of(node, spec, excluded)
        if path is not None:
            included.append((path, node))
    included.sort(key=lambda item: (tuple(natural_key(value) for value in item[0]), item[1].name))
    if spec.leaves_are_nodes:
        _reject_shared_hosts(included)
    paths = [path for path, _ in included]
    levels = [_level_index(spec, paths, level) for level in range(spec.depth)]
    _link_levels(levels)
    return TopologyTree(spec, [node for _, node in included], excluded, levels)


def _path_of(
    node: NodeSpec, spec: TopologySpec, excluded: list[ExcludedNode]
) -> tuple[str, ...] | None:
    if not node.ready:
        excluded.append(ExcludedNode(node.name, ExclusionReason.NOT_READY, "the node is not Ready"))
        return None
    if node.unschedulable:
        excluded.append(
            ExcludedNode(
                node.name, ExclusionReason.CORDONED, "the node is cordoned (spec.unschedulable)"
            )
        )
        return None
    missing = [label for label in spec.levels if not node.labels.get(label)]
    if missing:
        excluded.append(
            ExcludedNode(
                node.name,
                ExclusionReason.MISSING_LEVEL_LABEL,
                f"the node has no label {missing[0]}",
            )
        )
        return None
    return tuple(node.labels[label] for label in spec.levels)


def _reject_shared_hosts(included: Sequence[tuple[tuple[str, ...], NodeSpec]]) -> None:
    for (path, node), (next_path, next_node) in pairwise(included):
        if path == next_path:
            raise TopologyError(
                f"nodes {node.name!r} and {next_node.name!r} have the same hostname {path[-1]!r}",
                where=f"node {next_node.name}",
                hint="each node needs its own kubernetes.io/hostname label value",
            )


def _level_index(spec: TopologySpec, paths: Sequence[tuple[str, ...]], level: int) -> LevelIndex:
    domain_paths: list[tuple[str, ...]] = []
    starts: list[int] = []
    domain_of_node = np.empty(len(paths), dtype=np.int64)
    previous: tuple[str, ...] | None = None
    for index, path in enumerate(paths):
        prefix = path[: level + 1]
        if prefix != previous:
            domain_paths.append(prefix)
            starts.append(index)
            previous = prefix
        domain_of_node[index] = len(domain_paths) - 1
    starts.append(len(paths))
    return LevelIndex(
        label=spec.levels[level],
        paths=tuple(domain_paths),
        node_start=np.asarray(starts, dtype=np.int64),
        child_start=None,
        parent=None,
        domain_of_node=domain_of_node,
    )


def _link_levels(levels: list[LevelIndex]) -> None:
    for level in range(len(levels)):
        current = levels[level]
        parent = None
        child_start = None
        if level > 0:
            first_nodes = current.node_start[:-1]
            parent = (
                levels[level - 1].domain_of_node[first_nodes]
                if len(first_nodes)
                else (np.zeros(0, dtype=np.int64))
            )
        if level + 1 < len(levels):
            below = levels[level + 1]
            child_start = np.searchsorted(below.node_start[:-1], current.node_start).astype(
                np.int64
            )
        levels[level] = LevelIndex(
            current.label,
            current.paths,
            current.node_start,
            child_start,
            parent,
            current.domain_of_node,
        )
