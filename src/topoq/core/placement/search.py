"""Choosing domains: as few as possible at each level from the top down, then the tightest fit.

All choices are deterministic: ties break on the domain's index, which follows the natural
order of the label values. A restart's :class:`Affinity` breaks ties before the index (and, for
a single domain, before tightness): domains holding more of the job's previous nodes first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from topoq.core.placement.fit import Room
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.node import NodeName

LeafTake = tuple[int, int]
"""(leaf index, pods placed in that leaf)."""


@dataclass(frozen=True)
class Affinity:
    """``by_level[l][d]``: how many of a job's previous nodes domain ``d`` of level ``l`` holds."""

    by_level: tuple[IntArray, ...]

    def at(self, level: int) -> IntArray:
        return self.by_level[level]


def affinity_of(tree: TopologyTree, node_names: Iterable[str]) -> Affinity | None:
    """The previous nodes' counts per domain; None when none of them is in the tree."""
    known = tree.node_index
    indexes = [known[NodeName(name)] for name in node_names if NodeName(name) in known]
    if not indexes:
        return None
    nodes = np.asarray(indexes, dtype=np.int64)
    return Affinity(
        tuple(
            np.bincount(level.domain_of_node[nodes], minlength=level.size).astype(np.int64)
            for level in tree.levels
        )
    )


def pick_one(
    tree: TopologyTree,
    room: Room,
    level: int,
    candidates: IntArray | None,
    pods: int,
    affinity: Affinity | None = None,
) -> int | None:
    """The one domain of ``level`` that holds all ``pods``: most previous nodes (a restart),
    then fewest children needed one level down, then the least room left over, then the lowest
    index."""
    room_here = room.at(level)
    if candidates is None:
        fitting = np.flatnonzero(room_here >= pods)
    else:
        fitting = candidates[room_here[candidates] >= pods]
    if not len(fitting):
        return None
    if len(fitting) == 1:
        return int(fitting[0])
    return int(rank_domains(tree, room, level, fitting, pods, affinity)[0])


def rank_domains(
    tree: TopologyTree,
    room: Room,
    level: int,
    fitting: IntArray,
    pods: int,
    affinity: Affinity | None = None,
) -> IntArray:
    """``fitting`` domains (each holds ``pods``) ordered best first for :func:`pick_one`."""
    leftover = room.at(level)[fitting] - pods
    children = children_needed(tree, room, level, fitting, pods)
    if affinity is None:
        return fitting[np.lexsort((fitting, leftover, children))]
    return fitting[np.lexsort((fitting, leftover, children, -affinity.at(level)[fitting]))]


def children_needed(
    tree: TopologyTree, room: Room, level: int, domains: IntArray, pods: int
) -> IntArray:
    """For each domain, the fewest children one level down that together hold ``pods``."""
    if level == tree.depth - 1:
        return np.zeros(len(domains), dtype=np.int64)
    padded = child_matrix(tree, level)[domains]
    below = room.at(level + 1)
    values = np.where(padded >= 0, below[np.maximum(padded, 0)], 0)
    descending = -np.sort(-values, axis=1)
    covered = np.cumsum(descending, axis=1) >= pods
    return np.asarray(np.argmax(covered, axis=1) + 1, dtype=np.int64)


def child_matrix(tree: TopologyTree, level: int) -> IntArray:
    """Row ``d``: the child indexes of domain ``d``, padded with -1 (memoized on the tree)."""
    key = ("child-matrix", level)
    cached = tree.memo(key)
    if isinstance(cached, np.ndarray):
        return cached
    child_start = tree.levels[level].child_start
    assert child_start is not None
    counts = np.diff(child_start)
    width = int(counts.max()) if len(counts) else 0
    matrix = np.full((len(counts), width), -1, dtype=np.int64)
    offsets = np.arange(width)
    within = offsets[None, :] < counts[:, None]
    matrix[within] = (child_start[:-1, None] + offsets[None, :])[within]
    tree.remember(key, matrix)
    return matrix


def pick_several(
    room_here: IntArray, candidates: IntArray, pods: int, previous: IntArray | None = None
) -> list[tuple[int, int]] | None:
    """As few candidates as possible: the roomiest ones whole, then the tightest one that holds
    the remainder. None when all candidates together hold fewer than ``pods``. ``previous``
    (a restart's previous nodes per domain) breaks ties among equally roomy candidates and
    picks, among those that hold the remainder, one it ran in before the tightest."""
    rooms = room_here[candidates]
    if int(rooms.sum()) < pods:
        return None
    if previous is None:
        order = candidates[np.lexsort((candidates, -rooms))]
    else:
        order = candidates[np.lexsort((candidates, -previous[candidates], -rooms))]
    picks: list[tuple[int, int]] = []
    remaining = pods
    for position, domain in enumerate(order):
        available = int(room_here[domain])
        if available >= remaining:
            rest = order[position:]
            rest_rooms = room_here[rest]
            fitting = rest[rest_rooms >= remaining]
            tightest = (fitting, room_here[fitting])
            keys = tightest if previous is None else (*tightest, -previous[fitting])
            best = fitting[np.lexsort(keys)[0]]
            picks.append((int(best), remaining))
            return picks
        if available > 0:
            picks.append((int(domain), available))
            remaining -= available
    return None
