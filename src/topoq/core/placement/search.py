"""Choosing domains: as few as possible at each level from the top down, then the tightest fit.

All choices are deterministic: ties break on the domain's index, which follows the natural
order of the label values.
"""

from __future__ import annotations

import numpy as np

from topoq.core.placement.fit import Room
from topoq.core.placement.request import SearchPlan
from topoq.core.tree import IntArray, TopologyTree

LeafTake = tuple[int, int]
"""(leaf index, pods placed in that leaf)."""


def place_in_topology(
    tree: TopologyTree, room: Room, plan: SearchPlan, pods: int
) -> list[LeafTake] | None:
    """Leaves and counts for ``pods`` pods under ``plan``, or None when they do not fit."""
    for level in plan.search_levels:
        domain = pick_one(tree, room, level, None, pods)
        if domain is not None:
            return descend(tree, room, level, domain, pods)
    if plan.split_at_top and room.total >= pods:
        picks = pick_several(room.at(0), np.arange(len(room.at(0))), pods)
        if picks is not None:
            return [
                leaf
                for domain, take in sorted(picks)
                for leaf in descend(tree, room, 0, domain, take)
            ]
    return None


def descend(tree: TopologyTree, room: Room, level: int, domain: int, pods: int) -> list[LeafTake]:
    """Spread ``pods`` over the children of ``domain`` down to the leaves, in tree order."""
    if level == tree.depth - 1:
        return [(domain, pods)]
    child_start = tree.levels[level].child_start
    assert child_start is not None
    children = np.arange(child_start[domain], child_start[domain + 1])
    single = pick_one(tree, room, level + 1, children, pods)
    picks = (
        [(single, pods)] if single is not None else pick_several(room.at(level + 1), children, pods)
    )
    if picks is None:  # cannot happen: a domain's room is at most the sum of its children's
        raise RuntimeError(f"room accounting broke at level {level + 1}, domain {domain}")
    if level + 1 == tree.depth - 1:  # the children are the leaves
        return sorted(picks)
    leaves: list[LeafTake] = []
    for child, take in sorted(picks):
        leaves.extend(descend(tree, room, level + 1, child, take))
    return leaves


def pick_one(
    tree: TopologyTree, room: Room, level: int, candidates: IntArray | None, pods: int
) -> int | None:
    """The one domain of ``level`` that holds all ``pods``: fewest children needed one level
    down, then the least room left over, then the lowest index."""
    room_here = room.at(level)
    if candidates is None:
        fitting = np.flatnonzero(room_here >= pods)
    else:
        fitting = candidates[room_here[candidates] >= pods]
    if not len(fitting):
        return None
    if len(fitting) == 1:
        return int(fitting[0])
    return int(rank_domains(tree, room, level, fitting, pods)[0])


def rank_domains(
    tree: TopologyTree, room: Room, level: int, fitting: IntArray, pods: int
) -> IntArray:
    """``fitting`` domains (each holds ``pods``) ordered best first for :func:`pick_one`."""
    leftover = room.at(level)[fitting] - pods
    children = children_needed(tree, room, level, fitting, pods)
    return fitting[np.lexsort((fitting, leftover, children))]


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
    room_here: IntArray, candidates: IntArray, pods: int
) -> list[tuple[int, int]] | None:
    """As few candidates as possible: the roomiest ones whole, then the tightest one that holds
    the remainder. None when all candidates together hold fewer than ``pods``."""
    rooms = room_here[candidates]
    if int(rooms.sum()) < pods:
        return None
    order = candidates[np.lexsort((candidates, -rooms))]
    picks: list[tuple[int, int]] = []
    remaining = pods
    for position, domain in enumerate(order):
        available = int(room_here[domain])
        if available >= remaining:
            rest = order[position:]
            rest_rooms = room_here[rest]
            fitting = rest[rest_rooms >= remaining]
            best = fitting[np.lexsort((fitting, room_here[fitting]))[0]]
            picks.append((int(best), remaining))
            return picks
        if available > 0:
            picks.append((int(domain), available))
            remaining -= available
    return None
