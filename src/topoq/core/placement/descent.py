"""From the chosen domains down to the leaves: at every level, as few domains as possible given
the domains chosen one level up.

A *group* is a set of chosen domains of one level whose pods may move between them: the domains
a gang was split over at the top, or the children chosen inside one domain. For each group the
next level is first chosen domain by domain (one child that holds the domain's share, else the
roomiest children whole and the tightest one for the rest). When that uses more children than
the group needs, the shares are redistributed: the children are ranked by the room they can
really add (their room, capped by every chosen ancestor's room, the biggest first), which is
the fewest children any placement inside the group can use. Where a slice ends (the unit of a
level is larger than the unit one level down), each domain keeps its share of whole slices and
becomes a group of its own.
"""

from __future__ import annotations

import numpy as np

from topoq.core.placement.fit import Room
from topoq.core.placement.request import SearchPlan
from topoq.core.placement.search import Affinity, LeafTake, pick_one, pick_several
from topoq.core.tree import IntArray, TopologyTree

Share = tuple[int, int]
"""(domain index, pods it takes)."""


def place_in_topology(
    tree: TopologyTree, room: Room, plan: SearchPlan, pods: int, affinity: Affinity | None = None
) -> list[LeafTake] | None:
    """Leaves and counts for ``pods`` pods under ``plan``, or None when they do not fit."""
    for level in plan.search_levels:
        domain = pick_one(tree, room, level, None, pods, affinity)
        if domain is not None:
            return descend(tree, room, level, domain, pods, affinity)
    if plan.split_at_top and room.total >= pods:
        previous = affinity.at(0) if affinity is not None else None
        picks = pick_several(room.at(0), np.arange(len(room.at(0))), pods, previous)
        if picks is not None:
            return spread_down(tree, room, -1, 0, sorted(picks), affinity)
    return None


def descend(
    tree: TopologyTree,
    room: Room,
    level: int,
    domain: int,
    pods: int,
    affinity: Affinity | None = None,
) -> list[LeafTake]:
    """Spread ``pods`` over the leaves under ``domain`` (of ``level``), in tree order."""
    return spread_down(tree, room, level, level, [(domain, pods)], affinity)


def spread_down(
    tree: TopologyTree,
    room: Room,
    top: int,
    level: int,
    shares: list[Share],
    affinity: Affinity | None,
) -> list[LeafTake]:
    """The leaves under one group: ``shares`` at ``level``, whose pods may move between them
    below ``top`` (the level whose domain, or -1 for the whole tree, holds a fixed count)."""
    leaf_level = tree.depth - 1
    leaves: list[LeafTake] = []
    pending = [(top, level, shares)]
    while pending:
        group_top, here, group = pending.pop()
        if here == leaf_level:
            leaves.extend(group)
        elif len(group) > 1 and room.units[here] > room.units[here + 1]:
            pending.extend((here, here, [share]) for share in group)
        else:
            below = _next_level(tree, room, group_top, here, group, affinity)
            pending.append((group_top, here + 1, below))
    return sorted(leaves)


def _next_level(
    tree: TopologyTree,
    room: Room,
    top: int,
    level: int,
    group: list[Share],
    affinity: Affinity | None,
) -> list[Share]:
    """The children (one level down) that take the group's pods, as few as possible."""
    child_start = tree.levels[level].child_start
    assert child_start is not None
    previous = affinity.at(level + 1) if affinity is not None else None
    picks: list[Share] = []
    largest = 0  # the group's roomiest child while every domain splits (its first pick, whole)
    for domain, pods in group:
        children = np.arange(child_start[domain], child_start[domain + 1])
        single = pick_one(tree, room, level + 1, children, pods, affinity)
        if single is not None:
            picks.append((single, pods))
            largest = -1
            continue
        several = pick_several(room.at(level + 1), children, pods, previous)
        if several is None:  # cannot happen: a domain's room is at most its children's sum
            raise RuntimeError(f"room accounting broke at level {level + 1}, domain {domain}")
        picks.extend(several)
        largest = max(largest, several[0][1]) if largest >= 0 else largest
    if len(group) == 1:
        return picks
    pods = sum(take for _, take in group)
    if largest > 0 and len(picks) * largest < pods + largest:  # none could hold more
        return picks
    domains = np.fromiter((domain for domain, _ in group), dtype=np.int64, count=len(group))
    items = _children_of(child_start, domains)
    rooms = room.at(level + 1)[items]
    if len(picks) == _fewest_covering(rooms, pods):
        return picks
    pooled = _pooled(tree, room, top, level, items, pods, previous)
    return pooled if len(pooled) < len(picks) else picks


