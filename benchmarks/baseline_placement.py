"""The baseline: gang placement by scanning nodes, as a scheduler without aggregated capacity does.

It keeps what such a scheduler keeps — the nodes grouped by their topology labels and each node's
free resources as a plain tuple — and answers a required/preferred request by looking at nodes:

1. For every domain of the level tried, loop over its nodes computing how many pods fit in each
   node's free GPUs, CPU, memory and pod slots (the tightest resource wins), summed per child
   domain. A domain whose sum holds the gang is a candidate.
2. Pick the candidate that needs the fewest children one level down, then the tightest (least
   room left over), then the first in natural label order: the same rules as topoq.
3. Inside it, descend level by level: scan each child's nodes the same way, take one child that
   holds everything, or else the roomiest children whole and the tightest one for the rest;
   when the domains chosen at one level (a split) would together use more children than their
   pods need, pool those children and pick the roomiest whole and the tightest for the rest
   over all of them (topoq's rule, where nothing caps a domain below its children's sum).

``required`` tries only its level; ``preferred`` tries its level, then each level above it (each
one a fresh scan), then splits the gang over layer-1 domains. Nothing is cached between
requests and nothing is aggregated: each level tried re-reads the nodes, which is the point of
the comparison. It is written for speed within that rule: free capacity is a list of int tuples,
the requested resources are resolved to tuple positions once per request, and per-node work is
a handful of integer divisions.

It covers what the benchmark needs: one pod set, hostname leaves, ``required`` or ``preferred``;
no node selectors, taints, slices, spread or groups (those raise :class:`ValueError`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec

NodeTake = tuple[int, int]
"""(node index in tree order, pods placed on it)."""
Wanted = tuple[tuple[int, int], ...]
"""(resource position, amount per pod) for every resource a pod requests."""
NaturalKey = tuple[tuple[int, int | str], ...]
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Survey:
    """Rooms of the candidates of one level, in index order, and of each candidate's children."""

    rooms: dict[int, int]
    child_rooms: dict[int, list[int]]


@dataclass(frozen=True)
class Level:
    node_ranges: list[tuple[int, int]]
    """Domain ``d`` holds the nodes ``node_ranges[d][0]`` up to (not including) ``[1]``."""
    children: list[range]
    """Domain ``d``'s children one level down (empty at the lowest level)."""


class ScanningPlacer:
    """Nodes grouped by topology labels, with free resources per node; no per-domain totals."""

    def __init__(
        self, nodes: Sequence[NodeSpec], spec: TopologySpec, used: Mapping[str, Resources]
    ) -> None:
        if not spec.leaves_are_nodes:
            raise ValueError(f"the baseline needs {HOSTNAME_LABEL} as the lowest level")
        self.labels = spec.levels
        schedulable = [node for node in nodes if node.schedulable and _has_labels(node, spec)]
        schedulable.sort(key=lambda node: (_natural_path(node, spec), node.name))
        self.paths = [tuple(node.labels[label] for label in spec.levels) for node in schedulable]
        self.resources = tuple(sorted({name for node in nodes for name in node.allocatable}))
        self.free = [_free_tuple(node, used.get(node.name), self.resources) for node in schedulable]
        self.levels = _levels(self.paths)

    def place(self, pod_set: PodSetSpec) -> list[NodeTake] | None:
        """Nodes and pod counts for the whole pod set, or None when it does not fit."""
        search, split = self._search_levels(pod_set)
        wanted = self._wanted(pod_set.requests)
        pods = pod_set.count
        survey = None
        for level in search:
            survey = self._survey(level, range(len(self.levels[level].node_ranges)), wanted)
            best = _pick_one(survey, pods, leaf=level == len(self.levels) - 1)
            if best is not None:
                return self._descend(level, best, pods, wanted)
        if not split or survey is None:
            return None
        picks = _pick_several(survey.rooms, pods)  # the last survey is of layer-1
        if picks is None:
            return None
        return self._spread(0, sorted(picks), wanted)

    def _search_levels(self, pod_set: PodSetSpec) -> tuple[list[int], bool]:
        request = pod_set.topology
        if request.slices or request.spread or request.group or pod_set.node_selector:
            raise ValueError("the baseline places plain required/preferred pod sets only")
        if pod_set.affinity_terms or pod_set.tolerations:
            raise ValueError("the baseline places plain required/preferred pod sets only")
        if request.required is not None:
            return [self.labels.index(request.required)], False
        if request.preferred is not None:
            return list(range(self.labels.index(request.preferred), -1, -1)), True
        raise ValueError("the baseline needs a required or preferred level")

    def _wanted(self, requests: Resources) -> Wanted:
        per_pod = requests + Resources({PODS: 1})
        if any(name not in self.resources for name in per_pod):
            return ((len(self.resources), 1),)  # a resource no node has: index the 0 column
        return tuple((self.resources.index(name), amount) for name, amount in per_pod.items())

    def _fit(self, node: int, wanted: Wanted) -> int:
        """Pods of the request that fit in the node's free resources."""
        free = self.free[node]
        return min([free[position] // amount for position, amount in wanted])

    def _survey(self, level: int, candidates: range, wanted: Wanted) -> Survey:
        """Scan every node of every candidate, summing pods that fit per child domain."""
        rooms: dict[int, int] = {}
        child_rooms: dict[int, list[int]] = {}
        if level == len(self.levels) - 1:
            for node in candidates:
                rooms[node] = self._fit(node, wanted)
            return Survey(rooms, child_rooms)
        below = self.levels[level + 1].node_ranges
        for domain in candidates:
            per_child = [
                sum([self._fit(node, wanted) for node in range(*below[child])])
                for child in self.levels[level].children[domain]
            ]
            child_rooms[domain] = per_child
            rooms[domain] = sum(per_child)
        return Survey(rooms, child_rooms)

    def _descend(self, level: int, domain: int, pods: int, wanted: Wanted) -> list[NodeTake]:
        """Spread ``pods`` over the nodes under ``domain``, rescanning them level by level."""
        return self._spread(level, [(domain, pods)], wanted)

    def _spread(self, level: int, group: list[tuple[int, int]], wanted: Wanted) -> list[NodeTake]:
        """The chosen domains of ``level`` and their pods, down to the nodes: per domain one
        child that holds its pods, or the roomiest children whole and the tightest for the
        rest; when that uses more children than the group's pods need, the group's children
        pooled the same way (topoq's rule when nothing caps a domain below its children's sum).
        """
        while level < len(self.levels) - 1:
            leaf = level + 1 == len(self.levels) - 1
            picks: list[tuple[int, int]] = []
            pooled: dict[int, int] = {}
            for domain, pods in group:
                survey = self._survey(level + 1, self.levels[level].children[domain], wanted)
                pooled.update(survey.rooms)
                best = _pick_one(survey, pods, leaf=leaf)
                several = [(best, pods)] if best is not None else _pick_several(survey.rooms, pods)
                if several is None:
                    raise RuntimeError(f"children of domain {domain} at level {level} hold fewer")
                picks.extend(several)
            total = sum(pods for _, pods in group)
            if len(group) > 1 and len(picks) > _children_needed(list(pooled.values()), total):
                picks = _pick_several(pooled, total) or picks
            group, level = picks, level + 1
        return sorted(group)


def _pick_one(survey: Survey, pods: int, *, leaf: bool) -> int | None:
    """The candidate holding all ``pods`` with the fewest children needed, then the least room
    left over, then the lowest index; None when no candidate holds them."""
    best: tuple[int, int, int] | None = None
    for domain, room in survey.rooms.items():
        if room < pods:
            continue
        needed = 0 if leaf else _children_needed(survey.child_rooms[domain], pods)
        key = (needed, room - pods, domain)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]


def _children_needed(child_rooms: list[int], pods: int) -> int:
    covered = 0
    for needed, room in enumerate(sorted(child_rooms, reverse=True), start=1):
        covered += room
        if covered >= pods:
            return needed
    return len(child_rooms) + 1


def _pick_several(rooms: dict[int, int], pods: int) -> list[tuple[int, int]] | None:
    """The roomiest candidates whole, then the tightest one that holds the rest."""
    if sum(rooms.values()) < pods:
        return None
    order = sorted(rooms, key=lambda domain: (-rooms[domain], domain))
    picks: list[tuple[int, int]] = []
    remaining = pods
    for position, domain in enumerate(order):
        if rooms[domain] >= remaining:
            holding = [other for other in order[position:] if rooms[other] >= remaining]
            picks.append((min(holding, key=lambda other: (rooms[other], other)), remaining))
            return picks
        if rooms[domain] > 0:
            picks.append((domain, rooms[domain]))
            remaining -= rooms[domain]
    return None


def _has_labels(node: NodeSpec, spec: TopologySpec) -> bool:
    return all(node.labels.get(label) for label in spec.levels)


def _natural_path(node: NodeSpec, spec: TopologySpec) -> tuple[NaturalKey, ...]:
    """Label values in natural order (``t2`` before ``t10``), as the topology tree sorts them."""
    return tuple(_natural_key(node.labels[label]) for label in spec.levels)


def _natural_key(text: str) -> NaturalKey:
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text))


def _free_tuple(node: NodeSpec, used: Resources | None, names: tuple[str, ...]) -> tuple[int, ...]:
    taken = used or Resources()
    return (*(max(node.allocatable.amount(name) - taken.amount(name), 0) for name in names), 0)


def _levels(paths: list[tuple[str, ...]]) -> list[Level]:
    """Domains of each level as node ranges (nodes are sorted, so each domain is contiguous)."""
    depth = len(paths[0]) if paths else 0
    starts: list[list[int]] = []
    for level in range(depth):
        starts.append(
            [
                index
                for index, path in enumerate(paths)
                if index == 0 or path[: level + 1] != paths[index - 1][: level + 1]
            ]
        )
    levels: list[Level] = []
    for level, first_nodes in enumerate(starts):
        bounds = [*first_nodes, len(paths)]
        ranges = list(pairwise(bounds))
        children: list[range] = [range(0)] * len(ranges)
        if level + 1 < depth:
            below = {node: child for child, node in enumerate(starts[level + 1])}
            below[len(paths)] = len(starts[level + 1])
            children = [range(below[start], below[end]) for start, end in ranges]
        levels.append(Level(ranges, children))
    return levels