def _children_of(child_start: IntArray, domains: IntArray) -> IntArray:
    """The children of ``domains``, concatenated in their order."""
    first, counts = child_start[domains], child_start[domains + 1] - child_start[domains]
    offsets = np.repeat(np.cumsum(counts) - counts - first, counts)
    return np.asarray(np.arange(int(counts.sum()), dtype=np.int64) - offsets, dtype=np.int64)


def _fewest_covering(rooms: IntArray, pods: int) -> int:
    """How many of ``rooms`` cover ``pods`` at best, ignoring every cap above them."""
    covered = np.cumsum(-np.sort(-rooms)) >= pods
    return int(np.argmax(covered)) + 1


def _pooled(
    tree: TopologyTree,
    room: Room,
    top: int,
    level: int,
    items: IntArray,
    pods: int,
    previous: IntArray | None,
) -> list[Share]:
    """The fewest ``items`` (children of the group's domains) that take ``pods`` when the pods
    may move between the group's domains: the roomiest (capped by their ancestors) whole, then
    the tightest that holds the rest."""
    before = previous[items] if previous is not None else np.zeros(len(items), dtype=np.int64)
    ancestors = _ancestors(tree, top, level, items)
    rooms = room.at(level + 1)[items]
    gains = rooms
    for ancestor_level, ancestor in ancestors:
        gains = _capped(gains, ancestor, room.at(ancestor_level)[ancestor], items, before)
    whole = np.zeros(len(items), dtype=np.int64)
    gains = _capped(gains, whole, np.full(len(items), pods, dtype=np.int64), items, before)
    order = np.lexsort((items, -before, -gains))
    reached = np.cumsum(gains[order])
    needed = int(np.argmax(reached >= pods)) + 1
    chosen = order[: needed - 1]
    remainder = pods - (int(reached[needed - 2]) if needed > 1 else 0)
    available = rooms.copy()
    for ancestor_level, ancestor in ancestors:
        used = np.zeros(tree.levels[ancestor_level].size, dtype=np.int64)
        np.add.at(used, ancestor[chosen], gains[chosen])
        np.minimum(available, room.at(ancestor_level)[ancestor] - used[ancestor], out=available)
    available[chosen] = -1
    fitting = np.flatnonzero(available >= remainder)
    last = fitting[np.lexsort((items[fitting], available[fitting], -before[fitting]))[0]]
    shares = [(int(items[i]), int(gains[i])) for i in chosen]
    return [*shares, (int(items[last]), remainder)]


def _ancestors(
    tree: TopologyTree, top: int, level: int, items: IntArray
) -> list[tuple[int, IntArray]]:
    """For each level from ``level`` up to (not including) ``top``: the items' ancestors."""
    found: list[tuple[int, IntArray]] = []
    current = items
    for child_level in range(level + 1, top + 1, -1):
        parent = tree.levels[child_level].parent
        assert parent is not None
        current = parent[current]
        found.append((child_level - 1, current))
    return found


def _capped(
    gains: IntArray, groups: IntArray, caps: IntArray, items: IntArray, before: IntArray
) -> IntArray:
    """Each item's gain once each group (of items with the same ancestor) holds at most its
    cap: the biggest gains kept whole, the one crossing the cap cut to what is left, the rest
    zero. ``caps[i]`` is the cap of item ``i``'s group."""
    order = np.lexsort((items, -before, -gains, groups))
    ordered, grouped = gains[order], groups[order]
    reached = np.cumsum(ordered)
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    sizes = np.diff(np.r_[first, len(ordered)])
    base = np.repeat(reached[first] - ordered[first], sizes)
    kept = np.clip(caps[order] - (reached - ordered - base), 0, ordered)
    result = np.empty_like(gains)
    result[order] = kept
    return result
